"""SQL for webhook delivery: due outbox rows, attempts, and the outcome written back to outbox and message."""
from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from common.errors import Conflict, NotFound
from storage import campaigns, conversations
from storage.db import fetch_all, fetch_one, reads, writes
from storage.dialect import dialect_of
from storage.events import MESSAGE_STATUS, emit_at_commit_in_tx
from storage.interface import Connection, Row, execute_later
from storage.outbox import enqueue_notification_in_tx

MESSAGE_FAILED = "message.failed"  # notification and event: a reply's delivery failed for good

_OUTBOX_COLUMNS = ("id, account_id, kind, event_type, message_id, webhook_id, payload, status, attempts,"
                   " next_attempt_at, last_error, sent_at, created_at, campaign_id")


_JSON = ("last_error",)  # columns stored as JSON text


def _placeholders(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


@reads
def due_rows(cx: Connection, now: str, *, per_account: int, limit: int, exclude_ids: Collection[int] = (), exclude_accounts: Collection[str] = (), owner: str | None = None) -> list[Row]:
    """Pending rows due at ``now``, at most ``per_account`` per account so that one account's backlog
    cannot fill the batch; rows already in flight and saturated accounts left out. Two lanes: replies
    and notifications first (oldest first), then campaign deliveries (docs/design.md#api-decisions: a campaign shares the
    account's delivery concurrency without starving its other replies). Rows claimed by another process than
    ``owner`` are left out (claim())."""
    direct = _due_in_lane(cx, "direct", now, per_account, limit, exclude_ids, exclude_accounts, owner)
    return direct + _due_in_lane(cx, "campaign", now, per_account, limit - len(direct), exclude_ids,
                                 exclude_accounts, owner)


# Each lane has a partial index on (account_id, next_attempt_at, id): the accounts with pending rows are found
# with one seek each (a loose index scan), then each account's first due rows with one more, so that neither
# a campaign's backlog nor a bot's burst of replies is ever scanned (both were: 9 ms a round at 20k rows).
# INDEXED BY is SQLite's (a PostgreSQL backend drops it): without statistics SQLite's planner prefers
# outbox_due (status, next_attempt_at), which walks the whole backlog.
_LANES = {"direct": ("outbox_direct_by_account", "campaign_id IS NULL"),  # migration 0080
          "campaign": ("outbox_campaign_due", "campaign_id IS NOT NULL")}  # migration 0060
# A cancelled campaign's deliveries are dropped in batches after the cancel (storage/campaign_actions.py):
# until its batches are done, none of them is handed out. The direct lane (replies) never pays for this.
_NOT_CANCELLING = {"direct": "", "campaign": " AND NOT EXISTS (SELECT 1 FROM campaigns c WHERE c.id = outbox.campaign_id"
                                             " AND c.pending_action = 'cancel')"}


# Not being delivered by another process: never claimed, its claim lapsed (that process died), or claimed by
# this one (an attempt whose outcome could not be written, tried again).
_UNCLAIMED = "(claimed_until IS NULL OR claimed_until < ? OR claimed_by = ?)"
_UNCLAIMED_BY_ANYONE = "(claimed_until IS NULL OR claimed_until < ?)"


@writes
def claim(cx: Connection, ids: Sequence[int], owner: str, now: str, until: str) -> list[int]:
    """Claim due rows for ``owner`` (one server process) until ``until``: returns the ids it got, those still
    pending and unclaimed (or whose claim lapsed). Of several processes claiming one row, one gets it: on
    PostgreSQL the others skip the row the first has locked, and its committed claim fails their condition."""
    if not ids:
        return []
    rows = cx.execute(f"UPDATE outbox SET claimed_by = ?, claimed_until = ? WHERE id IN (SELECT id FROM outbox"
                      f" WHERE id IN ({_placeholders(ids)}) AND status = 'pending' AND {_UNCLAIMED}"
                      f"{dialect_of(cx).skip_locked}) RETURNING id", (owner, until, *ids, now, owner)).fetchall()
    return [row[0] for row in rows]


def _due_in_lane(cx: Connection, lane: str, now: str, per_account: int, limit: int, exclude_ids: Collection[int], exclude_accounts: Collection[str], owner: str | None) -> list[Row]:
    """The lane's due rows, oldest first, at most per_account per account (exclude_accounts left out)."""
    if limit <= 0:
        return []
    index, condition = _LANES[lane]
    pending = f"FROM outbox{dialect_of(cx).index_hint(index)} WHERE status = 'pending' AND {condition}"
    accounts = [r[0] for r in cx.execute(
        f"WITH RECURSIVE due(account_id) AS (SELECT MIN(account_id) {pending}"
        f" UNION ALL SELECT (SELECT MIN(account_id) {pending} AND account_id > due.account_id)"
        " FROM due WHERE due.account_id IS NOT NULL) SELECT account_id FROM due WHERE account_id IS NOT NULL")
        if r[0] not in exclude_accounts]
    excluded = set(exclude_ids)
    rows = []
    for account_id in accounts:
        # Rows in flight are skipped here: at most the worker's concurrency of them, so a few more are read.
        candidates = fetch_all(cx, f"SELECT {_OUTBOX_COLUMNS} {pending} AND account_id = ? AND next_attempt_at <= ?"
                                   f" AND {_UNCLAIMED}{_NOT_CANCELLING[lane]} ORDER BY next_attempt_at, id LIMIT ?",
                               (account_id, now, now, owner, per_account + len(excluded)), json_columns=_JSON)
        rows += [row for row in candidates if row["id"] not in excluded][:per_account]
    rows.sort(key=lambda r: (r["next_attempt_at"], r["id"]))
    return rows[:limit]


@reads
def next_due_at(cx: Connection) -> str | None:
    """The earliest next_attempt_at among pending rows, or None."""
    return cx.execute("SELECT MIN(next_attempt_at) FROM outbox WHERE status = 'pending'").fetchone()[0]


@writes
def record_attempt(cx: Connection, row: Mapping[str, Any], attempt: Mapping[str, Any], *, status: str, next_attempt_at: str | None, error: Mapping[str, Any] | None) -> None:
    """One delivery attempt and its consequences, in one transaction.

    row: the outbox row attempted, as read before the attempt. attempt: {at, http_status, error,
    response_excerpt, duration_ms}. status: the outbox's new status: 'sent', 'pending' (a retry is
    scheduled at next_attempt_at) or 'failed' (final). error: the error object stored with the row and
    its message, or None on success (a success clears the message's error; the attempts keep the history).

    A manual retry (schedule_retry_now) asked while this attempt was in flight moved next_attempt_at away
    from the value in ``row``: unless this attempt delivered the webhook, the row then stays pending at
    the time the retry asked for, rather than taking this attempt's schedule (or final failure).
    """
    # Writes whose results are not read travel with the next statement on PostgreSQL (execute_later): an outcome
    # was ~8 round trips, each a turn of the GIL between the event loop and the worker thread.
    execute_later(cx, "INSERT INTO delivery_attempts (outbox_id, account_id, at, http_status, error,"
                  " response_excerpt, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                  (row["id"], row["account_id"], attempt["at"], attempt["http_status"], attempt["error"],
                   attempt["response_excerpt"], attempt["duration_ms"]))
    if row.get("campaign_id"):
        status, next_attempt_at = campaigns.attempt_ended_in_tx(cx, row, status, next_attempt_at, error)
        if error is not None:
            error = {**error, "nextAttemptAt": None if next_attempt_at == campaigns.HELD else next_attempt_at}
    error_json = json.dumps(error) if error is not None else None
    retried = "(? <> 'sent' AND next_attempt_at IS DISTINCT FROM ?)"  # a manual retry came in meanwhile
    written = cx.execute(
        f"UPDATE outbox SET attempts = attempts + 1, claimed_by = NULL, claimed_until = NULL,"
        f" status = CASE WHEN {retried} THEN 'pending' ELSE ? END,"
        f" last_error = CASE WHEN {retried} THEN {dialect_of(cx).json_set('?', 'nextAttemptAt', 'next_attempt_at')}"
        " ELSE ? END,"
        f" next_attempt_at = CASE WHEN {retried} THEN next_attempt_at ELSE COALESCE(?, next_attempt_at) END,"
        " sent_at = CASE WHEN ? = 'sent' THEN ? ELSE sent_at END"
        " WHERE id = ? AND account_id = ? RETURNING last_error, status",
        (status, row["next_attempt_at"], status, status, row["next_attempt_at"], error_json, error_json,
         status, row["next_attempt_at"], next_attempt_at, status, attempt["at"], row["id"],
         row["account_id"])).fetchall()
    if row["message_id"]:
        # The message's error is the row's last_error as just written (a retry asked meanwhile dated it).
        error_json, written_status = written[0]
        before = set_message_status_in_tx(cx, row["account_id"], row["message_id"],
                                          "Sent" if status == "sent" else "Failed", error_json, attempt["at"])
        if written_status == "failed" and before is not None:  # final: no retry will come (docs/api.md)
            enqueue_notification_in_tx(cx, row["account_id"], MESSAGE_FAILED, {
                "messageId": row["message_id"], "contactId": before[0], "final": True,
                "error": json.loads(error_json) if error_json else None})
    if status == "sent":
        _bring_retries_forward_in_tx(cx, row, attempt["at"])


