"""SQL for erasing a contact (GDPR art. 17, docs/guide.md "Contact page and erasure"): every row that holds
the person's data goes in one transaction; counts that are not about the person (campaign totals, credit
history) stay.

STEPS is the registry, run in order: one (name, step) per table; step(cx, target) deletes (or anonymises) the
contact's rows of that table and returns how many. A table that gains rows about a contact joins with one
entry (the notes of the contact's conversations, say). target holds account_id, contact_id, message_ids (the
contact's messages, read first), outbox_ids (the deliveries holding its data), like (LIKE patterns matching its
id, phone and email inside stored JSON) and event_id (the erasure's own live event).
Children go before their parents (foreign keys are on). What each database keeps of deleted rows is purged
after the commit (Database.purge_deleted: secure_delete and the WAL on SQLite, a rewrite on PostgreSQL)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from common.ids import new_id
from storage import campaigns, report_fold
from storage.audit import record_by
from storage.db import reads, writes
from storage.dialect import escape_like
from storage.events import CONVERSATION_ERASED, ERASED_EVENT, emit_in_tx
from storage.interface import Connection

_CHUNK = 500  # ids per IN (...) list: well under SQLite's and PostgreSQL's parameter limits


def _chunks(ids: Sequence[Any]) -> Iterator[tuple[Sequence[Any], str]]:
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        yield chunk, ", ".join("?" * len(chunk))


def _delete_in(cx: Connection, sql: str, ids: Sequence[Any], *args: Any) -> int:
    """Run sql (with {ids} for an IN list) over ids in chunks; the rows deleted."""
    return sum(cx.execute(sql.format(ids=marks), (*args, *chunk)).rowcount for chunk, marks in _chunks(ids))


def _like_any(column: str, patterns: Sequence[str]) -> tuple[str, list[str]]:
    """SQL matching column against any of the LIKE patterns (backslash escapes), and its arguments."""
    return "(" + " OR ".join(f"{column} LIKE ? ESCAPE '\\'" for _ in patterns) + ")", list(patterns)


def like_pattern(text: str, key: str = "") -> str:
    """A LIKE pattern matching text as a JSON string value ("...") anywhere in a column; with key, only as the
    value of that key in compact JSON ("key":"...")."""
    prefix = f'"{key}":' if key else ""
    return f'%{prefix}"{escape_like(text)}"%'


def _delivery_attempts(cx: Connection, t: Mapping[str, Any]) -> int:
    return _delete_in(cx, "DELETE FROM delivery_attempts WHERE outbox_id IN ({ids})", t["outbox_ids"])


def _outbox(cx: Connection, t: Mapping[str, Any]) -> int:
    # Pending ones too: a reply or notification about an erased person is never sent.
    return _delete_in(cx, "DELETE FROM outbox WHERE id IN ({ids})", t["outbox_ids"])


def _campaign_recipients(cx: Connection, t: Mapping[str, Any]) -> int:
    """The rows stay, counted in their campaign's totals, under a new id that names nobody; the message link and
    the delivery error go. One still in flight (queued or retrying: its delivery is deleted above) is cancelled,
    its counts moved; a pending one is skipped by the runner, as for any contact that no longer exists."""
    rows = cx.execute("SELECT r.campaign_id, r.status FROM campaign_recipients r JOIN campaigns k"
                      " ON k.id = r.campaign_id WHERE k.account_id = ? AND r.contact_id = ?",
                      (t["account_id"], t["contact_id"])).fetchall()
    for campaign_id, status in rows:
        new_status = "cancelled" if status in ("queued", "retrying") else status
        cx.execute("UPDATE campaign_recipients SET contact_id = ?, message_id = NULL, error = NULL, status = ?"
                   " WHERE campaign_id = ? AND contact_id = ?",
                   (new_id("erased"), new_status, campaign_id, t["contact_id"]))
        if new_status != status:
            campaigns.progress_in_tx(cx, campaign_id, {status: -1, new_status: 1})
    return len(rows)


def _opt_out_changes(cx: Connection, t: Mapping[str, Any]) -> int:
    """The Reports' opt-outs per day count these rows: they stay, under one new id that names nobody (the
    person's changes still read as one contact's)."""
    return cx.execute("UPDATE opt_out_changes SET contact_id = ? WHERE account_id = ? AND contact_id = ?",
                      (new_id("erased"), t["account_id"], t["contact_id"])).rowcount


def _report_campaign_replies(cx: Connection, t: Mapping[str, Any]) -> int:
    """A campaign's replies per contact: the row stays for the campaign's figures, under a new id."""
    return cx.execute("UPDATE report_campaign_replies SET contact_id = ? WHERE account_id = ? AND contact_id = ?",
                      (new_id("erased"), t["account_id"], t["contact_id"])).rowcount


def _batch_events(cx: Connection, t: Mapping[str, Any]) -> int:
    """A campaign batch's live event lists its contacts' ids ({campaignId, contactIds}): the erased one's id is
    replaced by one that names nobody, the others stay."""
    return cx.execute("UPDATE events SET data = REPLACE(data, ?, ?) WHERE account_id = ?"
                      " AND data LIKE ? ESCAPE '\\'",
                      (f'"{t["contact_id"]}"', f'"{new_id("erased")}"', t["account_id"],
                       '%"contactIds":' + like_pattern(t["contact_id"]))).rowcount


def _messages(cx: Connection, t: Mapping[str, Any]) -> int:
    return cx.execute("DELETE FROM messages WHERE account_id = ? AND contact_id = ?",
                      (t["account_id"], t["contact_id"])).rowcount


def _by_contact(table: str) -> Callable[[Connection, Mapping[str, Any]], int]:
    def step(cx: Connection, t: Mapping[str, Any]) -> int:
        return cx.execute(f"DELETE FROM {table} WHERE account_id = ? AND contact_id = ?",
                          (t["account_id"], t["contact_id"])).rowcount
    step.__name__ = f"_{table}"
    return step


def _list_members(cx: Connection, t: Mapping[str, Any]) -> int:
    """Memberships go, and each list's count with them (it counts members, not history)."""
    list_ids = [r[0] for r in cx.execute(
        "SELECT m.list_id FROM list_members m JOIN lists l ON l.id = m.list_id"
        " WHERE l.account_id = ? AND m.contact_id = ?", (t["account_id"], t["contact_id"]))]
    for chunk, marks in _chunks(list_ids):
        cx.execute(f"UPDATE lists SET contact_count = contact_count - 1 WHERE account_id = ? AND id IN ({marks})"
                   " AND deleted_at IS NULL", (t["account_id"], *chunk))
    return _delete_in(cx, "DELETE FROM list_members WHERE contact_id = ? AND list_id IN ({ids})", list_ids,
                      t["contact_id"])


