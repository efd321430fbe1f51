"""Contacts: create-or-return by normalized phone (else case-folded email), lookups by phone, email or id,
search by name, phone or email."""
from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from services.contact_fields import (blank_to_none, check_length, is_national, normalize_contact, normalize_email,
                                     normalize_phone, normalize_tag, normalize_tags, MAX_NAME_LENGTH)
from common.errors import Conflict, Invalid, NotFound
from common.ids import new_id, now_iso
from common.spreadsheet import csv_pages
from services import lists
from services.context import JSONObject
from storage import accounts as account_store
from storage import contact_merge as merge_store
from storage import contacts as store
from storage import conversations as conversation_store
from storage import messages as message_store
from storage.interface import Store

public_contact = store.public_contact
tags_of = store.tags_of
MAX_QUERY = 100
_PHONE_CHARS = re.compile(r"^[\d\s+().\-/]+$")


class NamedConflict(Conflict):
    """A phone or email collision naming the contact that has it (existing_name: the contact page's link text)."""

    def __init__(self, message: str, *, existing_id: str | None, field: str | None, existing_name: str) -> None:
        super().__init__(message, existing_id=existing_id, field=field)
        self.existing_name = existing_name


def not_found(message: str = "contact not found") -> NotFound:
    return NotFound(message, code="CONTACT_NOT_FOUND")


async def account_default_country(db: Store, account_id: str) -> str | None:
    """The account's default country (settings.defaultCountry, issue 43 §9: national numbers typed by people are
    read in it), or None."""
    account = await account_store.get_account(db, account_id)
    return account["settings"].get("defaultCountry") if account else None


async def default_country(db: Store, account_id: str, phone: object) -> str | None:
    """The account's default country when the phone was typed without its country code, else None: an
    international number (the usual case) reads nothing more."""
    if not (isinstance(phone, str) and is_national(phone)):
        return None
    return await account_default_country(db, account_id)


async def create_contact(db: Store, account_id: str, *, first_name: str | None = None, last_name: str | None = None,
                         phone: str | None = None, email: str | None = None,
                         tags: object = None) -> tuple[JSONObject, bool]:
    """Spec §2 rules 1-2: phone or email required; an existing phone (or, without a phone, email) is
    returned rather than duplicated, its blank fields filled and the tags added. A national phone is read in the
    account's default country, if it has one. Returns (contact, created)."""
    region = await default_country(db, account_id, phone)
    row = {"id": new_id("ct"), "account_id": account_id, "created_at": now_iso(),
           **normalize_contact(first_name=first_name, last_name=last_name, phone=phone, email=email, region=region),
           "tags": store.tags_text(normalize_tags(tags))}
    try:
        contact, created = await store.find_or_create(db, row)
    except Conflict as exc:  # a new phone with another contact's email: refused as PATCH refuses it
        raise await _named_conflict(db, account_id, exc) from None
    return public_contact(contact), created


async def get_contact(db: Store, account_id: str, contact_id: str) -> JSONObject:
    contact = await store.get_contact(db, account_id, contact_id)
    if contact is None:
        raise not_found(f"no contact with id {contact_id}")
    return public_contact(contact)


async def lookup_contact(db: Store, account_id: str, *, phone_number: str | None = None,
                         email: str | None = None) -> JSONObject:
    """GET /contacts?phoneNumber=|email=: normalized the same way as on creation (a national number in the
    account's default country). With both, the phone is tried first, then the email."""
    # A "+" sent unencoded arrives as a space; normalize_phone reads a leading space as "+".
    phone_number = phone_number if phone_number and phone_number.strip() else None
    given_email = blank_to_none(email)
    if phone_number is None and given_email is None:
        raise Invalid("phoneNumber or email query parameter is required")
    region = await default_country(db, account_id, phone_number)
    phone = normalize_phone(phone_number, field="phoneNumber", region=region) if phone_number else None
    email = normalize_email(given_email, field="email") if given_email else None
    contact = await store.find_by_phone(db, account_id, phone) if phone else None
    if contact is None and email:
        contact = await store.find_by_email(db, account_id, email)
    if contact is None:
        raise not_found("no contact with " + " or ".join(
            f"{name} {value}" for name, value in (("phone", phone), ("email", email)) if value))
    return public_contact(contact)


async def _listing_filters(db: Store, account_id: str, tag: str | None, list_id: str | None) -> dict[str, str | None]:
    """{tag, list_id} of a listing: the tag normalised (Invalid naming tag), the list the account's (LIST_NOT_FOUND
    for another account's, as for an unknown one)."""
    if list_id is not None:
        list_id = (await lists.get_list(db, account_id, list_id))["id"]
    return {"tag": normalize_tag(tag) if tag is not None else None, "list_id": list_id}


