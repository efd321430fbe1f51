"""SQL for a person's data export (GET /v1/contacts/{id}/export, GDPR art. 15 and 20): every row held on one
contact, read in one transaction so that the parts agree; and the audit entry of the export."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from storage import csat as csat_store, messages as message_store, notes as note_store
from storage.audit import record_by
from storage.contacts import get_contact
from storage.db import fetch_all, fetch_one, reads, writes
from storage.interface import Connection
from storage.lists import lists_of_contact


@reads
def person_rows(cx: Connection, account_id: str, contact_id: str) -> dict[str, Any] | None:
    """{contact, identities, messages, notes, lists, opt_out_changes, conversation, campaigns, csat} as storage rows, every
    list oldest first; None when the contact is not the account's."""
    contact = get_contact.sync(cx, account_id, contact_id)
    if contact is None:
        return None
    where = (account_id, contact_id)
    return {
        "contact": contact,
        "identities": [r[0] for r in cx.execute("SELECT from_id FROM channel_identities WHERE account_id = ?"
                                                " AND contact_id = ? ORDER BY from_id", where)],
        "messages": message_store.all_contact_messages_in_tx(cx, account_id, contact_id),
        "notes": note_store.all_of_contact_in_tx(cx, account_id, contact_id),
        "lists": lists_of_contact.sync(cx, account_id, contact_id),
        "opt_out_changes": fetch_all(cx, "SELECT opted_out, via, at FROM opt_out_changes WHERE account_id = ?"
                                         " AND contact_id = ? ORDER BY at, id", where),
        "conversation": fetch_one(cx, "SELECT status, assignee_user_id, snoozed_until FROM conversations"
                                      " WHERE account_id = ? AND contact_id = ?", where),
        "csat": csat_store.of_contact_in_tx(cx, account_id, contact_id),
        "campaigns": fetch_all(cx, "SELECT r.campaign_id, k.name, r.status, r.message_id FROM campaign_recipients r"
                                   " JOIN campaigns k ON k.id = r.campaign_id WHERE k.account_id = ?"
                                   " AND r.contact_id = ? ORDER BY r.campaign_id", where),
    }


@writes
def record_export(cx: Connection, account_id: str, contact_id: str, counts: Mapping[str, int], by: Mapping[str, Any] | None) -> None:
    """The audit entry of an export: who exported whose data, and how much (never the data)."""
    record_by(cx, by, account_id=account_id, action="contact.exported", subject_id=contact_id, detail=counts)
