"""SQL for a conversation's status and assignee (issue 21): changed by people (one or many conversations in one
transaction, each change a conversation.updated event) and woken from a snooze by the SnoozeWaker."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from common.errors import Invalid
from common.ids import now_iso
from storage import assignment
from storage import mail as mail_store
from storage.db import fetch_all, reads, writes
from storage.dialect import dialect_of
from storage.events import CONVERSATION_UPDATED, emit_at_commit_in_tx, emit_in_tx
from storage.interface import Connection, Row
from storage.sla import PUT_AWAY_SETS

_FIELDS = ("status", "snoozed_until", "assignee_user_id")


@reads
def assignable_users(cx: Connection, account_id: str) -> list[Row]:
    """The account's active users (a conversation can be assigned to them), by name (else email): [{id, email,
    name}]."""
    return fetch_all(cx, "SELECT id, email, name FROM users WHERE account_id = ? AND active = 1"
                         " ORDER BY COALESCE(name, email), email",
                     (account_id,))


def _lock_assignee(cx: Connection, user_id: str) -> None:
    """Serialize assigning to a user with deactivating them (PostgreSQL; SQLite's one writer does already):
    an assignment that checked the user active before a deactivation commits would be left on them."""
    dialect_of(cx).lock(cx, f"assignee:{user_id}")


def _check_assignee_in_tx(cx: Connection, account_id: str, user_id: str) -> None:
    """Invalid naming assigneeUserId unless user_id is an active user of this account (an assignee must be)."""
    _lock_assignee(cx, user_id)
    if cx.execute("SELECT 1 FROM users WHERE id = ? AND account_id = ? AND active = 1",
                  (user_id, account_id)).fetchone() is None:
        raise Invalid(f"assigneeUserId: no active user with id {user_id} in this account", field="assigneeUserId")


@writes
def update(cx: Connection, account_id: str, contact_ids: Sequence[str], changes: Mapping[str, Any]) -> list[str]:
    """update_in_tx's missing ids alone."""
    return update_in_tx(cx, account_id, contact_ids, changes)[0]


def update_in_tx(cx: Connection, account_id: str, contact_ids: Sequence[str], changes: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Set changes ({status, snoozed_until, assignee_user_id}: any subset) on the account's conversations of
    these contacts, all or none: returns the ids that are not the account's conversations (then nothing
    changed), else []. Invalid (naming assigneeUserId) when the assignee is no active user of the account:
    checked here, so no deactivation commits in between. Each conversation that changed gets a
    conversation.updated event. A person's change takes a conversation out of the automatic assignment queue
    (left alone), except one that opens again unassigned while assignment is on: that one waits in it.
    Returns (missing, resolved): resolved, the ids of the conversations this change resolved (they were not)."""
    if changes.get("assignee_user_id") is not None:
        _check_assignee_in_tx(cx, account_id, changes["assignee_user_id"])
    contact_ids = list(dict.fromkeys(contact_ids))
    marks = ", ".join("?" for _ in contact_ids)
    found = {row[0]: row[1] for row in cx.execute(f"SELECT contact_id, status FROM conversations WHERE account_id = ?"
                                                  f" AND contact_id IN ({marks})", (account_id, *contact_ids))}
    missing = [c for c in contact_ids if c not in found]
    if missing:
        return missing, []
    fields = [f for f in _FIELDS if f in changes]
    values = [changes[f] for f in fields]
    sets = ", ".join(f"{f} = ?" for f in fields)
    if changes.get("status") in ("resolved", "snoozed", "pending"):
        sets += PUT_AWAY_SETS  # nobody owes the contact an answer now: the SLA's wait ends
    differs = " OR ".join(f"{f} IS DISTINCT FROM ?" for f in fields)
    reopens = changes.get("status") == "open" and "assignee_user_id" not in changes and \
        assignment.mode_in_tx(cx, account_id) in assignment.ON
    reopened = []
    for contact_id in contact_ids:
        changed = cx.execute(f"UPDATE conversations SET {sets} WHERE account_id = ? AND contact_id = ? AND ({differs})",
                             (*values, account_id, contact_id, *values)).rowcount
        if changed:
            _emit(cx, account_id, contact_id)
            reopened.append(contact_id)
    if reopens:
        assignment.queue_in_tx(cx, account_id, reopened, now_iso())
    else:
        assignment.unqueue_in_tx(cx, account_id, contact_ids)
    resolves = changes.get("status") == "resolved"
    return [], [c for c in reopened if resolves and found[c] != "resolved"]


def change_in_tx(cx: Connection, account_id: str, contact_ids: list[str], changes: dict[str, str | None],
                  base_url: str, at: str, actor: str | None = None) -> tuple[list[str], int]:
    """In the writer: the change, the CSAT ask of each conversation it resolved (storage/csat.py) and the mail of
    each new assignee who chose it (storage/mail.py; actor: the user id whose change it is), in one
    transaction. Returns (missing ids, how many mails were queued: contacts asked, assignees mailed)."""
    from storage.csat import ask_in_tx  # through storage.messages it imports storage.users, which imports this module
    assignee = changes.get("assignee_user_id")
    before = mail_store.assignees_in_tx(cx, account_id, contact_ids) if assignee else {}
    missing, resolved = update_in_tx(cx, account_id, contact_ids, changes)
    if missing:
        return missing, 0
    mailed = mail_store.agents_assigned_in_tx(cx, account_id, [(c, assignee) for c in contact_ids
                                                           if before.get(c) != assignee], actor=actor) if assignee else 0
    return missing, mailed + (ask_in_tx(cx, account_id, resolved, base_url, at) if resolved else 0)


def unassign_user_in_tx(cx: Connection, account_id: str, user_id: str) -> int:
    """The user is deactivated in this transaction: their conversations that are not resolved (open, pending,
    snoozed) return to the unassigned queue, each with the conversation.updated an unassignment by a person
    emits; the open ones wait for automatic assignment when it is on. Resolved ones keep the assignee (who
    handled them). Returns how many were unassigned."""
    _lock_assignee(cx, user_id)
    unassigned = cx.execute("UPDATE conversations SET assignee_user_id = NULL WHERE account_id = ?"
                            " AND assignee_user_id = ? AND status IN ('open', 'pending', 'snoozed')"
                            " RETURNING contact_id, status",
                            (account_id, user_id)).fetchall()
    for contact_id, status in sorted(tuple(row) for row in unassigned):
        emit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id, "status": status,
                                                          "assigneeUserId": None})
    if unassigned and assignment.mode_in_tx(cx, account_id) in assignment.ON:
        assignment.queue_in_tx(cx, account_id, sorted(row[0] for row in unassigned), now_iso())
    return len(unassigned)


def _emit(cx: Connection, account_id: str, contact_id: str) -> None:
    """conversation.updated for one conversation of several this transaction changes, appended with the COMMIT
    (PostgreSQL): the next one's change may lock another agent's row (their load, migration 0690), and a
    transaction holding the account's event counter meanwhile could deadlock with an assignment holding that
    agent's row (storage/assignment.py)."""
    status, assignee = cx.execute("SELECT status, assignee_user_id FROM conversations WHERE account_id = ?"
                                  " AND contact_id = ?", (account_id, contact_id)).fetchone()
    emit_at_commit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id, "status": status,
                                                                "assigneeUserId": assignee})


