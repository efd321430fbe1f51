"""SQL of the Reports' summaries: fold() adds the rows stored since the watermarks into report_daily,
report_response_buckets and report_campaign_replies and moves the watermarks, in the writer's one
transaction (a crash leaves both as they were, so nothing is counted twice); summarize_* work out what a
batch of rows adds, for the fold and for the reports' reading of the not-yet-folded tail alike."""
from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from common.ids import first_id_at
from common.report_buckets import bucket_of, outcome_group
from storage.db import writes
from storage.dialect import dialect_of
from storage.interface import Connection

# A message's row for the summaries, with started_at: for a person's or the bot's reply, when the contact started
# waiting for it (the created_at of the contact's earliest message after the conversation's last outbound one
# before the reply; NULL when the reply follows an outbound message, so it is not a first response); and
# person_started_at: for a person's reply, the same with the bot's messages passed over, so that a person's first
# answer after the bot's handoff message is a person's first response (issue 43 §6). Worked out by SQLite or
# PostgreSQL in the same read (seeks in messages_account_contact), not a query per row.
_STARTED_AT = (
    "(SELECT f.created_at FROM messages f WHERE f.account_id = m.account_id AND f.contact_id = m.contact_id"
    " AND f.id < m.id AND f.direction = 'inbound' AND f.id > COALESCE((SELECT p.id FROM messages p"
    " WHERE p.account_id = m.account_id AND p.contact_id = m.contact_id AND p.id < m.id AND p.direction = 'outbound'"
    "{passed_over} ORDER BY p.id DESC LIMIT 1), '') ORDER BY f.id LIMIT 1)")
MESSAGE_SELECT = (
    "SELECT m.id, m.account_id, m.contact_id, m.direction, m.author, m.author_user_id, m.created_at, m.bot_outcome,"
    " m.bot_pending, m.campaign_id, CASE WHEN m.direction = 'outbound' AND m.author IN ('user', 'bot') THEN "
    + _STARTED_AT.format(passed_over="") + " END AS started_at,"
    " CASE WHEN m.direction = 'outbound' AND m.author = 'user' THEN "
    + _STARTED_AT.format(passed_over=" AND COALESCE(p.author, '') <> 'bot'") + " END AS person_started_at"
    " FROM messages m")
# Only these rows add more than a count to messages_in/messages_out (a bot outcome, a campaign reply, a first
# response): the tail reads them one by one and counts the rest with GROUP BY.
NEEDS_A_LOOK = "(m.bot_outcome IS NOT NULL OR m.campaign_id IS NOT NULL OR m.author IN ('user', 'bot'))"
DAILY_COLUMNS = ("messages_in", "messages_out", "bot_rule", "bot_provider", "bot_handoff", "bot_failed", "bot_other",
                 "attempts", "attempts_ok", "retries", "retries_ok")


class Summary:
    """What some rows add: daily[(account, day)][column], buckets[(account, day, responder, bucket)],
    replies[(campaign id, contact id, account)]."""

    def __init__(self) -> None:
        self.daily: collections.defaultdict[tuple[str, str], collections.Counter[str]] = \
            collections.defaultdict(collections.Counter)
        self.buckets: collections.Counter[tuple[str, str, str, int]] = collections.Counter()
        self.replies: collections.Counter[tuple[str, str, str]] = collections.Counter()


def _seconds_between(earlier: str, later: str) -> float:
    return (datetime.fromisoformat(later.replace("Z", "+00:00"))
            - datetime.fromisoformat(earlier.replace("Z", "+00:00"))).total_seconds()


def campaign_answered(cx: Connection, account_id: str, contact_id: str, inbound_id: str) -> str | None:
    """The campaign (campaigns.id) whose message to the contact an inbound message answers: the contact's
    latest campaign message before it, through its recipient row; None if there is none."""
    row = cx.execute("SELECT r.campaign_id FROM campaign_recipients r WHERE r.message_id = ("
                     "SELECT m.id FROM messages m WHERE m.account_id = ? AND m.contact_id = ? AND m.author = 'campaign'"
                     " AND m.id < ? ORDER BY m.id DESC LIMIT 1)", (account_id, contact_id, inbound_id)).fetchone()
    return row[0] if row else None


def summarize_messages(cx: Connection, rows: Iterable[Mapping[str, Any]], summary: Summary, counted: bool = False) -> Summary:
    """Add messages (dicts of MESSAGE_SELECT's columns) to summary; counted: their messages_in/messages_out are
    in summary already (count_messages)."""
    for m in rows:
        account, day = m["account_id"], m["created_at"][:10]
        daily = summary.daily[(account, day)]
        if m["direction"] == "inbound":
            daily["messages_in"] += not counted
            if m["bot_outcome"]:
                daily["bot_" + outcome_group(json.loads(m["bot_outcome"]).get("outcome"))] += 1
            if m["campaign_id"]:
                campaign = campaign_answered(cx, account, m["contact_id"], m["id"])
                if campaign:
                    summary.replies[(campaign, m["contact_id"], account)] += 1
            continue
        daily["messages_out"] += not counted
        # The bot's first responses, and people's (a person's first answer, whether or not the bot answered first).
        started = m["started_at"] if m["author"] == "bot" else m["person_started_at"]
        if started is not None:
            responder = "bot" if m["author"] == "bot" else (m["author_user_id"] or "user")
            summary.buckets[(account, day, responder,
                             bucket_of(max(_seconds_between(started, m["created_at"]), 0)))] += 1
    return summary


