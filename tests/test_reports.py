"""Reports (issue 22 §2): every figure of GET /v1/reports/{name} and of the page's CSV exports equals what the
raw tables say, computed here independently (plain SQL and Python over the rows), before the fold, with part
of the data folded (summaries + tail) and with all of it folded; folding again changes nothing; tenancy and the
agency roll-up; bad ranges answer 400 naming the field."""
import csv
import html
import io
import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from common.report_buckets import bucket_of, bucket_value, outcome_group
from services.reports_worker import SETTLE, ReportsWorker
from storage import report_fold
from tests import db_direct
from tests.report_seed import Seeder, recent_on_one_day, seed_history
from tests.ui_helpers import PASSWORD, FormClient
from services import accounts, report_charts

DAYS = 6


def _raw(cx, sql, params=()):
    return [dict(r) for r in cx.execute(sql, params)]


def _nearest_rank(values, fraction):
    ordered = sorted(values)
    rank = max(1, -int(-fraction * len(ordered) // 1))
    return ordered[rank - 1]


def _seconds(a, b):
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(b) - parse(a)).total_seconds()


def expected(cx, account_ids, first, last):
    """Every report's rows from the raw tables."""
    marks = ",".join("?" * len(account_ids))
    days = [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]
    messages = _raw(cx, f"SELECT * FROM messages WHERE account_id IN ({marks}) ORDER BY id", account_ids)
    in_range = [m for m in messages if m["created_at"][:10] in days]
    out = {"messages": [{"day": d, "inbound": sum(1 for m in in_range if m["created_at"][:10] == d
                                                   and m["direction"] == "inbound"),
                         "outbound": sum(1 for m in in_range if m["created_at"][:10] == d
                                         and m["direction"] == "outbound")} for d in days]}
    bot = []
    for d in days:
        row = {"day": d, "rule": 0, "provider": 0, "handoff": 0, "failed": 0, "other": 0}
        for m in in_range:
            if m["created_at"][:10] == d and m["bot_outcome"]:
                row[outcome_group(json.loads(m["bot_outcome"])["outcome"])] += 1
        bot.append(row)
    out["bot-outcomes"] = bot
    # First responses: walk each contact's messages in order; a run of inbound messages is answered by the first
    # bot or user message after it (an api/campaign message ends the run unanswered): the bot's first responses.
    # A person's: the first user message after the run, the bot's messages passed over.
    times = {}
    by_contact = {}
    for m in messages:
        by_contact.setdefault(m["contact_id"], []).append(m)
    for thread in by_contact.values():
        waiting_since = person_waiting_since = None
        for m in thread:
            if m["direction"] == "inbound":
                waiting_since = waiting_since or m["created_at"]
                person_waiting_since = person_waiting_since or m["created_at"]
                continue
            in_days = m["created_at"][:10] in days
            if waiting_since and m["author"] == "bot" and in_days:
                times.setdefault("bot", []).append(_seconds(waiting_since, m["created_at"]))
            if person_waiting_since and m["author"] == "user" and in_days:
                times.setdefault(m["author_user_id"], []).append(_seconds(person_waiting_since, m["created_at"]))
            waiting_since = None
            if m["author"] != "bot":
                person_waiting_since = None
    people = [t for who, values in times.items() if who != "bot" for t in values]
    if people:
        times["people"] = people
    names = {r[0]: r[1] or r[2] for r in cx.execute(f"SELECT id, name, email FROM users WHERE account_id IN ({marks})",
                                                   account_ids)}
    names.update(bot="Bot", people="All people")
    rows = [{"responder": who, "name": names[who], "responses": len(values),
             "medianSeconds": bucket_value(bucket_of(_nearest_rank(values, 0.5))),
             "p90Seconds": bucket_value(bucket_of(_nearest_rank(values, 0.9)))} for who, values in times.items()]
    order = {"bot": 0, "people": 1}
    out["first-response"] = sorted(rows, key=lambda r: (order.get(r["responder"], 2), r["name"].lower()))
    attempts = _raw(cx, f"SELECT * FROM delivery_attempts WHERE account_id IN ({marks}) ORDER BY id", account_ids)
    seen, deliveries = set(), {d: {"day": d, "attempts": 0, "succeeded": 0, "failed": 0, "retries": 0,
                                   "retriesSucceeded": 0} for d in days}
    for a in attempts:
        retry = a["outbox_id"] in seen
        seen.add(a["outbox_id"])
        row = deliveries.get(a["at"][:10])
        if row:
            row["attempts"] += 1
            row["succeeded" if a["error"] is None else "failed"] += 1
            row["retries"] += retry
            row["retriesSucceeded"] += retry and a["error"] is None
    out["deliveries"] = list(deliveries.values())
    campaigns = []
    for c in _raw(cx, f"SELECT * FROM campaigns WHERE account_id IN ({marks}) ORDER BY id", account_ids):
        replies = _raw(cx, "SELECT i.contact_id FROM messages i JOIN campaign_recipients r ON r.contact_id = i.contact_id"
                           " WHERE r.campaign_id = ? AND i.direction = 'inbound' AND i.campaign_id = ?"
                           " AND i.id > r.message_id", (c["id"], c["campaign_key"]))
        campaigns.append({"campaignId": c["id"], "name": c["name"], "status": c["status"],
                          "startedAt": c["started_at"], "sent": c["sent"], "failed": c["failed"],
                          "retrying": c["retrying"], "optedOut": c["skipped"], "replies": len(replies),
                          "repliers": len({r["contact_id"] for r in replies})})
    out["campaigns"] = campaigns
    opted = _raw(cx, f"SELECT substr(opt_out_at, 1, 10) AS day FROM contacts WHERE account_id IN ({marks})"
                     " AND opted_out = 1", account_ids)
    out["opt-outs"] = [{"day": d, "optedOut": sum(1 for o in opted if o["day"] == d), "optedIn": 0} for d in days]
    return out


@pytest.fixture
def seeded(io_loop, services, make_account):
    """Two accounts with histories (the second one's must never show in the first's reports)."""
    mine, theirs = make_account(), make_account()
    cx = db_direct.connect(services)
    first = seed_history(cx, mine["account_id"], days=DAYS, seed=1)
    seed_history(cx, theirs["account_id"], days=DAYS, seed=2)
    yield {"mine": mine, "theirs": theirs, "first": first.date(), "last": (first + timedelta(days=DAYS - 1)).date(),
           "cx": cx}
    cx.close()


async def _reports(api, key, first, last, extra=""):
    got = {}
    for name in ("messages", "first-response", "bot-outcomes", "deliveries", "campaigns", "opt-outs"):
        r = await api.get(f"/v1/reports/{name}?from={first}&to={last}{extra}", key=key)
        assert r.code == 200, r.body
        assert r.json["columns"] == list(r.json["rows"][0]) if r.json["rows"] else True
        got[name] = r.json["rows"]
    return got


async def test_the_figures_match_the_raw_tables_before_during_and_after_the_fold(services, api, seeded):
    key, cx = seeded["mine"]["api_key"], seeded["cx"]
    first, last = seeded["first"], seeded["last"]
    want = expected(cx, [seeded["mine"]["account_id"]], first, last)
    assert sum(r["inbound"] for r in want["messages"]) > 20 and len(want["first-response"]) == 4
    assert any(r["retries"] for r in want["deliveries"]) and want["campaigns"][0]["replies"] == 4
    assert sum(r["optedOut"] for r in want["opt-outs"]) == 2
    assert await _reports(api, key, first, last) == want  # nothing folded: all from the tail
    worker = ReportsWorker(services, batch=7)  # small batches: many folds, each with its watermark
    middle = datetime.combine(first + timedelta(days=DAYS // 2), datetime.min.time(), timezone.utc)
    assert await worker.fold_all(now=middle + SETTLE) > 0
    assert cx.execute("SELECT COUNT(*) FROM report_daily").fetchone()[0] > 0
    assert await _reports(api, key, first, last) == want  # half folded, half tail
    await worker.fold_all(now=datetime.now(timezone.utc) + SETTLE)
    assert await worker.fold_all(now=datetime.now(timezone.utc) + SETTLE) == 0  # nothing is folded twice
    assert await _reports(api, key, first, last) == want
    # A sub-range: the days outside it are left out.
    assert (await _reports(api, key, first + timedelta(days=1), first + timedelta(days=2)))["messages"] == \
        expected(cx, [seeded["mine"]["account_id"]], first + timedelta(days=1), first + timedelta(days=2))["messages"]


async def test_a_fold_rolled_back_leaves_the_summaries_and_watermarks_as_they_were(services, api, seeded):
    """The fold and the watermark move are one transaction: a fold that does not commit (a crash) counts nothing,
    and the next one counts everything once."""
    cx = seeded["cx"]
    cx.execute("BEGIN IMMEDIATE")
    now = datetime.now(timezone.utc) + SETTLE
    assert report_fold.fold.sync(cx, now - SETTLE, now, 10_000) > 0
    cx.execute("ROLLBACK")
    assert cx.execute("SELECT COUNT(*) FROM report_daily").fetchone()[0] == 0
    assert cx.execute("SELECT COUNT(*) FROM report_watermarks").fetchone()[0] == 0
    await ReportsWorker(services).fold_all(now=now)
    first, last = seeded["first"], seeded["last"]
    assert await _reports(api, seeded["mine"]["api_key"], first, last) == \
        expected(cx, [seeded["mine"]["account_id"]], first, last)


async def test_live_messages_and_opt_changes_count_at_once(services, api, seeded):
    """Through the API today: the tail counts an inbound message before any fold; an opt-out and back in by
keyword replies count."""
    key = seeded["mine"]["api_key"]
    today = datetime.now(timezone.utc).date()
    r = await api.post("/v1/incoming_custom_channel_message", {"customData": {
        "messageSid": "sid-1", "fromId": "+15550001", "toId": "biz", "body": "hi"}}, key=key)
    assert r.code == 200, r.body
    rows = (await api.get(f"/v1/reports/messages?from={today}&to={today}", key=key)).json["rows"]
    assert rows == [{"day": today.isoformat(), "inbound": 1, "outbound": 0}]
    for n, keyword in enumerate(("STOP", "START")):  # opted out by a reply, then back in
        assert (await api.post("/v1/incoming_custom_channel_message", {"customData": {
            "messageSid": f"sid-{n + 2}", "fromId": "+15550001", "toId": "biz", "body": keyword}}, key=key)).code == 200
    rows = (await api.get(f"/v1/reports/opt-outs?from={today}&to={today}", key=key)).json["rows"]
    assert rows == [{"day": today.isoformat(), "optedOut": 1, "optedIn": 1}]


async def test_another_account_sees_only_its_own_and_an_agency_its_sub_accounts(services, api, seeded, agency, sub,
                                                                                other_sub):
    cx, first, last = seeded["cx"], seeded["first"], seeded["last"]
    theirs = await _reports(api, seeded["theirs"]["api_key"], first, last)
    assert theirs == expected(cx, [seeded["theirs"]["account_id"]], first, last)
    assert theirs != expected(cx, [seeded["mine"]["account_id"]], first, last)
    subs = [sub, await accounts.create_account(services.db, services.box, services.keys, name="Second sub",
                                               email="second@sub.example", agency_email=agency["email"],
                                               with_user=False)]
    seed_history(cx, other_sub["account_id"], days=DAYS, seed=9)  # another agency's: never in this roll-up
    for n, sub in enumerate(subs):
        seed_history(cx, sub["account_id"], days=DAYS, seed=10 + n)
    await ReportsWorker(services).fold_all(now=datetime.now(timezone.utc) + SETTLE)
    rollup = await _reports(api, agency["api_key"], first, last, "&scope=subaccounts")
    assert rollup == expected(cx, [s["account_id"] for s in subs], first, last)
    own = await _reports(api, agency["api_key"], first, last)
    assert all(r["inbound"] == 0 for r in own["messages"])  # the agency's own account has no messages
    r = await api.get("/v1/reports/messages?scope=subaccounts", key=seeded["mine"]["api_key"])
    assert r.code == 400 and "scope" in r.json["error"]["message"]
    r = await api.get("/v1/reports/messages?scope=subaccounts", key=subs[0]["api_key"])
    assert r.code == 400 and "scope" in r.json["error"]["message"]


@pytest.mark.parametrize("query, field", [("from=2026-13-01", "from"), ("to=yesterday", "to"),
                                          ("from=2026-05-02&to=2026-05-01", "from"),
                                          ("from=2024-01-01&to=2026-01-01", "from"), ("scope=all", "scope")])
async def test_a_bad_range_is_400_naming_the_field(api, account, query, field):
    r = await api.get(f"/v1/reports/messages?{query}", key=account["api_key"])
    assert r.code == 400 and r.json["error"]["message"].startswith(field), r.json


async def test_the_page_draws_every_chart_and_its_csv_has_the_api_numbers(services, api, http_server_client):
    owner = await accounts.create_account(services.db, services.box, services.keys, name="Shop",
                                          email="shop@reports.example", password=PASSWORD)
    cx = db_direct.connect(services)
    first = seed_history(cx, owner["account_id"], days=DAYS).date()
    last = first + timedelta(days=DAYS - 1)
    client = FormClient(http_server_client)
    assert (await client.login(owner["email"])).code == 303
    page = await client.get(f"/reports?from={first}&to={last}")
    assert page.code == 200 and 'href="/reports"' in page.text
    # every report's chart but Within SLA per agent's and CSAT per agent's: the seeded history has no SLA and no
    # CSAT answer, so no agent row
    assert page.text.count('<svg class="chart"') == 8 and "<script" not in page.text.split("<main")[1]
    want = expected(cx, [owner["account_id"]], first, last)
    for name, rows in want.items():
        section = page.text.split(f'id="report-{name}"')[1].split("</section>")[0].split("<tbody>")[-1]
        cells = [re.findall(r"<td>(.*?)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", section)]
        assert cells == [[html.escape(report_charts.duration(v) if k.endswith("Seconds") else "" if v is None
                                      else str(v)) for k, v in row.items()] for row in rows], name
        r = await client.get(f"/reports/{name}.csv?from={first}&to={last}")
        assert r.code == 200 and r.headers["Content-Type"].startswith("text/csv")
        got = list(csv.DictReader(io.StringIO(r.text)))
        assert got == [{k: "" if v is None else str(v) for k, v in row.items()} for row in rows]
    bad = await client.get("/reports?from=2026-02-30")
    assert bad.code == 400 and "from must be a date" in bad.text
    cx.close()


@pytest.mark.parametrize("query, field", [("from=", "from"), ("to=", "to"), ("scope=", "scope")])
async def test_an_empty_parameter_is_400_not_the_default(api, account, query, field):
    r = await api.get(f"/v1/reports/opt-outs?{query}", key=account["api_key"])
    assert r.code == 400 and r.json["error"]["message"].startswith(field), r.json


async def test_a_persons_first_response_is_its_own_figure_after_the_bots_handoff(services, api, account):
    """Issue 43 §6: the bot's handoff message answered first, and the person's reply five minutes later was no first
    response at all. Now: the bot's row, then "All people" and the person by name, each with the 5 minutes; the
    columns in words."""
    cx = db_direct.connect(services)
    seeder = Seeder(cx, account["account_id"], user_names=("ana",))
    start = recent_on_one_day(timedelta(minutes=30), timedelta(minutes=5))
    contact = seeder.contact(start, "Waiting")
    seeder.message(contact, start, "inbound", "contact", outcome="handoff")
    seeder.message(contact, start + timedelta(seconds=1), "outbound", "bot")
    seeder.message(contact, start + timedelta(minutes=5), "outbound", "user", user_id=seeder.users[0])
    day = start.date().isoformat()
    minutes_5 = bucket_value(bucket_of(300))
    want = [{"responder": "bot", "name": "Bot", "responses": 1, "medianSeconds": bucket_value(bucket_of(1)),
             "p90Seconds": bucket_value(bucket_of(1))},
            {"responder": "people", "name": "All people", "responses": 1, "medianSeconds": minutes_5,
             "p90Seconds": minutes_5},
            {"responder": seeder.users[0], "name": "Ana Silva", "responses": 1, "medianSeconds": minutes_5,
             "p90Seconds": minutes_5}]
    for _ in range(2):  # from the tail, then from the summaries
        r = await api.get(f"/v1/reports/first-response?from={day}&to={day}", key=account["api_key"])
        assert r.json["rows"] == want, r.body
        assert r.json["labels"] == ["Responder id", "Responder", "First responses", "Median time", "9 in 10 within"]
        await ReportsWorker(services).fold_all(now=datetime.now(timezone.utc) + SETTLE)
    cx.close()
