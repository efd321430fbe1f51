"""SQL for campaigns and their recipients: the snapshot, the counts (kept in the transaction of every
change they count, through progress_in_tx), the state changes, and a delivery's outcome per recipient."""
from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, cast

from common.errors import Conflict, Invalid, NotFound
from common.placeholders import compile_body, render
from common.ids import iso, parse_iso
from storage import accounts as account_store
from storage import contacts as contact_store
from storage import events, outbound
from storage.audit import record_by
from storage.contacts import tag_like
from storage.db import fetch_all, fetch_one, reads, writes
from storage.interface import Connection, Row, execute_later, values_rows
from storage.lists import list_not_found
from storage.rows import CampaignRow

_COLUMNS = ("id, account_id, name, list_id, tag, campaign_key, body, channel, rate_per_minute, status, paused_reason,"
            " start_at, started_at, finished_at, created_at, cursor, total, pending, queued, sent, failed, skipped,"
            " cancelled, probe_attempts, probe_failures, failure_streak, retrying, pending_action, action_cursor,"
            " action_at, action_done")
# retrying: the last attempt failed and another is scheduled; failed: final failures only (issue 18 item 12).
COUNTS = ("total", "pending", "queued", "sent", "failed", "retrying", "skipped", "cancelled")
RECIPIENT_STATUSES = COUNTS[1:]
# A held delivery (its campaign is paused) is pending but never due; resume makes it due again.
HELD = "9999-12-31T23:59:59.999Z"

# The auto-pause rule (docs/api.md "Campaigns"): since the start or the last resume, of the first PROBE_SIZE
# first attempts that ended at least PROBE_FAILURES failed, or FAILURE_STREAK first attempts in a row failed.
PROBE_SIZE, PROBE_FAILURES, FAILURE_STREAK = 20, 16, 20

NOT_FOUND = "no campaign with id {}"


def campaign_not_found(campaign_id: str) -> NotFound:
    return NotFound(NOT_FOUND.format(campaign_id), code="NOT_FOUND")


def public_campaign(row: Mapping[str, Any]) -> dict[str, Any]:
    """The campaign as the API shows it (docs/design.md#api-decisions "Campaigns", plus what the UI needs to show progress)."""
    return {"id": row["id"], "name": row["name"], "listId": row["list_id"], "tag": row["tag"],
            "campaignId": row["campaign_key"],
            "status": row["status"], "pausedReason": row["paused_reason"], "body": row["body"],
            "channel": row["channel"], "ratePerMinute": row["rate_per_minute"],
            "counts": {name: row[name] for name in COUNTS}, "startAt": row["start_at"],
            "startedAt": row["started_at"], "createdAt": row["created_at"], "finishedAt": row["finished_at"],
            "pendingAction": row["pending_action"]}


# ---- the one place where a campaign's progress changes ----------------------------------------

def progress_in_tx(cx: Connection, campaign_id: str, deltas: Mapping[str, int] | None = None, **changes: Any) -> CampaignRow:
    """Apply count deltas ({count name: +n/-n}) and column changes (status, paused_reason, finished_at,
    cursor, the auto-pause counters ...) to one campaign, in the caller's transaction. Every change of a
    campaign's counts or status goes through here, so its progress is published from this one place: a
    campaign.progress live event when a count or the status changed. Returns the campaign row after it."""
    assignments, args = [], []
    for name, delta in (deltas or {}).items():
        if delta:
            assignments.append(f"{name} = {name} + ?")
            args.append(delta)
    for name, value in changes.items():
        assignments.append(f"{name} = ?")
        args.append(value)
    # campaign_id names a campaign the caller read in this transaction: the row is there
    if not assignments:
        return cast(CampaignRow, get_campaign_in_tx(cx, None, campaign_id))
    campaign = fetch_one(cx, f"UPDATE campaigns SET {', '.join(assignments)} WHERE id = ? RETURNING {_COLUMNS}",
                         (*args, campaign_id))
    if campaign is not None and ("status" in changes or any((deltas or {}).values())):
        batch = getattr(_local, "batch", None)
        if batch is None:
            progress_event_in_tx(cx, campaign)
        else:
            batch.held.add(campaign_id)
    return cast(CampaignRow, campaign)