def _bring_retries_forward_in_tx(cx: Connection, row: Mapping[str, Any], now: str) -> None:
    """The receiver answers again: the deliveries to the same URL (the account's replies, or its notifications
    of this type) that wait for a retry are due now rather than minutes or hours later, so that a short
    outage delays replies by seconds and they arrive close to their order. A campaign's own deliveries keep
    their schedule (a campaign pauses and resumes on its own), and rows being attempted are left alone."""
    same_url = {"reply": "kind = 'reply'", "mail": "kind = 'mail'"}.get(row["kind"],  # mail: the same SMTP server
                                                                       "kind = 'notification' AND event_type = ?")
    args = (row["event_type"],) if row["kind"] == "notification" else ()
    waiting = (f"FROM outbox WHERE status = 'pending' AND campaign_id IS NULL AND account_id = ?"
               f" AND next_attempt_at > ? AND attempts > 0 AND {same_url} AND {_UNCLAIMED_BY_ANYONE}")
    params = (row["account_id"], now, *args, now)
    dialect = dialect_of(cx)
    json_set = dialect.json_set
    # SKIP LOCKED: two deliveries that succeed at once would both bring the same waiting rows forward, each
    # locking them in its own order (a deadlock on PostgreSQL); a row another has locked is being brought forward.
    moved = cx.execute(f"UPDATE outbox SET next_attempt_at = ?,"
                       f" last_error = {json_set('last_error', 'nextAttemptAt', 'CAST(? AS TEXT)')}"
                       f" WHERE id IN (SELECT id {waiting}{dialect.skip_locked}) RETURNING message_id",
                       (now, now, *params)).fetchall()
    message_ids = sorted({message_id for (message_id,) in moved if message_id})
    if message_ids:  # only the rows this transaction moved: no other one updates their messages now
        execute_later(cx, f"UPDATE messages SET error = {json_set('error', 'nextAttemptAt', 'CAST(? AS TEXT)')}"
                          f" WHERE account_id = ? AND error IS NOT NULL AND id IN ({_placeholders(message_ids)})",
                      (now, row["account_id"], *message_ids))


