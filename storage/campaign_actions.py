"""SQL for the campaign actions that touch every recipient, cancel and retry-failed (issue 18 item 12 c).

The request's own write checks the action, marks the campaign (pending_action) and does a first bounded
batch; the campaign runner does the rest, a bounded batch per background write (continue_action), until
none is left, also after a restart (the mark is in the data). So no request holds the single writer for
longer than one batch, whatever the campaign's size. Every batch moves the counts with the recipients it
changes (progress_in_tx), so the counts add up to total after each one.

Cancel: the campaign is cancelled at once (no new message, and storage/delivery.py does not hand out its
deliveries); the batches drop pending recipients and queued messages (Cancelled) and stop scheduled retries
(the retrying recipients become failed). Retry-failed: the batches queue again, at the campaign's rate, the
final failures whose delivery still exists; those whose outbox row retention removed stay failed.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from common.errors import Conflict
from common.ids import iso, parse_iso
from storage import conversations, events
from storage.audit import record_by
from storage.campaigns import HELD, _for_change, get_campaign_in_tx, progress_in_tx
from storage.db import fetch_all, reads, writes
from storage.dialect import dialect_of
from storage.interface import Connection, Row
from storage.rows import CampaignRow

BATCH = 500  # recipients per write: the request's first batch, and each of the runner's (callers pass it)


# ---- the request's write -------------------------------------------------------------------------

@writes
def cancel(cx: Connection, account_id: str, campaign_id: str, now: str, limit: int, by: Mapping[str, Any] | None = None) -> CampaignRow:
    """-> cancelled (a draft or scheduled one has no recipients yet: nothing is sent): recipients still pending and messages not yet attempted are dropped (their message
    becomes Cancelled), scheduled retries are stopped (failed); what was sent stays sent. A completed
    campaign can be cancelled while some of its messages are queued or retrying. The first ``limit``
    recipients are done here, the rest by the runner's batches."""
    campaign = _for_change(cx, account_id, campaign_id, ("draft", "scheduled", "running", "paused", "completed"),
                           "cancelled")
    if campaign["status"] == "completed" and campaign["queued"] + campaign["retrying"] == 0:
        raise Conflict(f"campaign {campaign_id} is completed and has no queued or retrying message left to cancel",
                       code="CONFLICT")
    progress_in_tx(cx, campaign_id, status="cancelled", paused_reason=None, finished_at=now,
                   pending_action="cancel", action_cursor="")
    record_by(cx, by, account_id=account_id, action="campaign.cancelled", subject_id=campaign_id)
    return continue_action.sync(cx, campaign_id, limit, now)["campaign"]


@writes
def retry_failed(cx: Connection, account_id: str, campaign_id: str, now: str, limit: int) -> CampaignRow:
    """Send the final failures' messages again (the same message ids), spaced at the campaign's rate from
    now; they count as queued until their next attempt ends. The first ``limit`` are done here, the rest
    by the runner's batches."""
    campaign = _for_change(cx, account_id, campaign_id, ("running", "completed"), "retried")
    if campaign["failed"] == 0:
        raise Conflict(f"campaign {campaign_id} has no failed recipient to retry", code="CONFLICT")
    progress_in_tx(cx, campaign_id, pending_action="retry", action_cursor="", action_at=now, action_done=0)
    return continue_action.sync(cx, campaign_id, limit, now)["campaign"]


@reads
def retryable(cx: Connection, account_id: str, campaign_id: str) -> dict[str, int]:
    """How many of the campaign's failed recipients retry-failed can send again (their delivery, the outbox
    row, still exists) and how many it cannot (retention removed it): {"retryable", "notRetryable"}."""
    row = cx.execute("SELECT COUNT(o.id), COUNT(*) FROM campaign_recipients r LEFT JOIN outbox o"
                     " ON o.account_id = ? AND o.message_id = r.message_id AND o.status = 'failed'"
                     " WHERE r.campaign_id = ? AND r.status = 'failed'", (account_id, campaign_id)).fetchone()
    return {"retryable": row[0], "notRetryable": row[1] - row[0]}


# ---- the runner's batches ------------------------------------------------------------------------

@reads
def pending_actions(cx: Connection) -> list[Row]:
    """The campaigns with an action to finish: [{id, pending_action}] (index campaigns_pending_action)."""
    return fetch_all(cx, "SELECT id, pending_action FROM campaigns WHERE pending_action IS NOT NULL ORDER BY id")


@writes
def continue_action(cx: Connection, campaign_id: str, limit: int, now: str) -> dict[str, Any]:
    """One batch of at most ``limit`` recipients of the campaign's pending action; the action is over (the
    mark cleared) when a batch finds fewer. Returns {"campaign": its row after, "done": bool, "rows": n}."""
    campaign = get_campaign_in_tx(cx, None, campaign_id)
    action = campaign["pending_action"] if campaign else None
    if campaign is None or action is None:
        return {"campaign": campaign, "done": True, "rows": 0}
    rows = (_cancel_batch_in_tx if action == "cancel" else _retry_batch_in_tx)(cx, campaign, limit, now)
    done = rows < limit
    if done:
        campaign = progress_in_tx(cx, campaign_id, pending_action=None, action_cursor="", action_at=None,
                                  action_done=0)
    else:
        campaign = get_campaign_in_tx(cx, None, campaign_id)
    return {"campaign": campaign, "done": done, "rows": rows}


def _next(cx: Connection, campaign_id: str, status: str, limit: int, after: str = "") -> list[str]:
    return [r[0] for r in cx.execute("SELECT contact_id FROM campaign_recipients WHERE campaign_id = ?"
                                     " AND status = ? AND contact_id > ? ORDER BY contact_id LIMIT ?",
                                     (campaign_id, status, after, limit))]


