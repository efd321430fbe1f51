"""SQL for webhook delivery: due outbox rows, attempts, and the outcome written back to outbox and message."""
import json

from storage.accounts import get_accounts_in_tx
from storage.db import fetch_all, fetch_one, reads, writes

_OUTBOX_COLUMNS = ("id, account_id, kind, event_type, message_id, webhook_id, payload, status, attempts,"
                   " next_attempt_at, last_error, sent_at, created_at")


_JSON = ("last_error",)  # columns stored as JSON text
# SQLite's planner prefers outbox_due (status = ?) without ANALYZE statistics, which scans every pending row;
# these lookups are what the partial index is for (SQLite syntax; PostgreSQL's planner needs no hint).
_PENDING = "INDEXED BY outbox_pending_by_account"


@reads
def due_rows(cx, now, *, per_account, limit, exclude_ids=(), exclude_accounts=()):
    """Pending rows due at ``now``, oldest first, at most ``per_account`` per account so that one
    account's backlog cannot fill the batch; rows already in flight and saturated accounts left out.
    Each account with pending rows costs one seek in outbox_pending_by_account (migration 0030), however
    long its backlog."""
    excluded_ids, excluded_accounts = set(exclude_ids), set(exclude_accounts)
    rows = []
    for account_id in _accounts_with_pending(cx):
        if account_id in excluded_accounts:
            continue
        # In-flight rows are skipped in Python: at most the worker's concurrency of them, all among the
        # account's oldest, so a few more than per_account are read.
        candidates = fetch_all(cx, f"SELECT {_OUTBOX_COLUMNS} FROM outbox {_PENDING} WHERE status = 'pending'"
                                   " AND account_id = ? AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?",
                               (account_id, now, per_account + len(excluded_ids)), json_columns=_JSON)
        rows += [row for row in candidates if row["id"] not in excluded_ids][:per_account]
    rows.sort(key=lambda row: (row["next_attempt_at"], row["id"]))
    return rows[:limit]


@reads
def due_batch(cx, now, *, per_account, limit, exclude_ids=(), exclude_accounts=()):
    """(due_rows(...), {account id: account} of those rows): what one dispatch needs, in one read."""
    rows = due_rows.sync(cx, now, per_account=per_account, limit=limit, exclude_ids=exclude_ids,
                         exclude_accounts=exclude_accounts)
    return rows, get_accounts_in_tx(cx, {row["account_id"] for row in rows})


def _accounts_with_pending(cx):
    """The accounts with pending outbox rows: a skip scan over the partial index, one seek per account."""
    return [row[0] for row in cx.execute(
        "WITH RECURSIVE pending(account_id) AS ("
        f" SELECT MIN(account_id) FROM outbox {_PENDING} WHERE status = 'pending'"
        f" UNION ALL SELECT (SELECT MIN(account_id) FROM outbox {_PENDING} WHERE status = 'pending'"
        " AND account_id > p.account_id)"
        " FROM pending p WHERE p.account_id IS NOT NULL"
        ") SELECT account_id FROM pending WHERE account_id IS NOT NULL")]


@reads
def next_due_at(cx):
    """The earliest next_attempt_at among pending rows, or None."""
    return cx.execute("SELECT MIN(next_attempt_at) FROM outbox WHERE status = 'pending'").fetchone()[0]


@writes
def record_attempt(cx, row, attempt, *, status, next_attempt_at, error):
    """One delivery attempt and its consequences, in one transaction.

    row: the outbox row attempted. attempt: {at, http_status, error, response_excerpt, duration_ms}.
    status: the outbox's new status: 'sent', 'pending' (a retry is scheduled at next_attempt_at) or
    'failed' (final). error: the error object stored with the row and its message, or None on success
    (a success clears the message's error; the attempts keep the history).
    """
    cx.execute("INSERT INTO delivery_attempts (outbox_id, account_id, at, http_status, error, response_excerpt,"
               " duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
               (row["id"], row["account_id"], attempt["at"], attempt["http_status"], attempt["error"],
                attempt["response_excerpt"], attempt["duration_ms"]))
    error_json = json.dumps(error) if error is not None else None
    cx.execute("UPDATE outbox SET status = ?, attempts = attempts + 1,"
               " next_attempt_at = COALESCE(?, next_attempt_at), last_error = ?,"
               " sent_at = CASE WHEN ? = 'sent' THEN ? ELSE sent_at END"
               " WHERE id = ? AND account_id = ?",
               (status, next_attempt_at, error_json, status, attempt["at"], row["id"], row["account_id"]))
    if row["message_id"]:
        cx.execute("UPDATE messages SET status = ?, error = ? WHERE account_id = ? AND id = ? AND direction = 'outbound'",
                   ("Sent" if status == "sent" else "Failed", error_json, row["account_id"], row["message_id"]))


@writes
def schedule_retry_now(cx, account_id, message_id, now):
    """Make the message's delivery due at ``now`` (a manual retry). Returns the outbox row as it was
    before, or None when the message has no delivery; a row already sent is left alone."""
    before = fetch_one(cx, f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE account_id = ? AND message_id = ?"
                       " ORDER BY id DESC LIMIT 1", (account_id, message_id), json_columns=_JSON)
    if before is not None and before["status"] != "sent":
        cx.execute("UPDATE outbox SET status = 'pending', next_attempt_at = ? WHERE id = ?", (now, before["id"]))
    return before


@reads
def get_outbox_for_message(cx, account_id, message_id):
    return fetch_one(cx, f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE account_id = ? AND message_id = ?"
                     " ORDER BY id DESC LIMIT 1", (account_id, message_id), json_columns=_JSON)


@reads
def get_outbox(cx, account_id, outbox_id):
    return fetch_one(cx, f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE account_id = ? AND id = ?",
                     (account_id, outbox_id), json_columns=_JSON)


@reads
def list_attempts(cx, account_id, outbox_id):
    return [dict(r) for r in cx.execute(
        "SELECT id, outbox_id, at, http_status, error, response_excerpt, duration_ms FROM delivery_attempts"
        " WHERE account_id = ? AND outbox_id = ? ORDER BY id", (account_id, outbox_id))]