@writes
def record_attempts(cx: Connection, outcomes: Iterable[tuple[Mapping[str, Any], Mapping[str, Any], str, str | None, Mapping[str, Any] | None]]) -> list[Exception | None]:
    """Several attempts' outcomes (each the arguments of record_attempt) in one write, each in its own
    SAVEPOINT so that one that fails rolls back alone. Returns None or the exception, per outcome. A campaign
    whose counts these outcomes move gets one campaign.progress event for all of them."""
    results: list[Exception | None] = []
    with campaigns.one_progress_event_per_campaign(cx):
        for row, attempt, status, next_attempt_at, error in outcomes:
            campaigns.attempt_starts()
            execute_later(cx, "SAVEPOINT attempt")
            try:
                record_attempt.sync(cx, row, attempt, status=status, next_attempt_at=next_attempt_at, error=error)
                execute_later(cx, "RELEASE attempt")
                results.append(None)
            except Exception as exc:
                if not cx.in_transaction:
                    raise
                cx.execute("ROLLBACK TO attempt")
                cx.execute("RELEASE attempt")
                campaigns.attempt_rolled_back()
                results.append(exc)
    return results


def set_message_status_in_tx(cx: Connection, account_id: str, message_id: str, status: str, error_json: str | None, at: str) -> tuple[str, str] | None:
    """An outbound message's new status (and its error, JSON text), with its conversation's failed count and a
    message.status event for open pages, in this transaction; at: when (status_at). Returns (its contact, the
    status before), or None when the account has no such outbound message."""
    before = cx.execute("SELECT contact_id, status FROM messages WHERE account_id = ? AND id = ? AND direction = 'outbound'",
                        (account_id, message_id)).fetchone()
    if before is None:
        return None
    contact_id, old_status = before
    execute_later(cx, "UPDATE messages SET status = ?, error = ?, status_at = ? WHERE account_id = ? AND id = ?",
                  (status, error_json, at, account_id, message_id))
    conversations.on_status_in_tx(cx, account_id, contact_id, old_status, status)
    emit_at_commit_in_tx(cx, account_id, MESSAGE_STATUS, {"messageId": message_id, "contactId": contact_id, "status": status})
    return contact_id, old_status


