"""SQL for merging two contacts of one person (POST /v1/contacts/{id}/merge, issue 41): the other contact's
identities, messages, notes, memberships, conversation and history move to the kept one in one transaction, its
blank fields are filled from the other, and the other is deleted.

Lock order (PostgreSQL; SQLite's one writer needs none), the same as an inbound message's: the other's channel
identities (storage/messages.py lock_identity_in_tx: an inbound message for one of them waits, then reads the
identity's new contact), then the phone and email values of both (storage/contacts.py lock_in_tx), then both contact
rows by id. Every lock a merge takes is taken in that order, so it cannot deadlock with inbound messages, PATCHes or
creations, which take subsets of them in the same order."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from common.errors import Conflict, Invalid, NotFound
from common.ids import new_id
from storage.audit import record_by
from storage.contacts import (FILLABLE, MAX_TAGS, contact_not_found, get_contact, lock_in_tx, public_contact, tags_of,
                              tags_text)
from storage.db import fetch_one, writes
from storage.dialect import dialect_of
from storage.events import CONVERSATION_UPDATED, emit_in_tx
from storage.interface import Connection
from storage.messages import lock_identity_in_tx
from storage.outbox import enqueue_notification_in_tx
from storage.rows import ContactRow

UNIQUE = ("phone", "email")  # a phone or an email names one contact: two different ones need a choice
API_NAMES = {"first_name": "firstName", "last_name": "lastName", "phone": "phone", "email": "email"}


def _locked_pair(cx: Connection, account_id: str, contact_id: str, other_id: str) -> tuple[ContactRow, ContactRow]:
    """Both contacts, read after taking the merge's locks in order (module docstring); CONTACT_NOT_FOUND for either
    that is not the account's."""
    from_ids = [r[0] for r in cx.execute("SELECT from_id FROM channel_identities WHERE account_id = ? AND contact_id = ?"
                                         " ORDER BY from_id", (account_id, other_id))]
    for from_id in from_ids:
        lock_identity_in_tx(cx, account_id, from_id)
    rows: list[Mapping[str, Any] | None] = [get_contact.sync(cx, account_id, contact_id),
                                            get_contact.sync(cx, account_id, other_id)]
    if rows[0] is None:
        raise contact_not_found(contact_id)
    if rows[1] is None:
        raise NotFound(f"otherId: no contact with id {other_id}", code="CONTACT_NOT_FOUND", field="otherId")
    for column, value in sorted({(c, row[c]) for row in rows if row for c in UNIQUE if row[c]}):
        lock_in_tx(cx, account_id, column, value)
    cx.execute(f"SELECT id FROM contacts WHERE account_id = ? AND id IN (?, ?) ORDER BY id{dialect_of(cx).for_update}",
               (account_id, contact_id, other_id)).fetchall()
    # both found above, and locked since
    return cast(ContactRow, get_contact.sync(cx, account_id, contact_id)), cast(ContactRow, get_contact.sync(cx, account_id, other_id))


def merged_fields(kept: Mapping[str, Any], other: Mapping[str, Any], keep: Mapping[str, str]) -> dict[str, Any]:
    """{column: value} of the kept contact's changes: its blank fields filled from the other; where both have a
    different value, keep[column] says whose stays ("this": the kept one's, the default for names; "other").
    Conflict naming the phone or email both have, different, without a choice (nothing is written then)."""
    undecided = [c for c in UNIQUE if kept[c] and other[c] and kept[c] != other[c] and c not in keep]
    if undecided:
        names = " and ".join(f"{API_NAMES[c]} ({kept[c]} here, {other[c]} on {other['id']})" for c in undecided)
        raise Conflict(f"both contacts have a different {names}: say which to keep, e.g. "
                       f"\"keep\": {{\"{API_NAMES[undecided[0]]}\": \"other\"}}", field=API_NAMES[undecided[0]],
                       existing_id=other["id"])
    changes = {c: other[c] for c in FILLABLE
               if other[c] and kept[c] != other[c] and (not kept[c] or keep.get(c) == "other")}
    tags = set(tags_of(kept)) | set(tags_of(other))
    if len(tags) > MAX_TAGS:
        raise Conflict(f"together the contacts have {len(tags)} tags; a contact has at most {MAX_TAGS}: remove some "
                       "first", field="tags", existing_id=other["id"])
    if len(tags) > len(tags_of(kept)):
        changes["tags"] = tags_text(tags)
    if other["opted_out"] and not kept["opted_out"]:  # an opt-out on either record is the person's: it stays
        changes.update({c: other[c] for c in ("opted_out", "opt_out_at", "opt_out_via", "opt_out_by")})
    return changes