def account_messages(cx: Connection, select: str, account_id: str, start: str, end: str | None = None, where: str = "") -> tuple[str, list[Any]]:
    """SQL and arguments of `select` (ending in FROM messages m) over one account's messages with ids in
    [start, end) (end None: to the last): a range seek in messages_account_id (migration 0470), so a report
    reads its own account's rows past the watermark, never another's."""
    sql = f"{select}{dialect_of(cx).index_hint('messages_account_id')} WHERE m.account_id = ? AND m.id >= ?"
    args = [account_id, start]
    if end is not None:
        sql, args = sql + " AND m.id < ?", args + [end]
    return sql + (f" AND {where}" if where else ""), args


def count_messages(cx: Connection, account_id: str, start: str, end: str | None, summary: Summary) -> Summary:
    """Add messages_in/messages_out of the account's messages with ids in [start, end) to summary, counted by the
    database."""
    sql, args = account_messages(cx, "SELECT m.direction, substr(m.created_at, 1, 10), COUNT(*) FROM messages m",
                                 account_id, start, end)
    for direction, day, n in cx.execute(sql + " GROUP BY m.direction, substr(m.created_at, 1, 10)", args):
        summary.daily[(account_id, day)]["messages_in" if direction == "inbound" else "messages_out"] += n
    return summary


# A delivery attempt's row, with retry: 1 when it is not its outbox row's first attempt.
ATTEMPT_SELECT = ("SELECT a.id, a.account_id, a.at, a.error, CASE WHEN EXISTS (SELECT 1 FROM delivery_attempts e"
                  " WHERE e.outbox_id = a.outbox_id AND e.id < a.id) THEN 1 ELSE 0 END AS retry FROM delivery_attempts a")


def summarize_attempts(rows: Iterable[Mapping[str, Any]], summary: Summary) -> Summary:
    """Add delivery attempts (dicts of ATTEMPT_SELECT's columns) to summary: attempts, successes, and retries
    with their successes."""
    for a in rows:
        daily = summary.daily[(a["account_id"], a["at"][:10])]
        ok = a["error"] is None
        daily["attempts"] += 1
        daily["attempts_ok"] += ok
        if a["retry"]:
            daily["retries"] += 1
            daily["retries_ok"] += ok
    return summary


def watermarks(cx: Connection) -> dict[str, Any]:
    """{'messages': id (every message below it is folded), 'delivery_attempts': int (every attempt up to it)}."""
    marks = dict(cx.execute("SELECT name, position FROM report_watermarks").fetchall())
    return {"messages": marks.get("messages", ""), "delivery_attempts": int(marks.get("delivery_attempts", 0))}


@writes
def fold(cx: Connection, settled_at: datetime, pending_since: datetime, limit: int) -> int:
    """Fold up to ``limit`` messages and ``limit`` delivery attempts past the watermarks into the summaries
    and move the watermarks, in this one transaction. Returns how many rows it folded (fewer than 2 * limit:
    nothing more is due). A message the bot still owes a decision is folded like any other (it holds nothing
    back, issue 36 §4) and waits in report_bot_pending for its outcome, counted when it comes (within
    pending_since; a decision later than that is not counted)."""
    marks, summary = watermarks(cx), Summary()
    messages = [dict(r) for r in cx.execute(f"{MESSAGE_SELECT} WHERE m.id >= ? AND m.id < ? ORDER BY m.id LIMIT ?",
                                            (marks["messages"], first_id_at("msg", settled_at), limit))]
    summarize_messages(cx, messages, summary)
    cx.executemany("INSERT INTO report_bot_pending (message_id, account_id, day) VALUES (?, ?, ?)",
                   [(m["id"], m["account_id"], m["created_at"][:10]) for m in messages if m["bot_pending"]])
    _decided(cx, first_id_at("msg", pending_since), summary)
    settled = settled_at.strftime("%Y-%m-%dT%H:%M:%S")
    attempts = []
    for row in cx.execute(f"{ATTEMPT_SELECT} WHERE a.id > ? ORDER BY a.id LIMIT ?",
                          (marks["delivery_attempts"], limit)):
        if row["at"] >= settled:
            break  # the watermark never passes an attempt left for later
        attempts.append(dict(row))
    summarize_attempts(attempts, summary)
    _apply(cx, summary)
    if messages:
        # The next fold starts after the last one folded: ids have one length, so id + "0" sorts right after it.
        _set_mark(cx, "messages", messages[-1]["id"] + "0" if len(messages) == limit
                  else first_id_at("msg", settled_at))
    elif first_id_at("msg", settled_at) > marks["messages"]:
        _set_mark(cx, "messages", first_id_at("msg", settled_at))
    if attempts:
        _set_mark(cx, "delivery_attempts", str(attempts[-1]["id"]))
    return len(messages) + len(attempts)