def _set_status(cx: Connection, campaign_id: str, contact_ids: Sequence[str], old: str, new: str) -> None:
    cx.executemany("UPDATE campaign_recipients SET status = ? WHERE campaign_id = ? AND contact_id = ? AND status = ?",
                   ((new, campaign_id, contact_id, old) for contact_id in contact_ids))


def _deliveries(cx: Connection, campaign: Mapping[str, Any], contact_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """(contact id, message id, outbox id or None, message status or None) of these recipients."""
    found = []
    for contact_id in contact_ids:
        found.append(cx.execute("SELECT r.contact_id, r.message_id, o.id, m.status FROM campaign_recipients r"
                                " LEFT JOIN outbox o ON o.account_id = ? AND o.message_id = r.message_id"
                                " LEFT JOIN messages m ON m.account_id = ? AND m.id = r.message_id"
                                " WHERE r.campaign_id = ? AND r.contact_id = ?",
                                (campaign["account_id"], campaign["account_id"], campaign["id"], contact_id)).fetchone())
    return found


def _cancel_batch_in_tx(cx: Connection, campaign: Mapping[str, Any], limit: int, now: str) -> int:
    """Queued messages first (Cancelled, never sent), then retrying ones (failed, no further attempt), then
    pending recipients (cancelled, no message): each leaves its status, so no cursor is needed."""
    account_id, campaign_id = campaign["account_id"], campaign["id"]
    queued = _deliveries(cx, campaign, _next(cx, campaign_id, "queued", limit))
    retrying = _deliveries(cx, campaign, _next(cx, campaign_id, "retrying", limit - len(queued)))
    pending = _next(cx, campaign_id, "pending", limit - len(queued) - len(retrying))
    stopped = json.dumps({"at": now, "httpStatus": None, "error": "cancelled with its campaign", "response": None,
                          "nextAttemptAt": None})
    cx.executemany("UPDATE outbox SET status = 'failed', last_error = ? WHERE id = ? AND status = 'pending'",
                   ((stopped, outbox_id) for _, _, outbox_id, _ in queued if outbox_id))
    cx.executemany("UPDATE messages SET status = 'Cancelled', status_at = ? WHERE account_id = ? AND id = ?",
                   ((now, account_id, message_id) for _, message_id, _, _ in queued))
    # A queued message is Pending, or Failed when retry_failed queued it again: those leave the failed counts.
    conversations.on_statuses_in_tx(cx, account_id, [(contact_id, status) for contact_id, _, _, status in queued
                                                     if status], "Cancelled")
    unset = dialect_of(cx).json_set
    cx.executemany(f"UPDATE outbox SET status = 'failed', last_error = {unset('last_error', 'nextAttemptAt', 'NULL')}"
                   " WHERE id = ? AND status = 'pending'", ((outbox_id,) for _, _, outbox_id, _ in retrying if outbox_id))
    cx.executemany(f"UPDATE messages SET error = {unset('error', 'nextAttemptAt', 'NULL')} WHERE account_id = ? AND id = ?",
                   ((account_id, message_id) for _, message_id, _, _ in retrying))
    _set_status(cx, campaign_id, [r[0] for r in queued], "queued", "cancelled")
    cx.executemany(f"UPDATE campaign_recipients SET status = 'failed', error = {unset('error', 'nextAttemptAt', 'NULL')}"
                   " WHERE campaign_id = ? AND contact_id = ? AND status = 'retrying'",
                   ((campaign_id, r[0]) for r in retrying))
    _set_status(cx, campaign_id, pending, "pending", "cancelled")
    # Open threads of these contacts show the messages' new state.
    for status, rows in (("Cancelled", queued), ("Failed", retrying)):
        events.emit_batches_in_tx(cx, account_id, events.MESSAGES_STATUS, {"campaignId": campaign_id, "status": status},
                                  "messages", [[contact_id, message_id] for contact_id, message_id, _, _ in rows])
    progress_in_tx(cx, campaign_id, {"pending": -len(pending), "queued": -len(queued), "retrying": -len(retrying),
                                     "failed": len(retrying), "cancelled": len(pending) + len(queued)})
    return len(queued) + len(retrying) + len(pending)


def _retry_batch_in_tx(cx: Connection, campaign: Mapping[str, Any], limit: int, now: str) -> int:
    """The next failed recipients after action_cursor: those whose delivery still exists go out again,
    spaced at the campaign's rate after the ones queued before them (held while the campaign is paused);
    the others stay failed."""
    campaign_id = campaign["id"]
    contact_ids = _next(cx, campaign_id, "failed", limit, campaign["action_cursor"])
    if not contact_ids:
        return 0
    sendable = [(contact_id, outbox_id) for contact_id, _, outbox_id, _ in _deliveries(cx, campaign, contact_ids)
                if outbox_id is not None]
    start, step = parse_iso(campaign["action_at"] or now), 60.0 / campaign["rate_per_minute"]
    first = campaign["action_done"]
    cx.executemany("UPDATE outbox SET status = 'pending', next_attempt_at = ? WHERE id = ? AND status = 'failed'",
                   ((HELD if campaign["status"] == "paused" else iso(start + timedelta(seconds=(first + i) * step)),
                     outbox_id) for i, (_, outbox_id) in enumerate(sendable)))
    _set_status(cx, campaign_id, [contact_id for contact_id, _ in sendable], "failed", "queued")
    progress_in_tx(cx, campaign_id, {"failed": -len(sendable), "queued": len(sendable)}, action_cursor=contact_ids[-1],
                   action_done=first + len(sendable))
    return len(contact_ids)