async def list_contacts(db: Store, account_id: str, *, tag: str | None = None, list_id: str | None = None,
                        limit: str | None = None, cursor: str | None = None) -> JSONObject:
    """GET /v1/contacts without phoneNumber or email: {data, nextCursor}, every contact of the account in id order,
    only those with the tag and in the list (listId) when given."""
    filters = await _listing_filters(db, account_id, tag, list_id)
    return await lists.keyset_page(lambda after, n: store.page_by_id(db, account_id, after, n, **filters),
                                   limit, cursor, public_contact)


CSV_COLUMNS = ("id", "firstName", "lastName", "phone", "email", "tags", "optedOut", "createdAt")


async def contacts_csv(db: Store, account_id: str, *, tag: str | None = None, list_id: str | None = None,
                       page_size: int = 2000) -> AsyncIterator[str]:
    """GET /v1/contacts/export.csv: every contact (with the tag, in the list, when given) as CSV, yielded a page at a
    time (csv_pages: 100,000 contacts never sit in memory); tags joined by ", "."""
    filters = await _listing_filters(db, account_id, tag, list_id)

    def cells(row: Mapping[str, Any]) -> tuple[object, ...]:
        return (row["id"], row["first_name"], row["last_name"], row["phone"], row["email"],
                ", ".join(store.tags_of(row)), "true" if row["opted_out"] else "false", row["created_at"])
    async for chunk in csv_pages(CSV_COLUMNS, lambda after, n: store.page_by_id(db, account_id, after, n, **filters),
                                 cells, page_size):
        yield chunk


_PATCHABLE = {"firstName": "first_name", "lastName": "last_name", "phone": "phone", "email": "email"}
API_ACTOR = {"via": "api", "by": None}


def user_actor(email: str | None) -> dict[str, str | None]:
    """Who changed an opt-out by hand in the UI (today one admin per account: its email)."""
    return {"via": "user", "by": email}


def _normalize_patch(fields: Mapping[str, Any], region: str | None = None) -> dict[str, Any]:
    """{column: value} of the API's field names given (None or blank clears), validated like on creation (region:
    the account's default country, for a national phone)."""
    changes: dict[str, Any] = {}
    for name, column in _PATCHABLE.items():
        if name not in fields:
            continue
        value = blank_to_none(fields[name])
        if value is not None and name == "phone":
            value = normalize_phone(value, region=region)
        elif value is not None and name == "email":
            value = normalize_email(value)
        elif value is not None:
            check_length(value, name, MAX_NAME_LENGTH)
        changes[column] = value
    return changes


async def update_contact(db: Store, account_id: str, contact_id: str, fields: Mapping[str, Any],
                         actor: Mapping[str, Any], by: Mapping[str, Any] | None = None) -> JSONObject:
    """PATCH a contact: fields holds any of firstName, lastName, phone, email (None clears), tags (the new set) and
    optedOut (a
    bool: by hand, who from actor, see API_ACTOR and user_actor). The same validation as on creation; Conflict
    naming the contact that already has the phone or email; contact.updated queued with the change.
    Returns the contact as the API shows it."""
    changes = _normalize_patch(fields, await default_country(db, account_id, fields.get("phone")))
    if "tags" in fields:  # the whole set: [] (or null) removes every tag
        changes["tags"] = store.tags_text(normalize_tags(fields["tags"]))
    opt_out = None
    if "optedOut" in fields:
        if not isinstance(fields["optedOut"], bool):
            raise Invalid("optedOut must be true or false", field="optedOut")
        opt_out = {"opted_out": fields["optedOut"], **actor}
    try:
        return await store.update_contact(db, account_id, contact_id, changes, opt_out, now_iso(), by)
    except Conflict as exc:
        raise await _named_conflict(db, account_id, exc) from None


async def _named_conflict(db: Store, account_id: str, exc: Conflict) -> Conflict:
    """The phone or email collision, naming the contact that has it as people know it (issue 43 §9: an id alone
    told nobody who); its id stays in the message and in existing_id (error.existingId), and existing_name is
    the page's link text."""
    other = exc.existing_id and await store.get_contact(db, account_id, exc.existing_id)
    if not other:
        return exc
    return NamedConflict(f"{display_name(other)} ({exc.existing_id}) already has this {exc.field}",
                         existing_id=exc.existing_id, field=exc.field, existing_name=display_name(other))


