"""SQL for reading the Reports (services/reports.py): the folded summaries plus the tail of rows not folded
yet (storage/report_fold.py works out what those add). The summaries, the watermarks and the tail's end are read
in one transaction, so that a fold committing meanwhile is seen either wholly or not at all; a long tail is read
before that in pieces (summaries()). Every read is of the report's own accounts' rows."""
from __future__ import annotations

import asyncio
import collections
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from storage.db import reads
from storage.dialect import dialect_of
from storage.interface import Connection, Row, Store
from storage.report_fold import (ATTEMPT_SELECT, DAILY_COLUMNS, MESSAGE_SELECT, NEEDS_A_LOOK, Summary, account_messages,
                                 count_messages, decided_outcomes, summarize_attempts, summarize_messages, watermarks)
from storage.users import label_sql


def _in(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


@reads
def account_ids_of_agency(cx: Connection, agency_id: str) -> list[str]:
    """The agency's sub-accounts (the roll-up's accounts), in id order."""
    return [r[0] for r in cx.execute("SELECT id FROM accounts WHERE parent_agency_id = ? AND type = 'subaccount'"
                                     " ORDER BY id", (agency_id,))]


# Rows of one account's unfolded messages a read takes on at most before it lets other reads in (SQLite has one
# read connection: a report of an account with 100,000 unfolded messages must not hold it for a second).
TAIL_PIECE = 500
# One long tail read in pieces at a time (per event loop, so per process): another request's read then waits
# behind one piece at most, however many reports of long tails run at once.
_piece_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def _one_piece_at_a_time() -> asyncio.Lock:
    return _piece_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())


async def summaries(db: Store, account_ids: Sequence[str], first_day: str, last_day: str, piece: int = TAIL_PIECE) -> dict[str, Any]:
    """For these accounts and days (inclusive, YYYY-MM-DD): {"daily": {day: Counter of DAILY_COLUMNS},
    "responses": {responder: {bucket: count}}, "replies": {campaign id: [repliers, replies]} (all days:
    a campaign's replies are its own total), "users": {user id: (name or email, the account an agency user
    viewed or None)}}.

    The summaries plus the tail (the accounts' rows past the watermarks). A long tail is read first in pieces of
    `piece` rows, each its own read; the last read takes the summaries, the watermark and the rest of the tail
    in one transaction, and drops the pieces a fold committed meanwhile has counted (re-reading the part of a
    piece the watermark moved into)."""
    if not account_ids:
        return {"daily": {}, "responses": {}, "replies": {}, "users": {}}
    mark = (await _marks(db))["messages"]
    pieces: dict[str, list[tuple[str, str, Summary]]] = {}
    for account_id in account_ids:
        pieces[account_id], start = [], mark
        while True:
            async with _one_piece_at_a_time():
                got = await _tail_piece(db, account_id, start, piece)
            if got is None:
                break
            pieces[account_id].append(got)
            start = got[1]
    return await _summaries_and_tail(db, account_ids, first_day, last_day, pieces)


@reads
def _marks(cx: Connection) -> dict[str, Any]:
    return watermarks(cx)


@reads
def _tail_piece(cx: Connection, account_id: str, start: str, size: int) -> tuple[str, str, Summary] | None:
    """(start, end, Summary) of the account's `size` messages from id start on, or None when fewer are left (the
    last read takes those)."""
    sql, args = account_messages(cx, "SELECT m.id FROM messages m", account_id, start)
    row = cx.execute(f"{sql} ORDER BY m.id LIMIT 1 OFFSET ?", (*args, size)).fetchone()
    if row is None:
        return None
    return start, row[0], _messages_summary(cx, account_id, start, row[0], Summary())


def _messages_summary(cx: Connection, account_id: str, start: str, end: str | None, summary: Summary) -> Summary:
    """What the account's messages with ids in [start, end) add: the database counts them; only those that add
    more than a count (NEEDS_A_LOOK) are read one by one."""
    if end is not None and end <= start:
        return summary
    count_messages(cx, account_id, start, end, summary)
    sql, args = account_messages(cx, MESSAGE_SELECT, account_id, start, end, NEEDS_A_LOOK)
    return summarize_messages(cx, [dict(r) for r in cx.execute(sql, args)], summary, counted=True)


