"""SQL for automatic assignment (issue 40, migrations 0630 and 0690): the queue of conversations waiting for an
agent (conversations.queued_at, oldest first), the claim of the agent who takes the next one (users.open_load: their
load, kept by triggers), the assignment itself (a conversation.updated event and an audit entry in its
transaction), and when users were last seen with a live page. An agent is claimed under their row's lock with their
capacity checked on the row as committed, so two transactions (processes) never give them more than it; the
Assigner's rounds also hold the account's lock (storage/dialect.py lock: PostgreSQL's advisory lock; SQLite's one
writer serializes already)."""
from storage.audit import record_by
from storage.db import fetch_all, reads, writes
from storage.dialect import dialect_of
from storage.events import CONVERSATION_UPDATED, emit_at_commit_in_tx

ON = ("round_robin", "balanced")  # the modes that assign (off does not)



def lock_account_in_tx(cx, account_id):
    """Hold the account's automatic assignment until COMMIT (PostgreSQL; a no-op on SQLite)."""
    dialect_of(cx).lock(cx, f"assignment:{account_id}")


def mode_in_tx(cx, account_id):
    """The account's assignment mode, or None (off)."""
    row = cx.execute(f"SELECT {dialect_of(cx).json_field('settings', 'assignment', 'mode')} FROM accounts"
                     " WHERE id = ?", (account_id,)).fetchone()
    return row[0] if row else None


def setting_in_tx(cx, account_id):
    """The account's stored ``assignment`` setting as JSON text, or None."""
    row = cx.execute(f"SELECT {dialect_of(cx).json_field('settings', 'assignment')} FROM accounts WHERE id = ?",
                     (account_id,)).fetchone()
    return row[0] if row else None


def queue_in_tx(cx, account_id, contact_ids, at):
    """These conversations (re)opened in this transaction: those open and unassigned that are not waiting
    yet wait from ``at``."""
    for contact_id in contact_ids:
        cx.execute("UPDATE conversations SET queued_at = ? WHERE account_id = ? AND contact_id = ?"
                   " AND status = 'open' AND assignee_user_id IS NULL AND queued_at IS NULL",
                   (at, account_id, contact_id))


def unqueue_in_tx(cx, account_id, contact_ids):
    """A person changed these conversations: they wait for automatic assignment no more (left alone)."""
    for contact_id in contact_ids:
        cx.execute("UPDATE conversations SET queued_at = NULL WHERE account_id = ? AND contact_id = ?"
                   " AND queued_at IS NOT NULL", (account_id, contact_id))


def clear_queue_in_tx(cx, account_id):
    """Automatic assignment was turned off: nothing of the account waits any more."""
    cx.execute("UPDATE conversations SET queued_at = NULL WHERE account_id = ? AND queued_at IS NOT NULL",
               (account_id,))


@reads
def queued_accounts(cx):
    """The accounts that have conversations waiting (from the queue's own index)."""
    return [row[0] for row in cx.execute("SELECT DISTINCT account_id FROM conversations"
                                         " WHERE queued_at IS NOT NULL ORDER BY account_id")]


@reads
def queue(cx, account_id, limit=100):
    """[{contact_id, queued_at}] of the account's waiting conversations, oldest first."""
    return fetch_all(cx, "SELECT contact_id, queued_at FROM conversations WHERE account_id = ?"
                         " AND queued_at IS NOT NULL ORDER BY queued_at, contact_id LIMIT ?", (account_id, limit))


def queue_head_in_tx(cx, account_id, limit):
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
_ELIGIBLE = ("u.account_id = ? AND u.active = 1 AND u.removed_at IS NULL AND u.available = 1 AND u.password_hash <> ?"
             " AND (u.capacity IS NULL OR u.open_load < u.capacity)")
# Who gets the next conversation, by mode: round_robin, the oldest turn (never assigned first), then by id;
# balanced, the fewest open and pending first, then as round_robin.
_ORDER = {"round_robin": "COALESCE(u.last_assignment_turn, 0), u.id",
          "balanced": "u.open_load, COALESCE(u.last_assignment_turn, 0), u.id"}
