"""SQL for the inbox's conversations (one per contact with messages): kept up to date inside the transaction
of each message insert and outbound status change, listed by last activity without counting messages."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from storage import sla
from storage.contacts import search_clause
from storage.db import fetch_all, fetch_one, reads, writes
from storage.events import CONVERSATION_UPDATED, emit_in_tx
from storage.interface import Connection, execute_later, values_rows
from storage.rows import ConversationRow
from storage.users import label_sql

PREVIEW_CHARS = 140
STATUSES = ("open", "pending", "resolved", "snoozed")
_ACTIVE = "v.status IN ('open', 'pending')"  # what a person still works on (resolved and snoozed are put away)
# Needs reply (issue 25 §4): the contact wrote last, or a handoff waits for a person, and nobody put it away. A
# campaign's send alone never puts a conversation here (its message is outbound), nor does an opt-out or opt-in
# keyword reply (issue 43 §8: last_inbound_id skips them); Unassigned wants the contact to have written
# something (a campaign-only conversation waits for nobody). Mine takes the user's id.
_HANDED_OFF = "v.handoff_waiting_since IS NOT NULL"
# An outside-hours message (author 'auto') after the contact's leaves the conversation needing a reply.
_CONDITIONS = {"needs_reply": f"(v.last_inbound_id = v.last_message_id OR v.last_author = 'auto' OR {_HANDED_OFF})"
                              f" AND {_ACTIVE}",
               "handed_off": _HANDED_OFF,  # as the navigation's "Needs a person" counts them
               "mine": f"v.assignee_user_id = ? AND {_ACTIVE}",
               "unassigned": f"v.assignee_user_id IS NULL AND (v.last_inbound_id IS NOT NULL OR {_HANDED_OFF})"
                             f" AND {_ACTIVE}",
               "resolved": "v.status = 'resolved'", "snoozed": "v.status = 'snoozed'",
               # Due soon (issue 40): a person's answer is due before the given time (breached ones included).
               "due_soon": f"v.sla_due_at <= ? AND {_ACTIVE}",
               "unread": "v.unread_count > 0", "failed": "v.failed_count > 0", "paused": "p.paused_until IS NOT NULL"}
FILTERS = ("all", *_CONDITIONS)
# A campaign's conversations: its recipients (the campaign is the account's: checked by the join).
_OF_CAMPAIGN = ("EXISTS (SELECT 1 FROM campaign_recipients r JOIN campaigns k ON k.id = r.campaign_id"
                " WHERE r.campaign_id = ? AND k.account_id = v.account_id AND r.contact_id = v.contact_id)")
PERSON_AUTHORS = ("user", "api")  # an outbound message typed by a person (the inbox) or sent by the API

_SELECT = ("SELECT v.contact_id, v.last_message_id, v.last_message_at, v.last_direction, v.last_author,"
           " v.last_preview, v.channel, v.unread_count, v.failed_count, v.handoff_waiting_since, v.last_inbound_id,"
           f" v.status, v.snoozed_until, v.assignee_user_id, v.sla_due_at, v.sla_breached, {label_sql('u')} AS assignee_email,"
           " u.name AS assignee_name,"
           " c.first_name, c.last_name, c.phone, c.email, c.opted_out, p.paused_until, p.reason AS pause_reason"
           " FROM conversations v JOIN contacts c ON c.id = v.contact_id AND c.account_id = v.account_id"
           " LEFT JOIN users u ON u.id = v.assignee_user_id AND u.account_id = v.account_id"
           " LEFT JOIN bot_pauses p ON p.account_id = v.account_id AND p.contact_id = v.contact_id"
           " AND p.paused_until > ?")


def on_messages_in_tx(cx: Connection, messages: Sequence[Mapping[str, Any]]) -> None:
    """Messages were inserted in this transaction: each becomes its conversation's last message (unless a newer
    one is there already), an inbound one counts as unread and reopens a resolved or snoozed conversation (in
    the same statement: issue 23 measures this path), and unless it is a keyword (m["keyword"]) it is what the
    contact wrote last (last_inbound_id). A message with m["queue"] (automatic assignment is on: issue 40) puts
    the conversation it opens in the assignment queue (queued_at) when nobody has it: a new one, a reopened one,
    or the first the contact wrote to (a campaign's). m["assignee_user_id"]: the agent a new contact's first
    message was assigned to (storage/assignment.py claim_for_new_in_tx): the new conversation's assignee (a
    conversation that exists keeps its own). One statement for all, no read."""
    rows = [(m["account_id"], m["contact_id"], m["id"], m["created_at"], m["direction"], m.get("author"),
             m["body"][:PREVIEW_CHARS], m.get("channel"), 1 if m["direction"] == "inbound" else 0,
             1 if m.get("status") == "Failed" else 0,
             m["id"] if m["direction"] == "inbound" and not m.get("keyword") else None,
             m["created_at"] if m.get("queue") else None, m.get("assignee_user_id")) for m in messages]
    if len(rows) == 1:  # every inbound message: sent with the transaction's next statement or its COMMIT
        execute_later(cx, _UPSERT_ONE, rows[0])
    elif len({row[:2] for row in rows}) == len(rows):
        # A campaign's batch, one message per contact: one statement (PostgreSQL refuses a key twice in one).
        for values, args in values_rows(rows):
            cx.execute(_UPSERT.format(values=values), args)
    else:
        cx.executemany(_UPSERT_ONE, rows)
    answered = {(m["account_id"], m["contact_id"]): (m["created_at"], m.get("author_user_id")) for m in messages
                if m["direction"] == "outbound" and m.get("author") in PERSON_AUTHORS}
    if answered:  # a person answered: no handoff waits any more, nor the SLA's wait (storage/sla.py)
        sla.answered_in_tx(cx, [(*key, *answered[key]) for key in sorted(answered)])


_ONE_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
# conversations.x: the row as it was (PostgreSQL wants the table named where excluded.x is also in scope)
_NEWER = "excluded.last_message_id > conversations.last_message_id"
_UPSERT = (
    "INSERT INTO conversations (account_id, contact_id, last_message_id, last_message_at, last_direction,"
    " last_author, last_preview, channel, unread_count, failed_count, last_inbound_id, queued_at, assignee_user_id)"
    " VALUES {values}"
    " ON CONFLICT (account_id, contact_id) DO UPDATE SET"
    f" last_message_at = CASE WHEN {_NEWER} THEN excluded.last_message_at ELSE conversations.last_message_at END,"
    f" last_direction = CASE WHEN {_NEWER} THEN excluded.last_direction ELSE conversations.last_direction END,"
    f" last_author = CASE WHEN {_NEWER} THEN excluded.last_author ELSE conversations.last_author END,"
    f" last_preview = CASE WHEN {_NEWER} THEN excluded.last_preview ELSE conversations.last_preview END,"
    f" channel = CASE WHEN {_NEWER} THEN COALESCE(excluded.channel, conversations.channel)"
    " ELSE conversations.channel END,"
    f" last_message_id = CASE WHEN {_NEWER} THEN excluded.last_message_id ELSE conversations.last_message_id END,"
    " unread_count = conversations.unread_count + excluded.unread_count,"
    " failed_count = conversations.failed_count + excluded.failed_count,"
    " status = CASE WHEN excluded.last_direction = 'inbound' AND conversations.status IN ('resolved', 'snoozed')"
    " THEN 'open' ELSE conversations.status END,"
    " snoozed_until = CASE WHEN excluded.last_direction = 'inbound' THEN NULL ELSE conversations.snoozed_until END,"
    " queued_at = CASE WHEN excluded.queued_at IS NOT NULL AND conversations.queued_at IS NULL"
    " AND conversations.assignee_user_id IS NULL AND (conversations.status IN ('resolved', 'snoozed')"
    " OR conversations.last_inbound_id IS NULL) THEN excluded.queued_at ELSE conversations.queued_at END,"
    " last_inbound_id = CASE WHEN conversations.last_inbound_id IS NULL"
    " OR excluded.last_inbound_id > conversations.last_inbound_id THEN COALESCE(excluded.last_inbound_id,"
    " conversations.last_inbound_id) ELSE conversations.last_inbound_id END")
_UPSERT_ONE = _UPSERT.format(values=_ONE_ROW)


def handoff_waiting_in_tx(cx: Connection, account_id: str, contact_id: str, now: str) -> None:
    """The bot handed the conversation to a person: it waits for one (until a person's reply)."""
    cx.execute("UPDATE conversations SET handoff_waiting_since = COALESCE(handoff_waiting_since, ?)"
               " WHERE account_id = ? AND contact_id = ?", (now, account_id, contact_id))
    emit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id})


