"""SQL of the SLA (issue 40): a conversation's wait for a person's answer (sla_due_at, sla_breached, its
sla_targets row), started by the contact's message, ended by a person's reply or by putting the conversation
away, breached by the SlaWatcher exactly once (also with several processes: the breach is a conditional UPDATE),
and the Reports' share of waits answered in time."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from common.ids import new_id
from storage.db import reads, writes
from storage.interface import Connection
from storage.outbox import enqueue_notification_in_tx

SLA_BREACHED = "conversation.sla_breached"  # event and notification


def start_in_tx(cx: Connection, account_id: str, contact_id: str, now: str, first_due: str | None, next_due: str | None) -> str | None:
    """The contact wrote (in this transaction): unless the conversation already waits for a person, it waits from
    now until first_due (no person has answered it yet) or next_due, each an ISO time or None (no such target).
    Returns the due time set, or None."""
    target_id = new_id("sla")
    due = "CASE WHEN first_response_at IS NULL THEN CAST(? AS TEXT) ELSE CAST(? AS TEXT) END"
    row = cx.execute(f"UPDATE conversations SET sla_due_at = {due}, sla_breached = 0, sla_target_id = ?"
                     f" WHERE account_id = ? AND contact_id = ? AND sla_due_at IS NULL AND {due} IS NOT NULL"
                     " RETURNING sla_due_at, first_response_at",
                     (first_due, next_due, target_id, account_id, contact_id, first_due, next_due)).fetchone()
    if row is None:
        return None
    cx.execute("INSERT INTO sla_targets (id, account_id, kind, started_at, due_at) VALUES (?, ?, ?, ?, ?)",
               (target_id, account_id, "first" if row[1] is None else "next", now, row[0]))
    return row[0]


def answered_in_tx(cx: Connection, replies: Iterable[tuple[str, str, str, str | None]]) -> None:
    """People answered (replies: [(account id, contact id, at, user id or None for an API client)], in this
    transaction): each conversation's wait ends (its target records who answered when) and no handoff waits."""
    for account_id, contact_id, at, user_id in replies:
        cx.execute("UPDATE sla_targets SET responded_at = ?, user_id = COALESCE(?, user_id) WHERE id = (SELECT sla_target_id"
                   " FROM conversations WHERE account_id = ? AND contact_id = ? AND sla_due_at IS NOT NULL)",
                   (at, user_id, account_id, contact_id))
    cx.executemany("UPDATE conversations SET handoff_waiting_since = NULL, first_response_at = COALESCE("
                   "first_response_at, ?), sla_due_at = NULL, sla_target_id = NULL, sla_breached = 0"
                   " WHERE account_id = ? AND contact_id = ? AND (handoff_waiting_since IS NOT NULL"
                   " OR first_response_at IS NULL OR sla_due_at IS NOT NULL)",
                   [(at, account_id, contact_id) for account_id, contact_id, at, _ in replies])


# A status change that puts the conversation away (resolved, snoozed, pending: waiting for the contact) ends its
# wait for a person without an answer: storage/conversation_status.py adds this to its UPDATE.
PUT_AWAY_SETS = ", sla_due_at = NULL, sla_target_id = NULL"


@writes
def breach_due(cx: Connection, now: str, limit: int) -> int:
    """Conversations whose wait ended unanswered at or before now (up to limit) are breached, each once: its
    sla_breached set by a conditional UPDATE (of two processes' rounds one changes the row, the other's UPDATE
    finds it breached and does nothing), then conversation.sla_breached (event and notification). Returns how
    many."""
    due = cx.execute("SELECT v.account_id, v.contact_id, v.sla_due_at, v.sla_target_id, v.assignee_user_id, t.kind"
                     " FROM conversations v LEFT JOIN sla_targets t ON t.id = v.sla_target_id"
                     " WHERE v.sla_due_at IS NOT NULL AND v.sla_breached = 0 AND v.sla_due_at <= ?"
                     " ORDER BY v.sla_due_at, v.account_id, v.contact_id LIMIT ?", (now, limit)).fetchall()
    breached = 0
    for account_id, contact_id, due_at, target_id, assignee, kind in due:
        if not cx.execute("UPDATE conversations SET sla_breached = 1 WHERE account_id = ? AND contact_id = ?"
                          " AND sla_breached = 0 AND sla_due_at = ?", (account_id, contact_id, due_at)).rowcount:
            continue  # answered, put away or breached by another process meanwhile
        cx.execute("UPDATE sla_targets SET breached = 1, user_id = COALESCE(user_id, ?) WHERE id = ?",
                   (assignee, target_id))
        enqueue_notification_in_tx(cx, account_id, SLA_BREACHED, {
            "contactId": contact_id, "dueAt": due_at, "kind": kind or "first", "assigneeUserId": assignee})
        breached += 1
    return breached


@reads
def next_due(cx: Connection) -> str | None:
    """The earliest wait not yet breached (ISO 8601), or None."""
    return cx.execute("SELECT MIN(sla_due_at) FROM conversations WHERE sla_due_at IS NOT NULL"
                      " AND sla_breached = 0").fetchone()[0]


@reads
def report_rows(cx: Connection, account_ids: Sequence[str], start: str, end: str) -> list[tuple[Any, ...]]:
    """The waits started in [start, end) that were answered or breached (not those still waiting, nor those put
    away unanswered in time): [(day, user id, the user as shown (label_sql) or None, the user's name, met)],
    met 1 when answered by the due time."""
    from storage.users import label_sql  # storage.users imports this module (through conversation_status)
    marks = ", ".join("?" for _ in account_ids)
    return [tuple(row) for row in cx.execute(
        f"SELECT SUBSTR(t.started_at, 1, 10), t.user_id, {label_sql('u')}, u.name, CASE WHEN t.breached = 0"
        " AND t.responded_at IS NOT NULL AND t.responded_at <= t.due_at THEN 1 ELSE 0 END FROM sla_targets t"
        " LEFT JOIN users u ON u.id = t.user_id"
        f" WHERE t.account_id IN ({marks}) AND t.started_at >= ? AND t.started_at < ?"
        " AND (t.responded_at IS NOT NULL OR t.breached = 1)", (*account_ids, start, end))]


def claim_outside_hours_in_tx(cx: Connection, account_id: str, contact_id: str, period: str) -> bool:
    """The conversation gets the outside-hours message of this closed period (its next opening) unless it got it
    already: True when it is claimed now (the caller queues the message in this transaction)."""
    return cx.execute("UPDATE conversations SET outside_hours_until = ? WHERE account_id = ? AND contact_id = ?"
                      " AND (outside_hours_until IS NULL OR outside_hours_until <> ?)",
                      (period, account_id, contact_id, period)).rowcount > 0