# Nothing of the account waits but this conversation (a new one never waits yet): one that opens while older ones
# wait goes behind them (the Assigner gives them out oldest first).
_NONE_OLDER = ("NOT EXISTS (SELECT 1 FROM conversations q WHERE q.account_id = ? AND q.queued_at IS NOT NULL"
               " AND q.contact_id <> ?)")
# The conversation waits (a message just reopened it, or it waited already).
_WAITS = ("EXISTS (SELECT 1 FROM conversations w WHERE w.account_id = ? AND w.contact_id = ? AND w.queued_at IS NOT"
          " NULL AND w.status = 'open' AND w.assignee_user_id IS NULL)")


def claim_agent_in_tx(cx, account_id, mode, seen_since, contact_id=None, waiting=False):
    """The agent the account's next automatic assignment goes to, claimed: {id, capacity, load} (load: their open
    and pending conversations before it), their turn the account's next; None when nobody may take one now.
    seen_since (not None): only agents with a live page at or after it. contact_id: a conversation its message
    opens, assigned on the message's write: only when no other conversation waits (queue order), and (waiting)
    only when this one waits now. One statement: the choice, and the claim under the agent's row lock (SQLite's
    one writer serializes already): the capacity is checked again on the row as committed, so two processes
    never give an agent more than their capacity; PostgreSQL skips an agent another transaction holds. The
    assignment itself (a conversation's assignee) adds to the agent's load by the table's trigger (migration
    0690)."""
    from storage.users import INVITED  # storage.users imports this module's users (conversation_status)
    dialect = dialect_of(cx)
    where, args = [_ELIGIBLE], [account_id, INVITED]
    if seen_since is not None:
        where.append("u.last_seen_at >= ?")
        args.append(seen_since)
    if contact_id is not None:
        where.append(_NONE_OLDER)
        args += [account_id, contact_id]
        if waiting:
            where.append(_WAITS)
            args += [account_id, contact_id]
    row = cx.execute(
        "UPDATE users SET last_assignment_turn = (SELECT COALESCE(MAX(t.last_assignment_turn), 0) + 1 FROM users t"
        f" WHERE t.account_id = ?) WHERE id = (SELECT u.id FROM users u WHERE {' AND '.join(where)}"
        f" ORDER BY {_ORDER[mode]} LIMIT 1{dialect.skip_locked}) AND account_id = ?"
        " AND (capacity IS NULL OR open_load < capacity) RETURNING id, capacity, open_load",
        (account_id, *args, account_id)).fetchone()
    return None if row is None else {"id": row[0], "capacity": row[1], "load": row[2]}


def assigned_in_tx(cx, account_id, contact_id, user_id, by, detail):
    """The conversation.updated event and the audit entry of an automatic assignment made in this transaction. The
    event is appended with the COMMIT (PostgreSQL): the account's event counter is locked after the agents' rows,
    as every transaction that changes a load takes them (storage/conversation_status.py), so none deadlocks."""
    emit_at_commit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id, "status": "open",
                                                                "assigneeUserId": user_id})
    record_by(cx, by, account_id=account_id, action="conversation.assigned", subject_id=contact_id, detail=detail)


def assign_in_tx(cx, account_id, contact_id, user_id, by, detail):
    """Give the waiting conversation to the user claimed for it (claim_agent_in_tx), with its conversation.updated
    and audit entry. False when it no longer waits open and unassigned."""
    if not cx.execute("UPDATE conversations SET assignee_user_id = ?, queued_at = NULL WHERE account_id = ?"
                      " AND contact_id = ? AND queued_at IS NOT NULL AND status = 'open' AND assignee_user_id IS NULL",
                      (user_id, account_id, contact_id)).rowcount:
        return False
    assigned_in_tx(cx, account_id, contact_id, user_id, by, detail)
    return True


@writes
def mark_seen(cx, user_ids, now, stale_before):
    """These users have a live page open now: their last_seen_at becomes now where it is older than
    stale_before (so a beat writes a user at most once a period). Returns the ids written."""
    if not user_ids:
        return []
    marks = ", ".join("?" for _ in user_ids)
    rows = cx.execute(f"UPDATE users SET last_seen_at = ? WHERE id IN ({marks}) AND (last_seen_at IS NULL"
                      f" OR last_seen_at < ?) RETURNING id", (now, *user_ids, stale_before)).fetchall()
    return sorted(row[0] for row in rows)