def progress_event_in_tx(cx: Connection, campaign: Mapping[str, Any]) -> None:
    """campaign.progress for the account's open pages: the campaign's status and counts as this transaction
    leaves them (pages apply them as they are, without fetching anything)."""
    events.emit_at_commit_in_tx(cx, campaign["account_id"], events.CAMPAIGN_PROGRESS,
                      {"campaignId": campaign["id"], "status": campaign["status"],
                       "counts": {name: campaign[name] for name in COUNTS}})


# The batch of delivery outcomes this thread's transaction is in (one_progress_event_per_campaign), or None. Per
# thread: on PostgreSQL several writes run at once, each in a worker thread of its own.
_local = threading.local()


class _OutcomeBatch:
    """Delivery outcomes written in one transaction: each campaign's counts move once, at the end, so that its
    row is locked (PostgreSQL) only from there to the COMMIT, not through the whole batch: the campaign's
    enqueue, which moves the same row, does not queue behind every batch of outcomes. Meanwhile the campaign
    is seen as the transaction will leave it (its row as read, plus the counts moved so far)."""

    def __init__(self) -> None:
        self.rows: dict[str, Mapping[str, Any] | None] = {}
        self.totals: dict[str, tuple[dict[str, int], dict[str, Any]]] = {}
        self.held: set[str] = set()
        self.undo: tuple[Any, ...] | None = None

    def campaign(self, cx: Connection, campaign_id: str) -> dict[str, Any] | None:
        if campaign_id not in self.rows:
            self.rows[campaign_id] = get_campaign_in_tx(cx, None, campaign_id)
        row = self.rows[campaign_id]
        if row is None:
            return None
        deltas, changes = self.totals.get(campaign_id, ({}, {}))
        return {**row, **{name: row[name] + delta for name, delta in deltas.items()}, **changes}

    def add(self, campaign_id: str, deltas: Mapping[str, int], changes: Mapping[str, Any]) -> None:
        moved, changed = self.totals.setdefault(campaign_id, ({}, {}))
        for name, delta in deltas.items():
            moved[name] = moved.get(name, 0) + delta
        changed.update(changes)

    def flush(self, cx: Connection, campaign_id: str) -> CampaignRow:
        """Write the campaign's moved counts now; returns its row after them."""
        deltas, changes = self.totals.pop(campaign_id, ({}, {}))
        self.rows[campaign_id] = row = progress_in_tx(cx, campaign_id, deltas, **changes)
        return row


def attempt_starts() -> None:
    """storage.delivery.record_attempts: an outcome's SAVEPOINT is taken (what attempt_rolled_back undoes)."""
    batch = getattr(_local, "batch", None)
    if batch is not None:
        batch.undo = ({**batch.rows}, {k: ({**d}, {**c}) for k, (d, c) in batch.totals.items()}, {*batch.held})


def attempt_rolled_back() -> None:
    """The outcome was rolled back to its SAVEPOINT: so are the counts it moved."""
    batch = getattr(_local, "batch", None)
    if batch is not None and batch.undo is not None:
        batch.rows, batch.totals, batch.held = batch.undo


@contextlib.contextmanager
def one_progress_event_per_campaign(cx: Connection) -> Iterator[None]:
    """For a write that changes campaigns many times (a batch of delivery outcomes): each changed campaign's
    counts are written once at the end (_OutcomeBatch) and it gets one campaign.progress event, with its
    counts as they are then."""
    _local.batch = batch = _OutcomeBatch()
    try:
        yield
        for campaign_id, (deltas, changes) in sorted(batch.totals.items()):
            progress_in_tx(cx, campaign_id, deltas, **changes)  # its event is held with the others
    finally:
        _local.batch = None
    for campaign_id in sorted(batch.held):
        progress_event_in_tx(cx, cast(CampaignRow, get_campaign_in_tx(cx, None, campaign_id)))  # changed above