# The folded messages the bot owed a decision, with their message's outcome now (NULL while it is still owed).
PENDING_SELECT = ("SELECT p.message_id, p.account_id, p.day, m.bot_outcome, m.bot_pending FROM report_bot_pending p"
                  " LEFT JOIN messages m ON m.id = p.message_id")


def _count_outcome(summary: Summary, row: Mapping[str, Any]) -> None:
    if row["bot_outcome"] and not row["bot_pending"]:
        summary.daily[(row["account_id"], row["day"])]["bot_" + outcome_group(
            json.loads(row["bot_outcome"]).get("outcome"))] += 1


def _decided(cx: Connection, pending_before: str, summary: Summary) -> None:
    """Count the outcomes decided since their message was folded and forget those messages; also forget the ones
    still owed from before pending_before, and any whose message is gone."""
    done = [dict(r) for r in cx.execute(f"{PENDING_SELECT} WHERE m.id IS NULL OR m.bot_pending IS NULL"
                                        " OR p.message_id < ?", (pending_before,))]
    for row in done:
        _count_outcome(summary, row)
    cx.executemany("DELETE FROM report_bot_pending WHERE message_id = ?", [(r["message_id"],) for r in done])


def decided_outcomes(cx: Connection, account_ids: Sequence[str], summary: Summary) -> Summary:
    """Add the outcomes decided for the accounts' folded messages that the fold has not counted yet (a report's
    tail)."""
    marks = ", ".join("?" * len(account_ids))
    for row in cx.execute(f"{PENDING_SELECT} WHERE p.account_id IN ({marks}) AND m.bot_outcome IS NOT NULL",
                          list(account_ids)):
        _count_outcome(summary, row)
    return summary


def fold_contact_in_tx(cx: Connection, account_id: str, contact_id: str, outbox_ids: Sequence[int]) -> None:
    """Before an erasure deletes the contact's messages and delivery attempts: fold those not folded yet, so that
    the counts of what happened stay (issue 43 §6); the watermarks stay where they are (the rows are gone when the
    fold gets there). Only counts are kept: a campaign reply's row is anonymised by the erasure's next steps."""
    marks, summary = watermarks(cx), Summary()
    messages = [dict(r) for r in cx.execute(
        f"{MESSAGE_SELECT} WHERE m.account_id = ? AND m.contact_id = ? AND m.id >= ? ORDER BY m.id",
        (account_id, contact_id, marks["messages"]))]
    summarize_messages(cx, messages, summary)
    pending = [dict(r) for r in cx.execute(f"{PENDING_SELECT} WHERE m.account_id = ? AND m.contact_id = ?",
                                           (account_id, contact_id))]
    for row in pending:
        _count_outcome(summary, row)
    cx.executemany("DELETE FROM report_bot_pending WHERE message_id = ?", [(r["message_id"],) for r in pending])
    for start in range(0, len(outbox_ids), 500):
        chunk = outbox_ids[start:start + 500]
        summarize_attempts([dict(r) for r in cx.execute(
            f"{ATTEMPT_SELECT} WHERE a.outbox_id IN ({', '.join('?' * len(chunk))}) AND a.id > ?",
            (*chunk, marks["delivery_attempts"]))], summary)
    _apply(cx, summary)


def _set_mark(cx: Connection, name: str, position: str | int) -> None:
    cx.execute("INSERT INTO report_watermarks (name, position) VALUES (?, ?)"
               " ON CONFLICT (name) DO UPDATE SET position = excluded.position", (name, position))


def _apply(cx: Connection, summary: Summary) -> None:
    for (account, day), counts in summary.daily.items():
        columns = [c for c in DAILY_COLUMNS if counts[c]]
        if not columns:
            continue
        cx.execute(f"INSERT INTO report_daily (account_id, day, {', '.join(columns)})"
                   f" VALUES (?, ?, {', '.join('?' * len(columns))}) ON CONFLICT (account_id, day) DO UPDATE SET "
                   + ", ".join(f"{c} = report_daily.{c} + excluded.{c}" for c in columns),
                   (account, day, *[counts[c] for c in columns]))
    cx.executemany("INSERT INTO report_response_buckets (account_id, day, responder, bucket, responses)"
                   " VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id, day, responder, bucket) DO UPDATE SET"
                   " responses = report_response_buckets.responses + excluded.responses",
                   [(*key, n) for key, n in summary.buckets.items()])
    cx.executemany("INSERT INTO report_campaign_replies (campaign_id, contact_id, account_id, replies)"
                   " VALUES (?, ?, ?, ?) ON CONFLICT (campaign_id, contact_id) DO UPDATE SET"
                   " replies = report_campaign_replies.replies + excluded.replies",
                   [(*key, n) for key, n in summary.replies.items()])
