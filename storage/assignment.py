"""SQL for automatic assignment (issue 40, migration 0630): the queue of conversations waiting for an agent
(conversations.queued_at, oldest first), the agents who may take one now with their load, the assignment
itself (a conversation.updated event and an audit entry in its transaction), and when users were last seen with
a live page. The choice is services/assignment.py's; every automatic assignment of an account runs under the
account's lock (storage/dialect.py lock: PostgreSQL's advisory lock; SQLite's one writer serializes already),
so two processes never count the same free place twice."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from storage.audit import record_by
from storage.db import fetch_all, reads, writes
from storage.dialect import dialect_of
from storage.events import CONVERSATION_UPDATED, emit_in_tx
from storage.interface import Connection, Row

ON = ("round_robin", "balanced")  # the modes that assign (off does not)

# An agent's load: the conversations they still work on (the inbox's "Mine"); conversations_load counts them.
LOAD = "v.assignee_user_id IS NOT NULL AND v.status IN ('open', 'pending')"


def lock_account_in_tx(cx: Connection, account_id: str) -> None:
    """Hold the account's automatic assignment until COMMIT (PostgreSQL; a no-op on SQLite)."""
    dialect_of(cx).lock(cx, f"assignment:{account_id}")


def mode_in_tx(cx: Connection, account_id: str) -> str | None:
    """The account's assignment mode, or None (off)."""
    row = cx.execute(f"SELECT {dialect_of(cx).json_field('settings', 'assignment', 'mode')} FROM accounts"
                     " WHERE id = ?", (account_id,)).fetchone()
    return row[0] if row else None


def setting_in_tx(cx: Connection, account_id: str) -> str | None:
    """The account's stored ``assignment`` setting as JSON text, or None."""
    row = cx.execute(f"SELECT {dialect_of(cx).json_field('settings', 'assignment')} FROM accounts WHERE id = ?",
                     (account_id,)).fetchone()
    return row[0] if row else None


def queue_in_tx(cx: Connection, account_id: str, contact_ids: Sequence[str], at: str) -> None:
    """These conversations (re)opened in this transaction: those open and unassigned that are not waiting
    yet wait from ``at``."""
    for contact_id in contact_ids:
        cx.execute("UPDATE conversations SET queued_at = ? WHERE account_id = ? AND contact_id = ?"
                   " AND status = 'open' AND assignee_user_id IS NULL AND queued_at IS NULL",
                   (at, account_id, contact_id))


def unqueue_in_tx(cx: Connection, account_id: str, contact_ids: Sequence[str]) -> None:
    """A person changed these conversations: they wait for automatic assignment no more (left alone)."""
    for contact_id in contact_ids:
        cx.execute("UPDATE conversations SET queued_at = NULL WHERE account_id = ? AND contact_id = ?"
                   " AND queued_at IS NOT NULL", (account_id, contact_id))


def clear_queue_in_tx(cx: Connection, account_id: str) -> None:
    """Automatic assignment was turned off: nothing of the account waits any more."""
    cx.execute("UPDATE conversations SET queued_at = NULL WHERE account_id = ? AND queued_at IS NOT NULL",
               (account_id,))


@reads
def queued_accounts(cx: Connection) -> list[str]:
    """The accounts that have conversations waiting (from the queue's own index)."""
    return [row[0] for row in cx.execute("SELECT DISTINCT account_id FROM conversations"
                                         " WHERE queued_at IS NOT NULL ORDER BY account_id")]


@reads
def queue(cx: Connection, account_id: str, limit: int = 100) -> list[Row]:
    """[{contact_id, queued_at}] of the account's waiting conversations, oldest first."""
    return fetch_all(cx, "SELECT contact_id, queued_at FROM conversations WHERE account_id = ?"
                         " AND queued_at IS NOT NULL ORDER BY queued_at, contact_id LIMIT ?", (account_id, limit))


def queue_head_in_tx(cx: Connection, account_id: str, limit: int) -> list[tuple[str, str]]:
    """Up to limit waiting conversations, oldest first; those no longer open and unassigned (a person took or
    resolved one without going through the status change) leave the queue here."""
    rows = cx.execute("SELECT contact_id, queued_at, status, assignee_user_id FROM conversations"
                      " WHERE account_id = ? AND queued_at IS NOT NULL ORDER BY queued_at, contact_id LIMIT ?",
                      (account_id, limit)).fetchall()
    stale = [row[0] for row in rows if row[2] != "open" or row[3] is not None]
    unqueue_in_tx(cx, account_id, stale)
    return [(row[0], row[1]) for row in rows if row[2] == "open" and row[3] is None]


def candidates_in_tx(cx: Connection, account_id: str, seen_since: str) -> list[Row]:
    """The account's users who may take a conversation now: active, not removed, the invitation accepted (they
    can sign in to answer), available, and (seen_since not None) with a live page at or after seen_since.
    [{id, capacity, turn, load}]: load counts their open and pending conversations."""
    from storage.users import INVITED  # storage.users imports this module's users (conversation_status)
    seen = " AND u.last_seen_at >= ?" if seen_since is not None else ""
    hint = dialect_of(cx).index_hint("conversations_load")  # SQLite without statistics may walk the account's rows
    return fetch_all(cx, f"SELECT u.id, u.capacity, u.last_assignment_turn AS turn, (SELECT COUNT(*) FROM"
                         f" conversations v{hint} WHERE v.account_id = u.account_id AND v.assignee_user_id = u.id"
                         f" AND {LOAD}) AS load FROM users u WHERE u.account_id = ? AND u.active = 1"
                         f" AND u.removed_at IS NULL AND u.available = 1 AND u.password_hash <> ?{seen}"
                         f" ORDER BY u.id", (account_id, INVITED, *((seen_since,) if seen_since else ())))


def last_turn_in_tx(cx: Connection, account_id: str) -> int:
    return cx.execute("SELECT MAX(last_assignment_turn) FROM users WHERE account_id = ?",
                      (account_id,)).fetchone()[0] or 0


def assign_in_tx(cx: Connection, account_id: str, contact_id: str, user_id: str, turn: int, by: Mapping[str, Any] | None, detail: Mapping[str, Any] | None) -> bool:
    """Give the waiting conversation to the user (turn: the account's next assignment number), with its
    conversation.updated and audit entry. False when it no longer waits open and unassigned."""
    if not cx.execute("UPDATE conversations SET assignee_user_id = ?, queued_at = NULL WHERE account_id = ?"
                      " AND contact_id = ? AND queued_at IS NOT NULL AND status = 'open' AND assignee_user_id IS NULL",
                      (user_id, account_id, contact_id)).rowcount:
        return False
    cx.execute("UPDATE users SET last_assignment_turn = ? WHERE id = ? AND account_id = ?", (turn, user_id, account_id))
    emit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id, "status": "open",
                                                      "assigneeUserId": user_id})
    record_by(cx, by, account_id=account_id, action="conversation.assigned", subject_id=contact_id, detail=detail)
    return True


@writes
def mark_seen(cx: Connection, user_ids: Sequence[str], now: str, stale_before: str) -> list[str]:
    """These users have a live page open now: their last_seen_at becomes now where it is older than
    stale_before (so a beat writes a user at most once a period). Returns the ids written."""
    if not user_ids:
        return []
    marks = ", ".join("?" for _ in user_ids)
    rows = cx.execute(f"UPDATE users SET last_seen_at = ? WHERE id IN ({marks}) AND (last_seen_at IS NULL"
                      f" OR last_seen_at < ?) RETURNING id", (now, *user_ids, stale_before)).fetchall()
    return sorted(row[0] for row in rows)