@reads
def _summaries_and_tail(cx: Connection, account_ids: Sequence[str], first_day: str, last_day: str, pieces: Mapping[str, Sequence[tuple[str, str, Summary]]]) -> dict[str, Any]:
    # One snapshot: a fold committing between the watermark's read and the summaries' would be counted twice.
    cx.execute(dialect_of(cx).begin_snapshot)
    try:
        marks = watermarks(cx)
        daily: collections.defaultdict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        sums = ", ".join(f"SUM({c})" for c in DAILY_COLUMNS)
        for row in cx.execute(f"SELECT day, {sums} FROM report_daily WHERE account_id IN ({_in(account_ids)})"
                              " AND day >= ? AND day <= ? GROUP BY day", (*account_ids, first_day, last_day)):
            daily[row[0]].update(dict(zip(DAILY_COLUMNS, row[1:])))
        responses: collections.defaultdict[str, collections.Counter[int]] = \
            collections.defaultdict(collections.Counter)
        for responder, bucket, n in cx.execute(
                "SELECT responder, bucket, SUM(responses) FROM report_response_buckets"
                f" WHERE account_id IN ({_in(account_ids)}) AND day >= ? AND day <= ? GROUP BY responder, bucket",
                (*account_ids, first_day, last_day)):
            responses[responder][bucket] += n
        replies = {r[0]: [r[1], r[2]] for r in cx.execute(
            "SELECT campaign_id, COUNT(*), SUM(replies) FROM report_campaign_replies"
            f" WHERE account_id IN ({_in(account_ids)}) GROUP BY campaign_id", account_ids)}
        tail = _tail(cx, account_ids, marks, pieces)
        for (campaign, contact, _), n in tail.replies.items():
            # A contact already counted among the folded repliers is not a new replier (the fold's upsert).
            known = cx.execute("SELECT 1 FROM report_campaign_replies WHERE campaign_id = ? AND contact_id = ?",
                               (campaign, contact)).fetchone()
            entry = replies.setdefault(campaign, [0, 0])
            entry[0] += 0 if known else 1
            entry[1] += n
        # The responders: the accounts' users, and agency users who answered viewing one of them (with the
        # account they viewed: the one of the report, or of several "a sub-account").
        responders = sorted(({*responses} | {key[2] for key in tail.buckets}) - {"bot", "user"})
        users = {}
        if responders:
            viewed = (cx.execute("SELECT name FROM accounts WHERE id = ?", account_ids[:1]).fetchone()[0]
                      if len(account_ids) == 1 else "a sub-account")
            users = {row[0]: (row[1] or row[2], None if row[3] in account_ids else viewed) for row in cx.execute(
                f"SELECT id, name, {label_sql('users')}, account_id FROM users WHERE id IN ({_in(responders)})",
                responders)}
    finally:
        cx.execute("COMMIT")
    for (_, day), counts in tail.daily.items():
        if first_day <= day <= last_day:
            daily[day].update(counts)
    for (_, day, responder, bucket), n in tail.buckets.items():
        if first_day <= day <= last_day:
            responses[responder][bucket] += n
    return {"daily": daily, "responses": responses, "replies": replies, "users": users}


def _tail(cx: Connection, account_ids: Sequence[str], marks: Mapping[str, Any], pieces: Mapping[str, Sequence[tuple[str, str, Summary]]]) -> Summary:
    """What the accounts' rows past the watermarks add: the pieces read before (those still past the watermark),
    and the rest read here, account by account (messages_account_id, delivery_attempts_account_id: never another
    account's rows)."""
    summary = Summary()
    for account_id in account_ids:
        kept = [p for p in pieces.get(account_id, ()) if p[0] >= marks["messages"]]
        for _, _, part in kept:
            _add(summary, part)
        # Not in a kept piece: from the watermark to the first kept piece, and after the last piece.
        _messages_summary(cx, account_id, marks["messages"], kept[0][0] if kept else None, summary)
        if kept:
            _messages_summary(cx, account_id, kept[-1][1], None, summary)
        attempts = [dict(r) for r in cx.execute(
            f"{ATTEMPT_SELECT}{dialect_of(cx).index_hint('delivery_attempts_account_id')}"
            " WHERE a.account_id = ? AND a.id > ?", (account_id, marks["delivery_attempts"]))]
        summarize_attempts(attempts, summary)
    return decided_outcomes(cx, account_ids, summary)


def _add(summary: Summary, part: Summary) -> None:
    for key, counts in part.daily.items():
        summary.daily[key].update(counts)
    summary.buckets.update(part.buckets)
    summary.replies.update(part.replies)


@reads
def campaigns(cx: Connection, account_ids: Sequence[str], start: str, end: str) -> list[Row]:
    """The accounts' campaigns that ran (or were created) between start and end (ISO times), oldest first."""
    if not account_ids:
        return []
    return [dict(r) for r in cx.execute(
        "SELECT id, account_id, name, status, created_at, started_at, finished_at, sent, failed, retrying, skipped"
        f" FROM campaigns WHERE account_id IN ({_in(account_ids)}) AND COALESCE(started_at, created_at) < ?"
        " AND (finished_at IS NULL OR finished_at >= ?) ORDER BY id", (*account_ids, end, start))]


@reads
def opt_out_changes(cx: Connection, account_ids: Sequence[str], start: str, end: str) -> dict[str, list[int]]:
    """{day: [opted out, opted back in]} of the accounts' opt-out changes between start and end (ISO times)."""
    days: collections.defaultdict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    if account_ids:
        for day, opted_out, n in cx.execute(
                "SELECT substr(at, 1, 10), opted_out, COUNT(*) FROM opt_out_changes"
                f" WHERE account_id IN ({_in(account_ids)}) AND at >= ? AND at < ?"
                " GROUP BY substr(at, 1, 10), opted_out", (*account_ids, start, end)):
            days[day][0 if opted_out else 1] += n
    return days