def _events(cx: Connection, t: Mapping[str, Any]) -> int:
    """Events naming the contact (by contactId; the contact events carry it as "id" with its name, phone and
    email), but never the account's newest (the erasure's own event, emitted first): each is emptied in place
    rather than deleted, so that the account's numbers stay without gaps and a cursor before them is not taken
    for one past retention (GET /v1/events). An emptied event is of no type any page or client is shown."""
    return cx.execute(f"UPDATE events SET type = '{ERASED_EVENT}', data = '{{}}' WHERE account_id = ? AND id < ?"
                      " AND (data LIKE ? ESCAPE '\\' OR data LIKE ? ESCAPE '\\')",
                      (t["account_id"], t["event_id"], like_pattern(t["contact_id"], "contactId"),
                       like_pattern(t["contact_id"], "id"))).rowcount


def _idempotency_keys(cx: Connection, t: Mapping[str, Any]) -> int:
    """Answers remembered for Idempotency-Key retries that hold the contact (the contact object, its id)."""
    where, args = _like_any("result", t["like"])
    return cx.execute(f"DELETE FROM idempotency_keys WHERE account_id = ? AND {where}",
                      (t["account_id"], *args)).rowcount


def _contacts(cx: Connection, t: Mapping[str, Any]) -> int:
    return cx.execute("DELETE FROM contacts WHERE account_id = ? AND id = ?",
                      (t["account_id"], t["contact_id"])).rowcount