@reads
def nav_counts(cx: Connection, account_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """{account id: {"needsPerson": conversations waiting for a person after a handoff, "unread": conversations
    with unread messages}} for each of account_ids: the navigation's counts (pages and the live hub's counts
    frames). Each count is read from its own partial index."""
    marks = ", ".join("?" for _ in account_ids)
    counts = {account_id: {"needsPerson": 0, "unread": 0} for account_id in account_ids}
    for key, condition in (("needsPerson", "handoff_waiting_since IS NOT NULL"), ("unread", "unread_count > 0")):
        for account_id, count in cx.execute(f"SELECT account_id, COUNT(*) FROM conversations WHERE account_id IN"
                                            f" ({marks}) AND {condition} GROUP BY account_id", account_ids):
            counts[account_id][key] = count
    return counts


def on_status_in_tx(cx: Connection, account_id: str, contact_id: str, old_status: str, new_status: str) -> None:
    """An outbound message's status changed in this transaction: keep the conversation's failed count."""
    delta = (new_status == "Failed") - (old_status == "Failed")
    if delta:
        cx.execute("UPDATE conversations SET failed_count = failed_count + ? WHERE account_id = ? AND contact_id = ?",
                   (delta, account_id, contact_id))


def on_statuses_in_tx(cx: Connection, account_id: str, contacts_and_old_statuses: Iterable[tuple[str, str]], new_status: str) -> None:
    """Many outbound messages changed to new_status in this transaction (a campaign's cancel): one
    on_status_in_tx per message whose failed count moves; pairs are (contact id, status before)."""
    for contact_id, old_status in contacts_and_old_statuses:
        on_status_in_tx(cx, account_id, contact_id, old_status, new_status)


@writes
def mark_read(cx: Connection, account_id: str, contact_id: str, through_message_id: str) -> bool:
    """The conversation was read up to through_message_id (the newest message the page showed): unread goes
    to 0 unless a newer message arrived meanwhile (the page will see it, and mark again). Emits
    conversation.updated when something changed, so that other open inboxes update. True when it did."""
    changed = cx.execute("UPDATE conversations SET unread_count = 0 WHERE account_id = ? AND contact_id = ?"
                         " AND unread_count > 0 AND last_message_id <= ?",
                         (account_id, contact_id, through_message_id)).rowcount > 0
    if changed:
        emit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id})
    return changed


