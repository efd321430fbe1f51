"""Reports and other tenants (issue 36 §4): a report reads its own account's rows only (every statement it runs
on messages and delivery_attempts is a seek by account, checked with the database's own query plan), reads a long
tail in pieces that let other reads in, and gives the same figures whatever a fold commits meanwhile; a message
the bot still owes a decision holds no account's summaries back. Counts of what happened are kept through an
erasure, before and after the fold (issue 43 §6)."""
import asyncio
import json
from datetime import datetime, timedelta, timezone

import pytest

from services import reports
from services.reports_worker import BOT_WAIT, SETTLE, ReportsWorker
from storage import reports as store
from tests import db_direct
from tests.report_seed import Seeder, seed_history

OTHERS = 3000  # the other account's messages past the watermark


class _Recorder:
    """A connection that notes every statement run through it (and runs it)."""

    def __init__(self, cx, seen):
        self._cx, self._seen = cx, seen

    def execute(self, sql, params=()):
        self._seen.append((sql, tuple(params)))
        return self._cx.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self._cx, name)


@pytest.fixture
def recorded_reads(services, monkeypatch):
    """[(sql, params)] of every statement the server's reads run, and how many reads there were."""
    seen, calls, read = [], [0], services.db.read

    async def recording(fn, *args, **kwargs):
        calls[0] += 1
        return await read(lambda cx, *a, **k: fn(_Recorder(cx, seen), *a, **k), *args, **kwargs)
    monkeypatch.setattr(services.db, "read", recording)
    return seen, calls


@pytest.fixture
def two(make_account):
    return make_account(), make_account()


def _messages(cx, account_id, n, start, contact_name="Busy"):
    seeder = Seeder(cx, account_id, user_names=())
    contact = seeder.contact(start, contact_name)
    for k in range(n):
        seeder.message(contact, start + timedelta(milliseconds=k), "inbound", "contact")
    return contact