STEPS = [
    ("deliveryAttempts", _delivery_attempts),
    ("webhooks", _outbox),
    ("campaignRecipientsAnonymised", _campaign_recipients),
    ("optOutChangesAnonymised", _opt_out_changes),
    ("reportCampaignRepliesAnonymised", _report_campaign_replies),
    ("batchEventsAnonymised", _batch_events),
    ("messages", _messages),
    ("channelIdentities", _by_contact("channel_identities")),
    ("listMemberships", _list_members),
    ("botPauses", _by_contact("bot_pauses")),
    ("notes", _by_contact("notes")),
    ("csatAnswers", _by_contact("csat_asks")),
    ("conversations", _by_contact("conversations")),
    ("liveEvents", _events),
    ("idempotencyAnswers", _idempotency_keys),
    ("contacts", _contacts),
]
# The tables STEPS deletes from (PostgreSQL rewrites them after the commit: VACUUM FULL).
ERASED_TABLES = ("delivery_attempts", "outbox", "campaign_recipients", "opt_out_changes", "report_campaign_replies",
                 "messages", "channel_identities",
                 "list_members", "bot_pauses", "notes", "csat_asks", "conversations", "events", "idempotency_keys", "contacts")


def _target(cx: Connection, account_id: str, contact: Mapping[str, Any]) -> dict[str, Any]:
    contact_id = contact["id"]
    like = [like_pattern(v) for v in (contact_id, contact["phone"], contact["email"]) if v]
    message_ids = [r[0] for r in cx.execute("SELECT id FROM messages WHERE account_id = ? AND contact_id = ?",
                                            (account_id, contact_id))]
    outbox_ids: set[int] = set()
    for chunk, marks in _chunks(message_ids):
        outbox_ids.update(r[0] for r in cx.execute(
            f"SELECT id FROM outbox WHERE account_id = ? AND message_id IN ({marks})", (account_id, *chunk)))
    # Notifications (contact.created, .updated, .tagged) carry the contact in their payload.
    where, args = _like_any("payload", like)
    outbox_ids.update(r[0] for r in cx.execute(
        f"SELECT id FROM outbox WHERE account_id = ? AND kind = 'notification' AND {where}", (account_id, *args)))
    # Parley's mails about the contact (an agent's, a reply mailed to a web visitor) name it by its id.
    where, args = _like_any("payload", like[:1])
    outbox_ids.update(r[0] for r in cx.execute(
        f"SELECT id FROM outbox WHERE account_id = ? AND kind = 'mail' AND {where}", (account_id, *args)))
    return {"account_id": account_id, "contact_id": contact_id, "message_ids": message_ids,
            "outbox_ids": sorted(outbox_ids), "like": like}


@reads
def media_of_contact(cx: Connection, account_id: str, contact_id: str) -> list[str]:
    """The stored media (media:<sha256>) the contact's messages name."""
    return [r[0] for r in cx.execute(
        "SELECT DISTINCT media_url FROM messages WHERE account_id = ? AND contact_id = ? AND media_url LIKE 'media:%'",
        (account_id, contact_id))]


@writes
def erase_contact(cx: Connection, account_id: str, contact_id: str, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Erase the account's contact and everything holding its data, in this one transaction, recorded in the
    audit list as contact.erased by ``by`` (storage.audit.record_by: who, never what the contact was); returns
    {id, removed: {step name: rows}}. CONTACT_NOT_FOUND (nothing written) for an id that is not the account's."""
    from storage.contacts import contact_not_found, get_contact
    contact = get_contact.sync(cx, account_id, contact_id)
    if contact is None:
        raise contact_not_found(contact_id)
    target = _target(cx, account_id, contact)
    # Open pages drop the conversation; emitted first so that it is the account's newest event (see _events).
    target["event_id"] = emit_in_tx(cx, account_id, CONVERSATION_ERASED, {"contactId": contact_id})
    # The Reports keep counting what happened: the rows not folded yet are counted before they go.
    report_fold.fold_contact_in_tx(cx, account_id, contact_id, target["outbox_ids"])
    removed = {name: step(cx, target) for name, step in STEPS}
    record_by(cx, by, account_id=account_id, action="contact.erased", subject_id=contact_id,
              detail={"messages": removed["messages"]})
    return {"id": contact_id, "removed": removed}
