"""SQL for webhook delivery: due outbox rows, attempts, and the outcome written back to outbox and message."""
import json

from storage import conversations
from storage.db import fetch_all, fetch_one, reads, writes
from storage.events import MESSAGE_STATUS, emit_in_tx

_OUTBOX_COLUMNS = ("id, account_id, kind, event_type, message_id, webhook_id, payload, status, attempts,"
                   " next_attempt_at, last_error, sent_at, created_at")


_JSON = ("last_error",)  # columns stored as JSON text


def _placeholders(values):
    return ", ".join("?" for _ in values)


@reads
def due_rows(cx, now, *, per_account, limit, exclude_ids=(), exclude_accounts=()):
    """Pending rows due at ``now``, oldest first, at most ``per_account`` per account so that one
    account's backlog cannot fill the batch; rows already in flight and saturated accounts left out."""
    where, args = ["status = 'pending'", "next_attempt_at <= ?"], [now]
    if exclude_ids:
        where.append(f"id NOT IN ({_placeholders(exclude_ids)})")
        args += list(exclude_ids)
    if exclude_accounts:
        where.append(f"account_id NOT IN ({_placeholders(exclude_accounts)})")
        args += list(exclude_accounts)
    sql = (f"SELECT {_OUTBOX_COLUMNS} FROM ("
           f" SELECT {_OUTBOX_COLUMNS}, ROW_NUMBER() OVER (PARTITION BY account_id ORDER BY next_attempt_at, id)"
           f" AS rank_in_account FROM outbox WHERE {' AND '.join(where)}"
           ") due WHERE rank_in_account <= ? ORDER BY next_attempt_at, id LIMIT ?")
    return fetch_all(cx, sql, (*args, per_account, limit), json_columns=_JSON)


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
        set_message_status_in_tx(cx, row["account_id"], row["message_id"], "Sent" if status == "sent" else "Failed",
                                 error_json)


def set_message_status_in_tx(cx, account_id, message_id, status, error_json):
    """An outbound message's new status (and its error, JSON text), with its conversation's failed count and a
    message.status event for open pages, in this transaction. Returns the status before, or None when the
    account has no such outbound message."""
    before = cx.execute("SELECT contact_id, status FROM messages WHERE account_id = ? AND id = ? AND direction = 'outbound'",
                        (account_id, message_id)).fetchone()
    if before is None:
        return None
    contact_id, old_status = before
    cx.execute("UPDATE messages SET status = ?, error = ? WHERE account_id = ? AND id = ?",
               (status, error_json, account_id, message_id))
    conversations.on_status_in_tx(cx, account_id, contact_id, old_status, status)
    emit_in_tx(cx, account_id, MESSAGE_STATUS, {"messageId": message_id, "contactId": contact_id, "status": status})
    return old_status


@writes
def schedule_retry_now(cx, account_id, message_id, now):
    """Make the message's delivery due at ``now`` (a manual retry). Returns the outbox row as it was
    before, or None when the message has no delivery; a row already sent is left alone."""
    before = fetch_one(cx, f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE account_id = ? AND message_id = ?"
                       " ORDER BY id DESC LIMIT 1", (account_id, message_id), json_columns=_JSON)
    if before is not None and before["status"] != "sent":
        cx.execute("UPDATE outbox SET status = 'pending', next_attempt_at = ? WHERE id = ?", (now, before["id"]))
    return before


@writes
def retry_failed_message(cx, account_id, message_id, now):
    """A manual retry of a Failed outbound message: its delivery is due at ``now`` and the message is Pending
    again (its error kept until the next attempt). Returns {"status": the message's status before (None when
    the account has no such outbound message), "outbox": the delivery row before (None when it has none)};
    only a Failed message with a delivery is changed."""
    row = cx.execute("SELECT status, error FROM messages WHERE account_id = ? AND id = ? AND direction = 'outbound'",
                     (account_id, message_id)).fetchone()
    if row is None or row[0] != "Failed":
        return {"status": row and row[0], "outbox": None}
    before = schedule_retry_now.sync(cx, account_id, message_id, now)
    if before is not None and before["status"] != "sent":
        set_message_status_in_tx(cx, account_id, message_id, "Pending", row[1])
    return {"status": "Failed", "outbox": before}


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