# ---- creating and reading -----------------------------------------------------------------------

def get_campaign_in_tx(cx: Connection, account_id: str | None, campaign_id: str) -> CampaignRow | None:
    """The campaign row; account_id None only for internal callers that hold an id they read themselves."""
    if account_id is None:
        return cast("CampaignRow | None", fetch_one(cx, f"SELECT {_COLUMNS} FROM campaigns WHERE id = ?", (campaign_id,)))
    return cast("CampaignRow | None", fetch_one(cx, f"SELECT {_COLUMNS} FROM campaigns WHERE account_id = ? AND id = ?",
                                                (account_id, campaign_id)))


get_campaign = reads(get_campaign_in_tx)


def _require_list_in_tx(cx: Connection, account_id: str, list_id: str | None) -> None:
    """LIST_NOT_FOUND unless list_id is a list of the account; a tag campaign (list_id None) has none to check."""
    if list_id is None:
        return
    if not cx.execute("SELECT 1 FROM lists WHERE account_id = ? AND id = ? AND deleted_at IS NULL",
                      (account_id, list_id)).fetchone():
        raise list_not_found(list_id)


def _audience_detail(row: Mapping[str, Any]) -> dict[str, Any]:
    """An audit record's audience: {listId} or {tag}."""
    return {"tag": row["tag"]} if row.get("tag") else {"listId": row["list_id"]}


def _audience_source(account_id: str, list_id: str | None, tag: str | None) -> tuple[str, tuple[str | None, ...]]:
    """(FROM ... WHERE clause, args) of the contacts a campaign of this list or tag reaches, as c (the account's
    only): the one definition the snapshot and the preview's audience share."""
    if tag is not None:
        return "contacts c WHERE c.account_id = ? AND c.tags LIKE ? ESCAPE '\\'", (account_id, tag_like(tag))
    return ("list_members m JOIN contacts c ON c.id = m.contact_id AND c.account_id = ? WHERE m.list_id = ?",
            (account_id, list_id))


@writes
def create_campaign(cx: Connection, row: Mapping[str, Any], now: str, by: Mapping[str, Any] | None = None) -> CampaignRow:
    """Insert a campaign of an existing list of this account (LIST_NOT_FOUND, nothing written, when the list is
    not) or of a normalised tag (row["tag"], list_id None): a draft (row["draft"]: nothing is snapshotted or sent until start_campaign), or started at once (the
    snapshot) unless it is scheduled for later."""
    _require_list_in_tx(cx, row["account_id"], row["list_id"])
    status = "draft" if row.get("draft") else "scheduled"
    cx.execute("INSERT INTO campaigns (id, account_id, name, list_id, tag, campaign_key, body, channel,"
               " rate_per_minute, status, start_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (row["id"], row["account_id"], row["name"], row["list_id"], row.get("tag"), row["campaign_key"], row["body"],
                row["channel"], row["rate_per_minute"], status, row["start_at"], row["created_at"]))
    record_by(cx, by, account_id=row["account_id"], action="campaign.drafted" if status == "draft" else "campaign.sent",
              subject_id=row["id"], detail={"name": row["name"], **_audience_detail(row),
                                            **({} if status == "draft" else {"startAt": row["start_at"]})})
    if status == "scheduled" and row["start_at"] <= now:
        return cast(CampaignRow, start_in_tx(cx, row["id"], now))  # inserted above
    campaign = cast(CampaignRow, get_campaign_in_tx(cx, None, row["id"]))  # inserted above
    progress_event_in_tx(cx, campaign)  # a draft or scheduled one appears on open pages too
    return campaign