@writes
def wake_snoozed(cx: Connection, now: str, limit: int) -> int:
    """Snoozed conversations whose time came (snoozed_until <= now) are open again, up to limit of them, each
    with its conversation.updated event; an unassigned one waits for automatic assignment when it is on.
    Returns how many woke."""
    due = cx.execute("SELECT account_id, contact_id FROM conversations WHERE status = 'snoozed' AND snoozed_until <= ?"
                     " ORDER BY snoozed_until LIMIT ?", (now, limit)).fetchall()
    modes = {}
    for account_id, contact_id in due:
        cx.execute("UPDATE conversations SET status = 'open', snoozed_until = NULL WHERE account_id = ?"
                   " AND contact_id = ?", (account_id, contact_id))
        _emit(cx, account_id, contact_id)
        if account_id not in modes:
            modes[account_id] = assignment.mode_in_tx(cx, account_id)
        if modes[account_id] in assignment.ON:
            assignment.queue_in_tx(cx, account_id, [contact_id], now)
    return len(due)


@reads
def next_wake(cx: Connection) -> str | None:
    """When the earliest snooze ends (ISO 8601), or None when nothing is snoozed."""
    return cx.execute("SELECT MIN(snoozed_until) FROM conversations WHERE status = 'snoozed'").fetchone()[0]