def _move(cx: Connection, table: str, account_id: str, contact_id: str, other_id: str) -> int:
    return cx.execute(f"UPDATE {table} SET contact_id = ? WHERE account_id = ? AND contact_id = ?",
                      (contact_id, account_id, other_id)).rowcount


def _move_memberships(cx: Connection, account_id: str, contact_id: str, other_id: str) -> int:
    """The other's list memberships move; on a list both are members of, the other's goes and the list counts one
    member less."""
    both = [r[0] for r in cx.execute(
        "SELECT m.list_id FROM list_members m JOIN lists l ON l.id = m.list_id WHERE l.account_id = ?"
        " AND m.contact_id = ? AND EXISTS (SELECT 1 FROM list_members k WHERE k.list_id = m.list_id"
        " AND k.contact_id = ?)", (account_id, other_id, contact_id))]
    for list_id in both:
        cx.execute("DELETE FROM list_members WHERE list_id = ? AND contact_id = ?", (list_id, other_id))
        cx.execute("UPDATE lists SET contact_count = contact_count - 1 WHERE account_id = ? AND id = ?",
                   (account_id, list_id))
    return cx.execute("UPDATE list_members SET contact_id = ? WHERE contact_id = ? AND list_id IN"
                      " (SELECT id FROM lists WHERE account_id = ?)", (contact_id, other_id, account_id)).rowcount


def _move_per_campaign(cx: Connection, table: str, account_id: str, contact_id: str, other_id: str, both_sql: Callable[[str], None]) -> int:
    """Rows keyed (campaign_id, contact_id): the other's move unless the kept contact has one for the campaign;
    both_sql(campaign_id) settles those."""
    rows = cx.execute(f"SELECT t.campaign_id FROM {table} t JOIN campaigns k ON k.id = t.campaign_id"
                      " WHERE k.account_id = ? AND t.contact_id = ?", (account_id, other_id)).fetchall()
    moved = 0
    for (campaign_id,) in rows:
        if cx.execute(f"SELECT 1 FROM {table} WHERE campaign_id = ? AND contact_id = ?",
                      (campaign_id, contact_id)).fetchone():
            both_sql(campaign_id)
        else:
            moved += cx.execute(f"UPDATE {table} SET contact_id = ? WHERE campaign_id = ? AND contact_id = ?",
                                (contact_id, campaign_id, other_id)).rowcount
    return moved


def _move_campaigns(cx: Connection, account_id: str, contact_id: str, other_id: str) -> int:
    """A campaign both were recipients of keeps the other's row (its totals still add up) under an id that names
    nobody, as an erasure leaves it; its replies are added to the kept contact's."""
    def recipient_both(campaign_id: str) -> None:
        cx.execute("UPDATE campaign_recipients SET contact_id = ? WHERE campaign_id = ? AND contact_id = ?",
                   (new_id("merged"), campaign_id, other_id))

    def replies_both(campaign_id: str) -> None:
        cx.execute("UPDATE report_campaign_replies SET replies = replies + (SELECT replies FROM report_campaign_replies"
                   " WHERE campaign_id = ? AND contact_id = ?) WHERE campaign_id = ? AND contact_id = ?",
                   (campaign_id, other_id, campaign_id, contact_id))
        cx.execute("DELETE FROM report_campaign_replies WHERE campaign_id = ? AND contact_id = ?",
                   (campaign_id, other_id))
    return (_move_per_campaign(cx, "campaign_recipients", account_id, contact_id, other_id, recipient_both)
            + _move_per_campaign(cx, "report_campaign_replies", account_id, contact_id, other_id, replies_both))


_CONVERSATION = ("SELECT last_message_id, last_message_at, last_direction, last_author, last_preview, channel,"
                 " unread_count, failed_count, status, snoozed_until, assignee_user_id, handoff_waiting_since,"
                 " last_inbound_id FROM conversations WHERE account_id = ? AND contact_id = ?")
_LAST = ("last_message_id", "last_message_at", "last_direction", "last_author", "last_preview", "channel")
_WAITING = ("open", "pending")  # a status that asks for a person: it wins over resolved and snoozed