@writes
def schedule_retry_now(cx: Connection, account_id: str, message_id: str, now: str) -> Row:
    """A manual retry of a Failed outbound message (the inbox's Retry): its delivery is due at ``now`` and the
    message is Pending again (its error kept until the next attempt). Raises inside the write, so that nothing
    is written (nor remembered under an Idempotency-Key): NotFound for an unknown, inbound or another
    account's message or one without a delivery, Conflict unless it is Failed. Returns the delivery row as it
    was before."""
    message = cx.execute("SELECT status, error FROM messages WHERE account_id = ? AND id = ? AND direction = 'outbound'",
                         (account_id, message_id)).fetchone()
    if message is None:
        raise NotFound(f"no outbound message with id {message_id}", code="NOT_FOUND")
    if message[0] != "Failed":
        raise Conflict(f"message {message_id} is {message[0]}: only a Failed message can be retried", code="CONFLICT")
    before = fetch_one(cx, f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE account_id = ? AND message_id = ?"
                       " ORDER BY id DESC LIMIT 1", (account_id, message_id), json_columns=_JSON)
    if before is None:
        raise NotFound(f"message {message_id} has no webhook delivery", code="NOT_FOUND")
    if before["status"] == "sent":
        raise Conflict(f"message {message_id} was already delivered", code="CONFLICT")
    cx.execute("UPDATE outbox SET status = 'pending', next_attempt_at = ? WHERE id = ?", (now, before["id"]))
    set_message_status_in_tx(cx, account_id, message_id, "Pending", message[1], now)
    return before


@reads
def get_outbox_for_message(cx: Connection, account_id: str, message_id: str) -> Row | None:
    return fetch_one(cx, f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE account_id = ? AND message_id = ?"
                     " ORDER BY id DESC LIMIT 1", (account_id, message_id), json_columns=_JSON)


@reads
def get_outbox(cx: Connection, account_id: str, outbox_id: int) -> Row | None:
    return fetch_one(cx, f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE account_id = ? AND id = ?",
                     (account_id, outbox_id), json_columns=_JSON)


@reads
def list_attempts(cx: Connection, account_id: str, outbox_id: int) -> list[Row]:
    return [dict(r) for r in cx.execute(
        "SELECT id, outbox_id, at, http_status, error, response_excerpt, duration_ms FROM delivery_attempts"
        " WHERE account_id = ? AND outbox_id = ? ORDER BY id", (account_id, outbox_id))]



@writes
def prune_finished(cx: Connection, before: str, limit: int) -> int:
    """Delete up to ``limit`` outbox rows that are done (sent, or failed for good) and whose last attempt
    was scheduled before ``before``, with their delivery attempts; pending rows are never touched. The
    messages keep their status and last error. Returns how many outbox rows were deleted."""
    ids = [row[0] for row in cx.execute(
        "SELECT id FROM outbox WHERE status IN ('sent', 'failed') AND next_attempt_at < ? LIMIT ?",
        (before, limit))]
    if not ids:
        return 0
    cx.execute(f"DELETE FROM delivery_attempts WHERE outbox_id IN ({_placeholders(ids)})", ids)
    return cx.execute(f"DELETE FROM outbox WHERE id IN ({_placeholders(ids)})", ids).rowcount
