"""A person's data (GET /v1/contacts/{id}/export and the contact page's "Download data"): everything Parley holds
on one contact as JSON, for access and portability requests (GDPR art. 15 and 20). Each export is audited
(contact.exported: who, and how many rows of each part; never the data)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.ids import now_iso
from services import csat, messaging
from services.contacts import not_found
from services.context import JSONObject, Services
from storage import person_data as store
from storage.contacts import public_contact
from storage.lists import public_list
from storage.notes import public_note

FORMAT = "parley.contact-export.v1"


async def export_person(services: Services, account_id: str, contact_id: str,
                        by: Mapping[str, Any] | None) -> JSONObject:
    """{format, exportedAt, contact, identities, messages, notes, lists, optOutHistory, conversation, campaigns,
    csatAnswers};
    CONTACT_NOT_FOUND (nothing recorded) for a contact that is not the account's."""
    rows = await store.person_rows(services.db, account_id, contact_id)
    if rows is None:
        raise not_found(f"no contact with id {contact_id}")
    conversation = rows["conversation"]
    data: JSONObject = {
        "format": FORMAT,
        "exportedAt": now_iso(),
        "contact": public_contact(rows["contact"]),
        "identities": [{"fromId": from_id} for from_id in rows["identities"]],
        "messages": [messaging.public_message(services, m) for m in rows["messages"]],
        "notes": [public_note(n) for n in rows["notes"]],
        "lists": [{"id": lst["id"], "name": public_list(lst)["name"]} for lst in rows["lists"]],
        "optOutHistory": [{"optedOut": bool(c["opted_out"]), "via": c["via"], "at": c["at"]}
                          for c in rows["opt_out_changes"]],
        "conversation": conversation and {"status": conversation["status"],
                                          "assigneeUserId": conversation["assignee_user_id"],
                                          "snoozedUntil": conversation["snoozed_until"]},
        "campaigns": [{"campaignId": c["campaign_id"], "name": c["name"], "status": c["status"],
                       "messageId": c["message_id"]} for c in rows["campaigns"]],
        "csatAnswers": [csat.public_answer(row) for row in rows["csat"]],
    }
    await store.record_export(services.db, account_id, contact_id,
                              {part: len(data[part]) for part in ("identities", "messages", "notes", "lists")}, by)
    return data