@writes
def start_campaign(cx: Connection, account_id: str, campaign_id: str, start_at: str | None, now: str, by: Mapping[str, Any] | None = None) -> CampaignRow:
    """A person's start of a draft or scheduled campaign: now (start_at None; the snapshot is taken in this
    transaction) or scheduled for start_at (later than now: the runner starts it then). Conflict in any other
    status; LIST_NOT_FOUND when its list was deleted meanwhile."""
    campaign = _for_change(cx, account_id, campaign_id, ("draft", "scheduled"), "started")
    _require_list_in_tx(cx, account_id, campaign["list_id"])
    when = start_at if start_at and start_at > now else now
    # Conditional, so that on PostgreSQL a runner that started it meanwhile (its row lock) is not undone.
    if not cx.execute("UPDATE campaigns SET start_at = ? WHERE id = ? AND status IN ('draft', 'scheduled')",
                      (when, campaign_id)).rowcount:
        _for_change(cx, account_id, campaign_id, ("draft", "scheduled"), "started")  # Conflict: its status now
    progress_in_tx(cx, campaign_id, status="scheduled")
    record_by(cx, by, account_id=account_id, action="campaign.sent", subject_id=campaign_id,
              detail={"name": campaign["name"], **_audience_detail(campaign), "startAt": when})
    # _for_change found it in this transaction, and the UPDATE above (or its Conflict) saw it
    if when <= now:
        return cast(CampaignRow, start_in_tx(cx, campaign_id, now))
    return cast(CampaignRow, get_campaign_in_tx(cx, None, campaign_id))


SAMPLE_SIZE = 50  # the list's first contacts a draft's preview and test send offer


@reads
def audience(cx: Connection, account_id: str, list_id: str | None, tag: str | None = None, limit: int = SAMPLE_SIZE) -> dict[str, Any]:
    """Who a campaign of this list (or, list_id None, of this normalised tag) would send to if it started now:
    {total, optedOut (skipped when their turn comes), sample: the first ``limit`` of them (contact-id order) with
    their fields}."""
    source, args = _audience_source(account_id, list_id, tag)
    total, opted_out = cx.execute(f"SELECT COUNT(*), COUNT(CASE WHEN c.opted_out != 0 THEN 1 END) FROM {source}",
                                  args).fetchone()
    sample = fetch_all(cx, "SELECT c.id, c.first_name, c.last_name, c.phone, c.email, c.opted_out"
                           f" FROM {source} ORDER BY c.id LIMIT ?", (*args, limit))
    return {"total": total, "optedOut": opted_out, "sample": sample}


def start_in_tx(cx: Connection, campaign_id: str, now: str) -> CampaignRow | None:
    """scheduled -> running: snapshot the list's members (or the account's contacts with the campaign's tag) as
    pending recipients (one statement, so the snapshot is the list or the tag as this transaction sees it).
    Contacts added to the list or tagged later are not included; opted-out ones are skipped when their turn
    comes."""
    # Claimed by a conditional UPDATE: on PostgreSQL the runner and a person's start of the same campaign wait
    # on its row, and the second finds it started (a snapshot taken twice would conflict on the recipients).
    if not cx.execute("UPDATE campaigns SET started_at = ? WHERE id = ? AND status = 'scheduled'",
                      (now, campaign_id)).rowcount:
        return get_campaign_in_tx(cx, None, campaign_id)
    campaign = cast(CampaignRow, get_campaign_in_tx(cx, None, campaign_id))  # the UPDATE above found it
    source, args = _audience_source(campaign["account_id"], campaign["list_id"], campaign["tag"])
    total = cx.execute("INSERT INTO campaign_recipients (campaign_id, contact_id, status)"
                       f" SELECT ?, c.id, 'pending' FROM {source}", (campaign_id, *args)).rowcount
    status = "running" if total else "completed"
    return progress_in_tx(cx, campaign_id, {"total": total, "pending": total}, status=status, started_at=now,
                          finished_at=None if total else now)


start = writes(start_in_tx)


@reads
def page_campaigns(cx: Connection, account_id: str, after_id: str | None, limit: int) -> list[CampaignRow]:
    """Up to ``limit`` campaigns with id > after_id, oldest first."""
    return cast("list[CampaignRow]", fetch_all(
        cx, f"SELECT {_COLUMNS} FROM campaigns WHERE account_id = ? AND id > ? ORDER BY id LIMIT ?",
        (account_id, after_id or "", limit)))