def display_name(contact: Mapping[str, Any]) -> str:
    """How the UI names a contact (a storage row): its name, else its phone, else its email."""
    name = " ".join(p for p in (contact.get("first_name"), contact.get("last_name")) if p)
    return name or contact.get("phone") or contact.get("email") or "Unnamed contact"


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def search_patterns(query: str | None) -> tuple[str | None, str | None]:
    """(text_like, digits_like): LIKE patterns matching a contact by name or email, and by the digits of its
    phone when the query is made of phone characters with at least three digits (+1 (415) 555 finds
    +14155552671)."""
    query = (query or "").strip()[:MAX_QUERY]
    if not query:
        return None, None
    digits = re.sub(r"\D", "", query)
    digits_like = _like(digits) if len(digits) >= 3 and _PHONE_CHARS.match(query) else None
    return _like(query), digits_like


async def search_contacts(db: Store, account_id: str, query: str | None = None, *, tag: str | None = None,
                          before: str | None = None, limit: int = 50) -> JSONObject:
    """{items (storage rows with a display name), next_before}: newest first, matching the query and having the
    tag, if any."""
    text_like, digits_like = search_patterns(query)
    rows = await store.page_contacts(db, account_id, text_like=text_like, digits_like=digits_like,
                                     tag=normalize_tag(tag) if tag else None, before=before or None, limit=limit)
    items = [{**row, "name": display_name(row)} for row in rows[:limit]]
    return {"items": items, "next_before": items[-1]["id"] if len(rows) > limit else None}


async def get_contact_row(db: Store, account_id: str, contact_id: str) -> JSONObject:
    """The storage row of the account's contact (with its display name), or CONTACT_NOT_FOUND."""
    contact = await store.get_contact(db, account_id, contact_id)
    if contact is None:
        raise not_found(f"no contact with id {contact_id}")
    return {**contact, "name": display_name(contact)}


SUGGESTIONS = 10  # the contacts a name picker offers (the list page's datalist)


async def resolve_contact_id(db: Store, account_id: str, text: str | None) -> str:
    """The id of the account's contact named by its id (ct_…), its email, its phone (a national one in the account's
    default country) or its name (issue 43 §9: people add a member by name): the one contact whose name is the
    text (any case), else the only one whose name, phone or email contains it. Invalid when several match or the
    text is empty, CONTACT_NOT_FOUND when none does."""
    text = (text or "").strip()
    if not text:
        raise Invalid("give the contact's name, phone, email or id")
    if text.startswith("ct_"):
        return (await get_contact_row(db, account_id, text))["id"]
    if "@" in text:
        return (await lookup_contact(db, account_id, email=text))["id"]
    if _PHONE_CHARS.match(text):
        return (await lookup_contact(db, account_id, phone_number=text))["id"]
    found = (await search_contacts(db, account_id, text, limit=SUGGESTIONS))["items"]
    exact = [row for row in found if row["name"].casefold() == " ".join(text.split()).casefold()]
    chosen = exact if exact else found
    if len(chosen) == 1:
        return chosen[0]["id"]
    if not chosen:
        raise not_found(f"no contact is called {text!r} or has it in their name, phone or email")
    many = f"{len(chosen)}" if len(chosen) < SUGGESTIONS or exact else f"{SUGGESTIONS} or more"
    raise Invalid(f"{many} contacts match {text!r}: pick one from the suggestions, or give their phone or email")


async def conversation_summary(db: Store, account_id: str, contact_id: str) -> JSONObject:
    """The contact page's conversation: {count (messages), last (the inbox's conversation row: last_preview,
    last_message_at, last_direction, unread_count ...) or None}."""
    return {"count": await message_store.count_contact_messages(db, account_id, contact_id),
            "last": await conversation_store.get(db, account_id, contact_id, now_iso())}


_MERGE_COLUMNS = {name: column for column, name in merge_store.API_NAMES.items()}


async def merge_contacts(db: Store, account_id: str, contact_id: str, other_id: str | None,
                         keep: Mapping[str, Any] | None = None, *, by: Mapping[str, Any] | None = None) -> JSONObject:
    """POST /v1/contacts/{id}/merge: the contact other_id merged into contact_id (storage/contact_merge.py); keep:
    {firstName|lastName|phone|email: "this"|"other"}, whose value stays where both differ. Returns {contact,
    mergedId, moved}. CONTACT_NOT_FOUND, Conflict (a phone or email both have without a choice: error.field names
    it, existingId the other contact), Invalid."""
    other_id = (other_id or "").strip()
    if not other_id:
        raise Invalid("otherId is required: the contact to merge into this one", field="otherId")
    columns: dict[str, str] = {}
    for name, choice in (keep or {}).items():
        if name not in _MERGE_COLUMNS or choice not in ("this", "other"):
            raise Invalid(f"keep.{name} must be \"this\" or \"other\", for firstName, lastName, phone or email",
                          field="keep")
        columns[_MERGE_COLUMNS[name]] = choice
    contact, moved = await merge_store.merge_contacts(db, account_id, contact_id, other_id, columns, by)
    return {"contact": contact, "mergedId": other_id, "moved": moved}
