"""SQL for automatic assignment (issue 40, migrations 0630 and 0690): the queue of conversations waiting for an
agent (conversations.queued_at, oldest first), the claim of the agent who takes the next one (users.open_load: their
load, kept by triggers), the assignment itself (a conversation.updated event and an audit entry in its
transaction), and when users were last seen with a live page. An agent is claimed under their row's lock with their
capacity checked on the row as committed (PostgreSQL), so two transactions (processes) never give them more; the
Assigner's rounds also hold the account's lock (storage/dialect.py lock: PostgreSQL's advisory lock; SQLite's one
writer serializes already)."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from common.ids import iso

from storage.audit import record_by
from storage.db import fetch_all, reads, writes
from storage.dialect import dialect_of
from storage.events import CONVERSATION_UPDATED, emit_at_commit_in_tx
from storage.interface import Connection, Row
from storage.mail import agents_assigned_in_tx
from storage.user_states import signs_in

ON = ("round_robin", "balanced")  # the modes that assign (off does not)
DEFAULT_AWAY_AFTER_MINUTES = 30
AUTOMATIC = {"actor": "assignment", "actor_label": "Automatic assignment"}  # who the audit names
BATCH = 100  # conversations assigned in one transaction at most
Setting = tuple[str, int | None]  # setting_of's (mode, awayAfterMinutes or None)



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


# The users who may take a conversation now: active, not removed, the invitation accepted (they can sign in to
# answer), available, under their capacity (NULL: no limit).
_ELIGIBLE = (f"u.account_id = ? AND {signs_in('u')} AND u.available = 1"
             " AND (u.capacity IS NULL OR u.open_load < u.capacity)")
# Who gets the next conversation, by mode: round_robin, the oldest turn (never assigned first), then by id;
# balanced, the fewest open and pending first, then as round_robin.
# Each order is an index's (users_turn, users_load: migration 0690), walked until the first agent who may take one.
_ORDER = {"round_robin": "u.last_assignment_turn NULLS FIRST, u.id",
          "balanced": "u.open_load, u.last_assignment_turn NULLS FIRST, u.id"}
# Nothing of the account waits but this conversation (a new one never waits yet): one that opens while older ones
# wait goes behind them (the Assigner gives them out oldest first).
_NONE_OLDER = ("NOT EXISTS (SELECT 1 FROM conversations q WHERE q.account_id = ? AND q.queued_at IS NOT NULL"
               " AND q.contact_id <> ?)")


def waiting_since_in_tx(cx: Connection, account_id: str, contact_id: str) -> str | None:
    """When the conversation started to wait for an agent, None when it does not wait (open and unassigned)."""
    row = cx.execute("SELECT queued_at FROM conversations WHERE account_id = ? AND contact_id = ? AND queued_at IS NOT"
                     " NULL AND status = 'open' AND assignee_user_id IS NULL", (account_id, contact_id)).fetchone()
    return row[0] if row else None


def claim_agent_in_tx(cx: Connection, account_id: str, mode: str, seen_since: str | None,
                      contact_id: str | None = None) -> dict[str, Any] | None:
    """The agent the account's next automatic assignment goes to: {id, capacity, load} (load: their open and
    pending conversations before it); None when nobody may take one now. seen_since (not None): only agents with
    a live page at or after it. contact_id: a conversation its message opens, assigned on the message's write:
    only when no other conversation waits (queue order). On PostgreSQL the agent's row is locked to COMMIT
    (FOR UPDATE SKIP LOCKED: an agent another transaction holds is skipped, and the row is checked again as
    committed), so two processes never give an agent more than their capacity; SQLite's one writer serializes
    already. The assignment then adds to the agent's load by the conversations' trigger (migration 0690), which
    also gives them the account's next turn when it inserts a conversation with them (a new contact's);
    take_turn_in_tx does for one assigned by an UPDATE."""
    where, args = [_ELIGIBLE], [account_id]
    if seen_since is not None:
        where.append("u.last_seen_at >= ?")
        args.append(seen_since)
    if contact_id is not None:
        where.append(_NONE_OLDER)
        args += [account_id, contact_id]
    row = cx.execute(f"SELECT u.id, u.capacity, u.open_load FROM users u WHERE {' AND '.join(where)}"
                     f" ORDER BY {_ORDER[mode]} LIMIT 1{dialect_of(cx).skip_locked}", args).fetchone()
    return None if row is None else {"id": row[0], "capacity": row[1], "load": row[2]}


def take_turn_in_tx(cx: Connection, account_id: str, user_id: str) -> None:
    """The user took the account's next automatic assignment (round robin's order)."""
    cx.execute("UPDATE users SET last_assignment_turn = (SELECT COALESCE(MAX(t.last_assignment_turn), 0) + 1"
               " FROM users t WHERE t.account_id = ?) WHERE id = ? AND account_id = ?",
               (account_id, user_id, account_id))


def assigned_in_tx(cx: Connection, account_id: str, contact_id: str, user_id: str, by: Mapping[str, Any] | None,
                   detail: Mapping[str, Any] | None) -> None:
    """The conversation.updated event and the audit entry of an automatic assignment made in this transaction. The
    event is appended with the COMMIT (PostgreSQL): the account's event counter is locked after the agents' rows,
    as every transaction that changes a load takes them (storage/conversation_status.py), so none deadlocks."""
    emit_at_commit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id, "status": "open",
                                                                "assigneeUserId": user_id})
    record_by(cx, by, account_id=account_id, action="conversation.assigned", subject_id=contact_id, detail=detail)


def assign_in_tx(cx: Connection, account_id: str, contact_id: str, user_id: str, by: Mapping[str, Any] | None,
                 detail: Mapping[str, Any] | None) -> bool:
    """Give the waiting conversation to the user claimed for it (claim_agent_in_tx), their turn the account's
    next, with its conversation.updated and audit entry. False when it no longer waits open and unassigned."""
    if not cx.execute("UPDATE conversations SET assignee_user_id = ?, queued_at = NULL WHERE account_id = ?"
                      " AND contact_id = ? AND queued_at IS NOT NULL AND status = 'open' AND assignee_user_id IS NULL",
                      (user_id, account_id, contact_id)).rowcount:
        return False
    take_turn_in_tx(cx, account_id, user_id)
    assigned_in_tx(cx, account_id, contact_id, user_id, by, detail)
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


# ---- the decisions (services/assignment.py: the settings and the Assigner) -----------------------------

def setting_of(value: str | Mapping[str, Any] | None) -> Setting:
    """(mode, awayAfterMinutes or None) of a stored assignment setting (a dict, its JSON text, or None)."""
    config: Mapping[str, Any] = (json.loads(value) if isinstance(value, str) else value) or {}
    return config.get("mode", "off"), config.get("awayAfterMinutes", DEFAULT_AWAY_AFTER_MINUTES)


def reason(mode: str, chosen: Mapping[str, Any]) -> str:
    """Why the claimed agent (claim_agent_in_tx's {id, capacity, load}) got the conversation:
    the audit entry's words."""
    rule = "balanced: fewest open conversations" if mode == "balanced" else \
        "round robin: longest since an automatic assignment"
    capacity = "no limit" if chosen["capacity"] is None else chosen["capacity"]
    return f"{rule} ({chosen['load']} open, capacity {capacity})"


def _seen_since(now: datetime, away_after: int | None) -> str | None:
    """Agents seen with a live page before this are away (None: nobody is away for idleness)."""
    return iso(now - timedelta(minutes=away_after)) if away_after else None


def _detail(mode: str, chosen: Mapping[str, Any], queued_at: str | None) -> dict[str, Any]:
    return {"assigneeUserId": chosen["id"], "mode": mode, "reason": reason(mode, chosen), "openBefore": chosen["load"],
            "capacity": chosen["capacity"], "queuedAt": queued_at}


def claim_for_new_in_tx(cx: Connection, account_id: str, setting: Setting, now: datetime) -> dict[str, Any] | None:
    """A message from a new contact opens a conversation while assignment is on (setting: setting_of's (mode,
    awayAfterMinutes)): the agent it goes to, claimed, when one may take it and nothing else waits (the message's
    upsert names them as the assignee: no statement more); else None (it waits in the queue).
    assigned_new_in_tx follows in the same transaction."""
    mode, away_after = setting
    return claim_agent_in_tx(cx, account_id, mode, _seen_since(now, away_after), contact_id="")


def assigned_new_in_tx(cx: Connection, account_id: str, contact_id: str, setting: Setting,
                       chosen: Mapping[str, Any]) -> None:
    """The event and audit entry of claim_for_new_in_tx's assignment, once the conversation is written."""
    assigned_in_tx(cx, account_id, contact_id, chosen["id"], AUTOMATIC, _detail(setting[0], chosen, None))
    agents_assigned_in_tx(cx, account_id, [(contact_id, chosen["id"])])


def assign_reopened_in_tx(cx: Connection, account_id: str, contact_id: str, setting: Setting, now: datetime) -> bool:
    """A message to a known contact was stored in this transaction while assignment is on: when the conversation
    waits (the message opened it again, or it waited already) and nothing else does, it goes to an agent who may
    take it now. Returns whether it waits still (for the Assigner). A message to a conversation that does not
    wait costs one read by its key."""
    queued_at = waiting_since_in_tx(cx, account_id, contact_id)
    if queued_at is None:
        return False
    mode, away_after = setting
    chosen = claim_agent_in_tx(cx, account_id, mode, _seen_since(now, away_after), contact_id=contact_id)
    if chosen is None or not assign_in_tx(cx, account_id, contact_id, chosen["id"], AUTOMATIC,
                                                _detail(mode, chosen, queued_at)):
        return True
    agents_assigned_in_tx(cx, account_id, [(contact_id, chosen["id"])])
    return False


def assign_queued_in_tx(cx: Connection, account_id: str, now: datetime, limit: int = BATCH,
                        by: Mapping[str, Any] = AUTOMATIC) -> list[tuple[str, str]]:
    """In one write transaction under the account's lock: give up to limit waiting conversations, oldest first,
    to the agents who may take them now, each claimed in turn. Returns [(contact id, user id)] assigned. With the
    mode off, the queue is emptied instead (nothing waits for an assignment that will not come)."""
    lock_account_in_tx(cx, account_id)
    mode, away_after = setting_of(setting_in_tx(cx, account_id))
    if mode not in ON:
        clear_queue_in_tx(cx, account_id)
        return []
    seen_since = _seen_since(now, away_after)
    chosen = claim_agent_in_tx(cx, account_id, mode, seen_since)
    if chosen is None:
        return []  # nobody may take one: the queue is not read
    assigned: list[tuple[str, str]] = []
    for contact_id, queued_at in queue_head_in_tx(cx, account_id, limit):
        chosen = chosen or claim_agent_in_tx(cx, account_id, mode, seen_since)
        if chosen is None:
            break
        if assign_in_tx(cx, account_id, contact_id, chosen["id"], by, _detail(mode, chosen, queued_at)):
            assigned.append((contact_id, chosen["id"]))
            chosen = None  # their load and turn moved: the next is chosen again
    agents_assigned_in_tx(cx, account_id, assigned, actor=by.get("actor"))
    return assigned