@reads
def page_campaigns_newest(cx: Connection, account_id: str, before_id: str | None, limit: int) -> list[Row]:
    """Up to ``limit`` campaigns created before the campaign before_id (None: the newest), newest first, each
    with its list's name as list_name (the UI's Campaigns page)."""
    before, args = ("AND id < ?", (before_id,)) if before_id else ("", ())
    return fetch_all(cx, f"SELECT {_COLUMNS}, (SELECT name FROM lists l WHERE l.account_id = campaigns.account_id"
                         f" AND l.id = campaigns.list_id) AS list_name FROM campaigns WHERE account_id = ? {before}"
                         " ORDER BY id DESC LIMIT ?", (account_id, *args, limit))


@reads
def due_campaigns(cx: Connection, now: str) -> list[Row]:
    """Every running campaign and every scheduled one whose start has come: (id, account_id, status,
    rate_per_minute) rows, for the runner."""
    return fetch_all(cx, "SELECT id, account_id, status, rate_per_minute FROM campaigns"
                         " WHERE status = 'running' OR (status = 'scheduled' AND start_at <= ?) ORDER BY id", (now,))


@reads
def page_recipients(cx: Connection, account_id: str, campaign_id: str, status: str | None, after_contact_id: str | None, limit: int) -> list[Row]:
    """Recipients in contact-id order (keyset), optionally of one status, with the contact's fields."""
    where, args = ["r.campaign_id = ?", "r.contact_id > ?"], [campaign_id, after_contact_id or ""]
    if status:
        where.append("r.status = ?")
        args.append(status)
    return fetch_all(cx, "SELECT r.contact_id AS id, r.message_id, r.status, r.error, c.first_name, c.last_name,"
                         " c.phone, c.email FROM campaign_recipients r JOIN contacts c ON c.id = r.contact_id"
                         f" AND c.account_id = ? WHERE {' AND '.join(where)} ORDER BY r.contact_id LIMIT ?",
                     (account_id, *args, limit), json_columns=("error",))


# ---- the runner's batches -----------------------------------------------------------------------

def next_pending_in_tx(cx: Connection, campaign: Mapping[str, Any], limit: int) -> list[Row]:
    """The next ``limit`` pending recipients after the campaign's cursor, with their contact's fields (id is
    the recipient's contact id; the fields are None, and contact_exists false, for a contact that no longer
    exists)."""
    return fetch_all(cx, "SELECT r.contact_id AS id, c.account_id, c.first_name, c.last_name, c.phone, c.email,"
                         " c.opted_out, c.created_at, c.id IS NOT NULL AS contact_exists FROM campaign_recipients r"
                         " LEFT JOIN contacts c ON c.id = r.contact_id"
                         " WHERE r.campaign_id = ? AND r.status = 'pending' AND r.contact_id > ?"
                         " ORDER BY r.contact_id LIMIT ?", (campaign["id"], campaign["cursor"], limit))


def _bounds(contact_ids: Sequence[Any]) -> tuple[Any, Any]:
    return min(contact_ids), max(contact_ids)