def _merge_conversations(cx: Connection, account_id: str, contact_id: str, other_id: str) -> bool:
    """One conversation: the newer one's last message, both unread and failed counts, the kept one's status and
    assignee unless only the other's asks for a person (open, pending) or has an assignee. Returns whether the
    other had one."""
    kept = fetch_one(cx, _CONVERSATION, (account_id, contact_id))
    other = fetch_one(cx, _CONVERSATION, (account_id, other_id))
    if other is None:
        return False
    if kept is None:
        _move(cx, "conversations", account_id, contact_id, other_id)
        return True
    row = dict(kept)
    if other["last_message_id"] > kept["last_message_id"]:
        row.update({c: other[c] for c in _LAST})
    row["unread_count"] += other["unread_count"]
    row["failed_count"] += other["failed_count"]
    row["last_inbound_id"] = max(filter(None, (kept["last_inbound_id"], other["last_inbound_id"])), default=None)
    row["handoff_waiting_since"] = min(filter(None, (kept["handoff_waiting_since"], other["handoff_waiting_since"])),
                                       default=None)
    if kept["status"] not in _WAITING and other["status"] in _WAITING:
        row.update(status=other["status"], snoozed_until=None)
    row["assignee_user_id"] = kept["assignee_user_id"] or other["assignee_user_id"]
    cx.execute("DELETE FROM conversations WHERE account_id = ? AND contact_id = ?", (account_id, other_id))
    cx.execute(f"UPDATE conversations SET {', '.join(f'{c} = ?' for c in row)} WHERE account_id = ? AND contact_id = ?",
               (*row.values(), account_id, contact_id))
    return True


def _bot_pause(cx: Connection, account_id: str, contact_id: str, other_id: str) -> None:
    """The kept contact's bot pause stays; the other's moves when the kept one has none."""
    if cx.execute("SELECT 1 FROM bot_pauses WHERE account_id = ? AND contact_id = ?", (account_id, contact_id)).fetchone():
        cx.execute("DELETE FROM bot_pauses WHERE account_id = ? AND contact_id = ?", (account_id, other_id))
    else:
        _move(cx, "bot_pauses", account_id, contact_id, other_id)


@writes
def merge_contacts(cx: Connection, account_id: str, contact_id: str, other_id: str, keep: Mapping[str, str], by: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, int]]:
    """Merge the account's contact other_id into contact_id (keep: {column: "this"|"other"}, see merged_fields) in
    one transaction; queue contact.updated (the kept contact) and contact.merged ({contactId, mergedId}), record
    contact.merged in the audit list. Returns (the kept contact as the API shows it, {part: rows moved}).
    CONTACT_NOT_FOUND for either id, Conflict (merged_fields), Invalid for one id twice: nothing is written."""
    if contact_id == other_id:
        if get_contact.sync(cx, account_id, contact_id) is None:
            raise contact_not_found(contact_id)
        raise Invalid("otherId is the contact itself: name the other contact to merge into it", field="otherId")
    kept, other = _locked_pair(cx, account_id, contact_id, other_id)
    changes = merged_fields(kept, other, keep)
    moved = {part: _move(cx, table, account_id, contact_id, other_id) for part, table in (
        ("messages", "messages"), ("identities", "channel_identities"), ("notes", "notes"),
        ("optOutChanges", "opt_out_changes"))}
    _move(cx, "csat_asks", account_id, contact_id, other_id)  # their CSAT answers are the kept contact's now
    moved["lists"] = _move_memberships(cx, account_id, contact_id, other_id)
    moved["campaigns"] = _move_campaigns(cx, account_id, contact_id, other_id)
    moved["conversation"] = int(_merge_conversations(cx, account_id, contact_id, other_id))
    _bot_pause(cx, account_id, contact_id, other_id)
    # Replies to the kept contact number on above both's (webhook receivers sort a contact's replies by it).
    cx.execute("UPDATE contacts SET reply_sequence = (SELECT MAX(reply_sequence) FROM contacts WHERE account_id = ?"
               " AND id IN (?, ?)) WHERE account_id = ? AND id = ?",
               (account_id, contact_id, other_id, account_id, contact_id))
    cx.execute("DELETE FROM contacts WHERE account_id = ? AND id = ?", (account_id, other_id))
    if changes:
        cx.execute(f"UPDATE contacts SET {', '.join(f'{c} = ?' for c in changes)} WHERE account_id = ? AND id = ?",
                   (*changes.values(), account_id, contact_id))
    merged = public_contact(cast(ContactRow, get_contact.sync(cx, account_id, contact_id)))  # the kept one
    record_by(cx, by, account_id=account_id, action="contact.merged", subject_id=contact_id,
              detail={"mergedId": other_id, "fields": sorted(API_NAMES.get(c, c) for c in changes), **moved})
    enqueue_notification_in_tx(cx, account_id, "contact.updated", merged)
    enqueue_notification_in_tx(cx, account_id, "contact.merged", {"contactId": contact_id, "mergedId": other_id})
    emit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id})
    return merged, moved
