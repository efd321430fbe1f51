"""SQL for reading the Reports (services/reports.py): the folded summaries plus the tail of rows not folded
yet (storage/report_fold.py works out what those add), read in one transaction so that a fold committing
meanwhile is seen either wholly or not at all."""
import collections

from storage.db import reads
from storage.users import label_sql
from storage.report_fold import (ATTEMPT_SELECT, DAILY_COLUMNS, MESSAGE_SELECT, NEEDS_A_LOOK, Summary,
                                 count_messages, summarize_attempts, summarize_messages, watermarks)


def _in(values):
    return ", ".join("?" * len(values))


@reads
def account_ids_of_agency(cx, agency_id):
    """The agency's sub-accounts (the roll-up's accounts), in id order."""
    return [r[0] for r in cx.execute("SELECT id FROM accounts WHERE parent_agency_id = ? AND type = 'subaccount'"
                                     " ORDER BY id", (agency_id,))]


@reads
def summaries(cx, account_ids, first_day, last_day):
    """For these accounts and days (inclusive, YYYY-MM-DD): {"daily": {day: Counter of DAILY_COLUMNS},
    "responses": {responder: {bucket: count}}, "replies": {campaign id: [repliers, replies]} (all days:
    a campaign's replies are its own total), "users": {user id: (email, the account an agency user viewed or None)}}."""
    if not account_ids:
        return {"daily": {}, "responses": {}, "replies": {}, "users": {}}
    cx.execute("BEGIN")
    try:
        daily = collections.defaultdict(collections.Counter)
        sums = ", ".join(f"SUM({c})" for c in DAILY_COLUMNS)
        for row in cx.execute(f"SELECT day, {sums} FROM report_daily WHERE account_id IN ({_in(account_ids)})"
                              " AND day >= ? AND day <= ? GROUP BY day", (*account_ids, first_day, last_day)):
            daily[row[0]].update(dict(zip(DAILY_COLUMNS, row[1:])))
        responses = collections.defaultdict(collections.Counter)
        for responder, bucket, n in cx.execute(
                "SELECT responder, bucket, SUM(responses) FROM report_response_buckets"
                f" WHERE account_id IN ({_in(account_ids)}) AND day >= ? AND day <= ? GROUP BY responder, bucket",
                (*account_ids, first_day, last_day)):
            responses[responder][bucket] += n
        replies = {r[0]: [r[1], r[2]] for r in cx.execute(
            "SELECT campaign_id, COUNT(*), SUM(replies) FROM report_campaign_replies"
            f" WHERE account_id IN ({_in(account_ids)}) GROUP BY campaign_id", account_ids)}
        tail = _tail(cx, account_ids)
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
            users = {row[0]: (row[1], None if row[2] in account_ids else viewed) for row in cx.execute(
                f"SELECT id, {label_sql('users')}, account_id FROM users WHERE id IN ({_in(responders)})", responders)}
    finally:
        cx.execute("COMMIT")
    for (_, day), counts in tail.daily.items():
        if first_day <= day <= last_day:
            daily[day].update(counts)
    for (_, day, responder, bucket), n in tail.buckets.items():
        if first_day <= day <= last_day:
            responses[responder][bucket] += n
    return {"daily": daily, "responses": responses, "replies": replies, "users": users}


def _tail(cx, account_ids):
    """What the rows past the watermarks add (the last minutes' messages and attempts): the database counts the
    messages; only those that add more than a count (NEEDS_A_LOOK) are read one by one."""
    # Only the primary keys' ranges: an account_id condition would let the planner walk the account's whole
    # index instead (every message it ever had); the tail of all accounts is small, the filter is here.
    marks, summary, wanted = watermarks(cx), Summary(), set(account_ids)
    count_messages(cx, marks["messages"], wanted, summary)
    messages = [dict(r) for r in cx.execute(f"{MESSAGE_SELECT} WHERE m.id >= ? AND {NEEDS_A_LOOK}",
                                            (marks["messages"],)) if r["account_id"] in wanted]
    summarize_messages(cx, messages, summary, counted=True)
    attempts = [dict(r) for r in cx.execute(f"{ATTEMPT_SELECT} WHERE a.id > ?", (marks["delivery_attempts"],))
                if r["account_id"] in wanted]
    return summarize_attempts(attempts, summary)


@reads
def campaigns(cx, account_ids, start, end):
    """The accounts' campaigns that ran (or were created) between start and end (ISO times), oldest first."""
    if not account_ids:
        return []
    return [dict(r) for r in cx.execute(
        "SELECT id, account_id, name, status, created_at, started_at, finished_at, sent, failed, retrying, skipped"
        f" FROM campaigns WHERE account_id IN ({_in(account_ids)}) AND COALESCE(started_at, created_at) < ?"
        " AND (finished_at IS NULL OR finished_at >= ?) ORDER BY id", (*account_ids, end, start))]


@reads
def opt_out_changes(cx, account_ids, start, end):
    """{day: [opted out, opted back in]} of the accounts' opt-out changes between start and end (ISO times)."""
    days = collections.defaultdict(lambda: [0, 0])
    if account_ids:
        for day, opted_out, n in cx.execute(
                "SELECT substr(at, 1, 10), opted_out, COUNT(*) FROM opt_out_changes"
                f" WHERE account_id IN ({_in(account_ids)}) AND at >= ? AND at < ?"
                " GROUP BY substr(at, 1, 10), opted_out", (*account_ids, start, end)):
            days[day][0 if opted_out else 1] += n
    return days
