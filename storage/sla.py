"""SQL of the SLA (issue 40): a conversation's wait for a person's answer (sla_due_at, sla_breached, its
sla_targets row), started by the contact's message, ended by a person's reply or by putting the conversation
away, breached by the SlaWatcher exactly once (also with several processes: the breach is a conditional UPDATE),
and the Reports' share of waits answered in time."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from common.business_hours import Schedule, add_business_minutes, iso_or_none, schedule_of, schedule_of_text
from common.ids import iso, new_id
from storage.accounts import get_settings_in_tx
from storage.db import reads, writes
from storage.interface import Connection
from storage.outbox import enqueue_notification_in_tx

KEY = "sla"  # the account setting {firstResponseMinutes, nextResponseMinutes}
KINDS = {"firstResponseMinutes": "first", "nextResponseMinutes": "next"}  # its fields and the waits they time
# The outside-hours message's (closed period key, template, Schedule, next opening)
OutsideHoursNotice = tuple[str, str, Schedule, datetime | None]

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

def on_contact_message_in_tx(cx: Connection, *, account_id: str, contact_id: str, now: datetime,
                             hours: str | dict[str, Any] | None, sla: str | dict[str, Any] | None,
                             bot_answers: bool) -> tuple[str | None, OutsideHoursNotice | None]:
    """In the inbound message's transaction (a text from the contact, not a keyword nor an automatic reply), for an
    account with business hours or an SLA (hours, sla: their stored settings, JSON text or None):
    start the conversation's wait for a person (unless the bot answers this message: the bot's handoff starts it),
    and say whether the outside-hours message is due: returns (the wait's due time or None, the outside-hours
    message's (closed period key, template, Schedule, next opening) or None). now: an aware datetime."""
    config: dict[str, Any] | None
    schedule: Schedule | None
    if isinstance(hours, str):
        config, schedule = schedule_of_text(hours)
    else:  # already parsed (a driver that decodes JSON itself), or None
        config, schedule = hours, Schedule(hours) if hours else None
    targets = json.loads(sla) if isinstance(sla, str) else sla
    due = None
    if targets and not bot_answers:
        due = start_wait_in_tx(cx, schedule, targets, account_id, contact_id, now)
    notice = None
    if schedule is not None and config and config.get("outsideHoursMessage") and not bot_answers:
        open_now, _, opens = schedule.state(now)
        if not open_now:
            notice = (iso_or_none(opens) or "never", config["outsideHoursMessage"], schedule, opens)
    return due, notice


def on_handoff_in_tx(cx: Connection, account_id: str, contact_id: str, now: datetime) -> None:
    """The bot handed the conversation to a person (in this transaction): the wait for one starts now, when the
    account has an SLA (the contact's message the bot took started none)."""
    settings = get_settings_in_tx(cx, account_id)
    if settings is not None and settings.get(KEY):
        start_wait_in_tx(cx, schedule_of(settings), settings[KEY], account_id, contact_id, now)


def start_wait_in_tx(cx: Connection, schedule: Schedule | None, sla: Mapping[str, Any], account_id: str,
                     contact_id: str, now: datetime) -> str | None:
    """Start the conversation's wait for a person now, its targets (sla: the setting) counted in the account's
    business minutes, unless one runs (start_in_tx); returns its due time or None."""
    dues = {kind: add_business_minutes(schedule, now, sla[field]) if sla.get(field) else None
            for field, kind in KINDS.items()}
    return start_in_tx(cx, account_id, contact_id, iso(now), iso_or_none(dues["first"]), iso_or_none(dues["next"]))



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