@reads
def page(cx: Connection, account_id: str, now: str, *, filter: str = "all", text_like: str | None = None, digits_like: str | None = None, before: str | None = None, limit: int = 50,
         campaign_id: str | None = None, user_id: str | None = None, due_before: str | None = None) -> list[ConversationRow]:
    """Conversations by last activity, newest first: at most limit + 1 rows with last_message_id < before.
    filter: one of FILTERS (mine: assigned to user_id; due_soon: an answer due before due_before; paused: the
    bot, per bot_pauses); campaign_id: only that campaign's recipients."""
    args: list[str | None]
    where, args = ["v.account_id = ?"], [now, account_id]
    if filter in _CONDITIONS:
        where.append(_CONDITIONS[filter])
        args += [user_id] if filter == "mine" else [due_before] if filter == "due_soon" else []
    if campaign_id:
        where.append(_OF_CAMPAIGN)
        args.append(campaign_id)
    search, search_args = search_clause(cx, "c", text_like, digits_like)
    if search:
        where.append(search)
        args += search_args
    if before:
        where.append("v.last_message_id < ?")
        args.append(before)
    return cast("list[ConversationRow]", fetch_all(
        cx, f"{_SELECT} WHERE {' AND '.join(where)} ORDER BY v.last_message_id DESC LIMIT ?", (*args, limit + 1)))


@reads
def counts(cx: Connection, account_id: str, now: str, campaign_id: str | None = None, user_id: str | None = None, due_before: str | None = None) -> dict[str, int]:
    """{filter: how many conversations it shows} for the inbox's tabs (counted again on every live refresh)."""
    sums = ", ".join(f"COALESCE(SUM(CASE WHEN {condition} THEN 1 ELSE 0 END), 0)"  # no SUM of a boolean on PostgreSQL
                     for condition in _CONDITIONS.values())
    # the conditions' parameters in their order (mine's, due_soon's), then the join's and the WHERE's
    where, args = "v.account_id = ?", [user_id, due_before, now, account_id]
    if campaign_id:
        where += f" AND {_OF_CAMPAIGN}"
        args.append(campaign_id)
    row = cx.execute(f"SELECT COUNT(*), {sums} FROM conversations v LEFT JOIN bot_pauses p"
                     " ON p.account_id = v.account_id AND p.contact_id = v.contact_id AND p.paused_until > ?"
                     f" WHERE {where}", args).fetchone()
    return {"all": row[0], **dict(zip(_CONDITIONS, row[1:]))}


@reads
def get(cx: Connection, account_id: str, contact_id: str, now: str) -> ConversationRow | None:
    """One conversation shaped like page()'s rows, or None."""
    return cast("ConversationRow | None",
                fetch_one(cx, f"{_SELECT} WHERE v.account_id = ? AND v.contact_id = ?", (now, account_id, contact_id)))