def record_batch_in_tx(cx: Connection, campaign: Mapping[str, Any], queued: Sequence[tuple[str, str]], skipped: Sequence[str], cursor: str, now: str) -> CampaignRow:
    """Mark recipients queued ([(contact id, message id)], their messages made in this transaction) or
    skipped ([contact id]), a statement for each kind; the campaign's counts and cursor move once for the
    batch, and it completes once none is pending. A recipient that is not pending any more fails the whole
    transaction, so a contact can never get a second message."""
    campaign_id = campaign["id"]
    changed = 0
    # One statement per kind for the whole batch (UPDATE ... FROM: SQLite 3.33+, PostgreSQL), not one per row.
    # The batch's range of contact ids bounds the search: without it PostgreSQL's planner may hash-join the
    # batch with every pending recipient of the campaign (one batch's cost then grows with the campaign).
    for values, args in values_rows(queued):
        changed += cx.execute("UPDATE campaign_recipients SET status = 'queued', message_id = v.column2"
                              f" FROM (VALUES {values}) AS v WHERE campaign_recipients.campaign_id = ?"
                              " AND campaign_recipients.contact_id BETWEEN ? AND ?"
                              " AND campaign_recipients.contact_id = v.column1 AND campaign_recipients.status = 'pending'",
                              (*args, campaign_id, *_bounds(args[::2]))).rowcount
    for values, args in values_rows((contact_id,) for contact_id in skipped):
        changed += cx.execute("UPDATE campaign_recipients SET status = 'skipped'"
                              f" FROM (VALUES {values}) AS v WHERE campaign_recipients.campaign_id = ?"
                              " AND campaign_recipients.contact_id BETWEEN ? AND ?"
                              " AND campaign_recipients.contact_id = v.column1 AND campaign_recipients.status = 'pending'",
                              (*args, campaign_id, *_bounds(args))).rowcount
    if changed != len(queued) + len(skipped):
        raise RuntimeError(f"campaign {campaign_id}: a recipient of this batch was not pending any more")
    done = len(queued) + len(skipped)
    changes = {"cursor": cursor}
    if campaign["pending"] - done <= 0:
        changes.update(status="completed", finished_at=now)
    return progress_in_tx(cx, campaign_id, {"pending": -done, "queued": len(queued), "skipped": len(skipped)},
                          **changes)


# ---- state changes ------------------------------------------------------------------------------

def _for_change(cx: Connection, account_id: str, campaign_id: str, allowed: Sequence[str], action: str) -> CampaignRow:
    campaign = get_campaign_in_tx(cx, account_id, campaign_id)
    if campaign is None:
        raise campaign_not_found(campaign_id)
    if campaign["status"] not in allowed:
        raise Conflict(f"campaign {campaign_id} is {campaign['status']}; it can be {action} only when "
                       f"{' or '.join(allowed)}", code="CONFLICT")
    return campaign


def _hold_in_tx(cx: Connection, campaign_id: str) -> None:
    """Hold the campaign's deliveries that have not gone out (queued, or failed and waiting for a retry)."""
    cx.execute("UPDATE outbox SET next_attempt_at = ? WHERE campaign_id = ? AND status = 'pending'",
               (HELD, campaign_id))


def _release_in_tx(cx: Connection, campaign: Mapping[str, Any], outbox_ids: Sequence[int], now: str) -> None:
    """Make these deliveries due again, spaced at the campaign's rate from now, in the order given."""
    start, step = parse_iso(now), 60.0 / campaign["rate_per_minute"]
    cx.executemany("UPDATE outbox SET next_attempt_at = ? WHERE id = ?",
                   ((iso(start + timedelta(seconds=i * step)), outbox_id) for i, outbox_id in enumerate(outbox_ids)))


def _pause_in_tx(cx: Connection, campaign_id: str, reason: str) -> CampaignRow:
    _hold_in_tx(cx, campaign_id)
    return progress_in_tx(cx, campaign_id, status="paused", paused_reason=reason)


@writes
def pause(cx: Connection, account_id: str, campaign_id: str, reason: str) -> CampaignRow:
    """running -> paused: no new messages, and the queued ones (and scheduled retries) are held."""
    _for_change(cx, account_id, campaign_id, ("running",), "paused")
    return _pause_in_tx(cx, campaign_id, reason)


@writes
def resume(cx: Connection, account_id: str, campaign_id: str, now: str) -> CampaignRow:
    """paused -> running (or completed, when every recipient was handed over before the pause): the held
    deliveries go out again at the campaign's rate, and the auto-pause rule starts counting afresh."""
    campaign = _for_change(cx, account_id, campaign_id, ("paused",), "resumed")
    held = [r[0] for r in cx.execute("SELECT id FROM outbox WHERE campaign_id = ? AND status = 'pending'"
                                     " AND next_attempt_at = ? ORDER BY id", (campaign_id, HELD))]
    _release_in_tx(cx, campaign, held, now)
    done = campaign["pending"] == 0
    return progress_in_tx(cx, campaign_id, status="completed" if done else "running", paused_reason=None,
                          finished_at=now if done else None, probe_attempts=0, probe_failures=0, failure_streak=0)