def _rows_read_postgres(cx, sql, params):
    """Rows the PostgreSQL plan read from messages and delivery_attempts (EXPLAIN ANALYZE: returned and filtered
    out, over every loop)."""
    plan = cx.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params).fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    total, nodes = 0, [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", ()))
        if node.get("Relation Name") in ("messages", "delivery_attempts"):
            total += (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
    return total


def _unscoped_sqlite(cx, sql, params):
    """The steps of SQLite's plan that read messages or delivery_attempts other than by account, contact's
    outbox or a single id (a scan, or a range over every account's ids)."""
    bad = []
    for row in cx.execute(f"EXPLAIN QUERY PLAN {sql}", params):
        detail = row[3]
        table = detail.split()[1] if detail.startswith(("SCAN", "SEARCH")) else ""
        if table in ("messages", "m", "f", "p", "delivery_attempts", "a", "e") and not any(
                key in detail for key in ("account_id=", "outbox_id=", "(id=?)", "(rowid=?)")):
            bad.append(detail)
    return bad


async def test_a_report_reads_its_own_accounts_rows_only(services, api, two, recorded_reads):
    mine, theirs = two
    cx = db_direct.connect(services)
    now = datetime.now(timezone.utc)
    _messages(cx, mine["account_id"], 3, now - timedelta(minutes=1), "Mine")
    _messages(cx, theirs["account_id"], OTHERS, now - timedelta(minutes=2))
    postgres = bool(db_direct.database_url(services))
    if postgres:
        cx.execute("ANALYZE")  # the statistics autovacuum keeps on a live database
    seen, _ = recorded_reads
    r = await api.get(f"/v1/reports/messages?from={now.date()}&to={now.date()}", key=mine["api_key"])
    assert r.code == 200 and r.json["rows"][0]["inbound"] == 3, r.body
    statements = [(sql, params) for sql, params in seen if "messages" in sql or "delivery_attempts" in sql]
    assert statements
    for sql, params in statements:
        if postgres:
            assert _rows_read_postgres(cx, sql, params) < 100, sql
        else:
            assert _unscoped_sqlite(cx, sql, params) == [], sql
    cx.close()


async def test_a_long_tail_is_read_in_pieces_with_the_same_figures_while_a_fold_runs(services, account,
                                                                                    recorded_reads):
    cx = db_direct.connect(services)
    first = seed_history(cx, account["account_id"], days=4, seed=3)
    ids, last = [account["account_id"]], (first + timedelta(days=3)).date()
    want = [await reports.build(services.db, ids, name, first.date(), last) for name in reports.REPORTS]
    seen, calls = recorded_reads
    data = await store.summaries(services.db, ids, first.date().isoformat(), last.isoformat(), piece=5)
    pieces = calls[0]
    assert pieces > 10  # one read per 5 messages, not one for all of them
    assert [await reports.build(services.db, ids, name, first.date(), last, data) for name in reports.REPORTS] == want
    # A fold commits between the pieces: what it folded is counted once, from the summaries.
    worker = ReportsWorker(services, batch=3)
    for _ in range(3):
        data, _ = await asyncio.gather(
            store.summaries(services.db, ids, first.date().isoformat(), last.isoformat(), piece=5),
            worker.fold_all(now=datetime.now(timezone.utc) + SETTLE))
        assert [await reports.build(services.db, ids, name, first.date(), last, data)
                for name in reports.REPORTS] == want
    cx.close()


async def test_a_pending_bot_decision_holds_no_accounts_summaries_back(services, api, two):
    waiting, busy = two
    cx = db_direct.connect(services)
    start = datetime.now(timezone.utc) - timedelta(minutes=30)
    contact = _messages(cx, waiting["account_id"], 1, start, "Waiting")
    cx.execute("UPDATE messages SET bot_pending = 1 WHERE contact_id = ?", (contact,))
    _messages(cx, busy["account_id"], 5, start + timedelta(seconds=1))
    await ReportsWorker(services).fold_all(now=start + timedelta(minutes=10))  # within BOT_WAIT of the first
    assert start + timedelta(minutes=10) - BOT_WAIT < start
    folded = dict(cx.execute("SELECT account_id, messages_in FROM report_daily").fetchall())
    assert folded == {waiting["account_id"]: 1, busy["account_id"]: 5}
    # The decision comes after its message was folded: counted at once, and once after the next fold.
    cx.execute("UPDATE messages SET bot_pending = NULL, bot_outcome = ? WHERE contact_id = ?",
               (json.dumps({"outcome": "handoff"}), contact))
    day = start.date().isoformat()
    for _ in range(2):
        r = await api.get(f"/v1/reports/bot-outcomes?from={day}&to={day}", key=waiting["api_key"])
        assert r.json["rows"][0]["handoff"] == 1, r.body
        await ReportsWorker(services).fold_all(now=start + timedelta(minutes=20))
    assert cx.execute("SELECT COUNT(*) FROM report_bot_pending").fetchone()[0] == 0
    # A decision still owed after BOT_WAIT is given up (not counted), and holds nothing either.
    other = _messages(cx, busy["account_id"], 1, start + timedelta(minutes=25), "Slow")
    cx.execute("UPDATE messages SET bot_pending = 1 WHERE contact_id = ?", (other,))
    await ReportsWorker(services).fold_all(now=start + timedelta(minutes=26) + SETTLE)
    assert cx.execute("SELECT COUNT(*) FROM report_bot_pending").fetchone()[0] == 1
    await ReportsWorker(services).fold_all(now=start + timedelta(minutes=26) + BOT_WAIT)
    assert cx.execute("SELECT COUNT(*) FROM report_bot_pending").fetchone()[0] == 0
    cx.close()


@pytest.mark.parametrize("fold_first", [False, True])
async def test_counts_are_kept_through_an_erasure_before_and_after_the_fold(services, api, account, fold_first):
    """Issue 43 §6: "messages in" read 6 where 7 were sent, after one contact was erased."""
    key, today = account["api_key"], datetime.now(timezone.utc).date().isoformat()
    for n in range(7):
        r = await api.post("/v1/incoming_custom_channel_message", {"customData": {
            "messageSid": f"sid-{n}", "fromId": f"+1555000{n % 3}", "toId": "biz", "body": "hi"}}, key=key)
        assert r.code == 200, r.body
    cx = db_direct.connect(services)
    contact_id = cx.execute("SELECT contact_id FROM messages WHERE account_id = ? ORDER BY id LIMIT 1",
                            (account["account_id"],)).fetchone()[0]  # sid-0's, the sender of 3 of the 7
    # A reply to that contact, delivered at the second attempt.
    now = datetime.now(timezone.utc)
    Seeder(cx, account["account_id"], user_names=()).message(contact_id, now - timedelta(minutes=10), "outbound",
                                                             "api", attempts=(False, True))

    async def counts():
        messages = (await api.get(f"/v1/reports/messages?from={today}&to={today}", key=key)).json["rows"][0]
        deliveries = (await api.get(f"/v1/reports/deliveries?from={today}&to={today}", key=key)).json["rows"][0]
        return messages["inbound"], messages["outbound"], deliveries["attempts"], deliveries["retriesSucceeded"]
    assert await counts() == (7, 1, 2, 1)
    later = datetime.now(timezone.utc) + SETTLE + timedelta(seconds=1)
    if fold_first:
        await ReportsWorker(services).fold_all(now=later)
    r = await api.delete(f"/v1/contacts/{contact_id}", key=key)
    assert r.code == 200 and r.json["removed"]["messages"] == 4, r.body
    assert await counts() == (7, 1, 2, 1)
    await ReportsWorker(services).fold_all(now=later)
    assert await counts() == (7, 1, 2, 1)
    cx.close()

