"""A fromId's contact (docs/design.md#api-decisions: a fromId maps to one contact for ever): resolved, or made, in the
transaction of the message that names it (storage/inbound.py, storage/outbound.py), from an Identity the service
normalized before it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict, cast

from common.ids import new_id, now_iso
from storage import contacts as contact_store
from storage import messages as store
from storage.interface import Connection
from storage.rows import ContactRow

_UNREAD: Any = object()  # resolve_contact_in_tx: the caller has not read the fromId's contact


class Identity(TypedDict):
    """services/messaging.py _identity's: what the contact resolution needs, normalized before the transaction."""
    account_id: str
    from_id: str
    from_phone: str | None
    from_email: str | None
    values: dict[str, str | None]  # first_name, last_name, email
    thread_contact_id: NotRequired[str]  # an email's verified reference to a contact (services/mail_in.py)


def resolve_contact_in_tx(cx: Connection, identity: Identity, mapped: str | None = _UNREAD) -> tuple[str, bool]:
    """Spec §2 rule 3 / docs/design.md#api-decisions: a fromId maps to one contact for ever. On first sight a fromId that
    is the E.164 phone or the email of an existing contact links to it; otherwise a new contact is made
    (a changed fromId gives a new contact, so customData.email alone never links). Later messages only
    fill blank fields. mapped: the contact the fromId maps to when the caller read it in this transaction
    (None: not mapped then). Returns (contact id, whether a contact was created)."""
    account_id, from_id, values = identity["account_id"], identity["from_id"], identity["values"]
    contact_id = store.identity_contact_id_in_tx(cx, account_id, from_id) if mapped is _UNREAD else mapped
    # Look again once the fromId is ours (PostgreSQL; SQLite's one writer locks nothing): mapped while we waited,
    # or moved by a merge of its contact (storage/contact_merge.py takes the same lock first).
    if store.lock_identity_in_tx(cx, account_id, from_id):
        contact_id = store.identity_contact_id_in_tx(cx, account_id, from_id)
    if contact_id is not None:
        if any(values.values()):  # most messages carry no names or email: nothing to fill, no read
            # the identity's contact: it exists (contact_identities.contact_id is a foreign key)
            contact = cast(ContactRow, contact_store.get_contact.sync(cx, account_id, contact_id))
            contact_store.fill_blanks_in_tx(cx, contact, values)
        return contact_id, False
    linked = None
    if identity.get("thread_contact_id"):  # an email's verified reference: a new address of that contact
        linked = contact_store.get_contact.sync(cx, account_id, identity["thread_contact_id"])
    if linked is None:
        if identity["from_phone"]:
            contact_store.lock_in_tx(cx, account_id, "phone", identity["from_phone"])
        elif identity["from_email"]:
            contact_store.lock_in_tx(cx, account_id, "email", identity["from_email"])
    if linked is not None:
        pass
    elif identity["from_phone"]:
        linked = contact_store.find_by_phone.sync(cx, account_id, identity["from_phone"])
    elif identity["from_email"]:
        linked = contact_store.find_by_email.sync(cx, account_id, identity["from_email"])
    resolved: str
    if linked is not None:
        contact_store.fill_blanks_in_tx(cx, linked, values)
        resolved = linked["id"]
    else:
        row: Mapping[str, Any] = {
            "id": new_id("ct"), "account_id": account_id, "created_at": now_iso(),
            "first_name": values["first_name"], "last_name": values["last_name"],
            "phone": identity["from_phone"], "email": values["email"] or identity["from_email"]}
        if row["email"] and row["email"] != identity["from_email"]:
            # customData.email never links (above), and an email names one contact: another's stays theirs
            row = contact_store.without_taken_email_in_tx(cx, row, refuse=False)
        contact_store.insert_contact_in_tx(cx, row)
        contact_store.emit_created_in_tx(cx, row)
        resolved = row["id"]
    store.insert_identity_in_tx(cx, account_id, from_id, resolved)
    return resolved, linked is None