# ---- a delivery's outcome -----------------------------------------------------------------------

def attempt_ended_in_tx(cx: Connection, row: Mapping[str, Any], status: str, next_attempt_at: str | None, error: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """Called by storage.delivery.record_attempt, in its transaction, for an outbox row of a campaign:
    the recipient's status and error follow the attempt, the counts move with it, and the auto-pause
    rule is applied. A failed attempt with a retry scheduled leaves the recipient retrying; failed is for
    good. Returns the outbox row's (status, next_attempt_at), adjusted when the campaign is paused (a retry
    is held) or cancelled (no retry)."""
    campaign_id = row["campaign_id"]
    batch = getattr(_local, "batch", None)
    recipient = cx.execute("SELECT status FROM campaign_recipients WHERE campaign_id = ? AND message_id = ?",
                           (campaign_id, row["message_id"])).fetchone()
    campaign = get_campaign_in_tx(cx, None, campaign_id) if batch is None else batch.campaign(cx, campaign_id)
    if recipient is None or campaign is None:
        return status, next_attempt_at
    if status == "pending" and campaign["status"] == "cancelled":
        status, next_attempt_at = "failed", None  # a cancelled campaign's retries are stopped
    old = recipient[0]
    new = {"sent": "sent", "pending": "retrying"}.get(status, "failed")
    execute_later(cx, "UPDATE campaign_recipients SET status = ?, error = ? WHERE campaign_id = ? AND message_id = ?",
                  (new, json.dumps(error) if error is not None else None, campaign_id, row["message_id"]))
    deltas = {old: -1, new: 1} if old != new else {}
    changes = {}
    if row["attempts"] == 0:  # a first attempt: what the auto-pause rule looks at
        failed = new != "sent"  # the attempt failed, whether a retry follows or not
        if campaign["probe_attempts"] < PROBE_SIZE:
            changes["probe_attempts"] = campaign["probe_attempts"] + 1
            changes["probe_failures"] = campaign["probe_failures"] + failed
        changes["failure_streak"] = campaign["failure_streak"] + 1 if failed else 0
    if batch is None:
        campaign = progress_in_tx(cx, campaign_id, deltas, **changes)
    else:
        batch.add(campaign_id, deltas, changes)
        campaign = batch.campaign(cx, campaign_id)
    if campaign["status"] == "running":
        reason = auto_pause_reason(campaign, error)
        if reason:
            if batch is not None:
                batch.flush(cx, campaign_id)
            campaign = _pause_in_tx(cx, campaign_id, reason)
            if batch is not None:
                batch.rows[campaign_id] = campaign
    if status == "pending" and campaign["status"] == "paused":
        next_attempt_at = HELD
    return status, next_attempt_at


def auto_pause_reason(campaign: Mapping[str, Any], error: Mapping[str, Any] | None) -> str | None:
    """Why the campaign pauses itself now, or None (the rule is PROBE_SIZE/PROBE_FAILURES/FAILURE_STREAK)."""
    last = f" (last error: {error['error']})" if error else ""
    if campaign["probe_attempts"] == PROBE_SIZE and campaign["probe_failures"] >= PROBE_FAILURES:
        return (f"paused automatically: {campaign['probe_failures']} of the first {PROBE_SIZE} deliveries "
                f"failed{last}")
    if campaign["failure_streak"] >= FAILURE_STREAK:
        return f"paused automatically: {campaign['failure_streak']} deliveries in a row failed{last}"
    return None


def latest_campaign_key_in_tx(cx: Connection, account_id: str, contact_id: str, since: str) -> str | None:
    """The campaignId of the contact's latest campaign message made at or after ``since``, or None."""
    row = cx.execute("SELECT campaign_id, created_at FROM messages WHERE account_id = ? AND contact_id = ?"
                     " AND author = 'campaign' ORDER BY id DESC LIMIT 1", (account_id, contact_id)).fetchone()
    return row[0] if row and row[1] >= since else None


# ---- sending (services/campaign_runner.py hands a running campaign's recipients over in batches) --------------

# A running campaign stays at most a minute of its rate (and at least this many messages) ahead of its deliveries.
BACKLOG_MIN = 100


def hand_over(cx: Connection, campaign_id: str, limit: int, now: str) -> dict[str, Any]:
    """In the writer: the next ``limit`` pending recipients of a running campaign get their personalised
    message (or are skipped: opted out, or the contact is gone), in this one transaction. Returns {status,
    queued, skipped, backlogged, seconds}; backlogged when the campaign is a minute of its rate ahead of its
    deliveries; seconds: how long this kept the writer (the runner sizes its batches by it)."""
    started = time.perf_counter()
    campaign = get_campaign_in_tx(cx, None, campaign_id)
    if campaign is None or campaign["status"] != "running":
        return {"status": campaign and campaign["status"], "queued": 0, "skipped": 0, "backlogged": False,
                "seconds": 0.0}
    limit = min(limit, max(campaign["rate_per_minute"], BACKLOG_MIN) - campaign["queued"])
    if limit <= 0:
        return {"status": "running", "queued": 0, "skipped": 0, "backlogged": True, "seconds": 0.0}
    recipients = next_pending_in_tx(cx, campaign, limit)
    parts = compile_body(campaign["body"])
    account_id = campaign["account_id"]
    user_id = account_store.get_owner_user_id.sync(cx, account_id) or account_id
    # Opted out when its turn came, or (no contact left) nobody to reach: skipped, without a message.
    sending = [contact for contact in recipients if contact["contact_exists"] and not contact["opted_out"]]
    skipped = [contact["id"] for contact in recipients if not contact["contact_exists"] or contact["opted_out"]]
    messages = outbound.queue_campaign_messages_in_tx(
        cx, [(contact, render(parts, contact)) for contact in sending], account_id=account_id,
        user_id=user_id, channel=campaign["channel"], campaign_key=campaign["campaign_key"], campaign_id=campaign_id)
    queued = [(message["contact_id"], message["id"]) for message in messages]
    if not recipients and campaign["pending"] > 0:
        raise RuntimeError(f"campaign {campaign_id}: {campaign['pending']} recipients pending but none found")
    cursor = recipients[-1]["id"] if recipients else campaign["cursor"]
    campaign = record_batch_in_tx(cx, campaign, queued, skipped, cursor, now)
    # One live event for the batch's messages: open inboxes refresh, and threads of these contacts fetch theirs.
    events.emit_batches_in_tx(cx, account_id, events.MESSAGES_CREATED, {"campaignId": campaign_id}, "contactIds",
                              [contact_id for contact_id, _ in queued],
                              also=("messageIds", [message_id for _, message_id in queued]))
    return {"status": campaign["status"], "queued": len(queued), "skipped": len(skipped), "backlogged": False,
            "seconds": time.perf_counter() - started}


def send_test_in_tx(cx: Connection, account_id: str, campaign_id: str, contact_id: str,
                    by: Mapping[str, Any] | None) -> dict[str, Any]:
    """In the writer: send_test's message, its delivery and its audit record, in one transaction."""
    campaign = get_campaign_in_tx(cx, account_id, campaign_id)
    if campaign is None:
        raise campaign_not_found(campaign_id)
    contact = contact_store.get_contact.sync(cx, account_id, contact_id)
    if contact is None:
        raise NotFound(f"no contact with id {contact_id}", code="CONTACT_NOT_FOUND")
    if contact["opted_out"]:
        raise Invalid(f"contactId names contact {contact_id}, which opted out: it gets no campaign message, not "
                      "even a test", field="contactId")
    [message] = outbound.queue_campaign_messages_in_tx(
        cx, [(contact, render(compile_body(campaign["body"]), contact))], account_id=account_id, user_id=None,
        channel=campaign["channel"], campaign_key=campaign["campaign_key"], campaign_id=None, announce=True)
    record_by(cx, by, account_id=account_id, action="campaign.test_sent", subject_id=campaign_id,
              detail={"contactId": contact_id, "messageId": message["id"]})
    return message
