"""Reports at 1 M messages (issue 22 §2): the Reports page and GET /v1/reports/{name} p50/p99 over 90 days.

One million messages (20,000 contacts x 50 over 90 days: contacts writing, the bot and people answering, bot
outcomes on the inbound ones) and 200,000 webhooks with their attempts (a fifth retried) are written straight
into a copy of the schema with executemany. The fold (storage/report_fold.py, as the reports worker runs it)
is timed over all of it offline; then 3,000 messages of the last seconds are added (the tail a report reads
raw), the server starts, and the page (signed in) and each report's API are fetched one after another.
"""
import json
import sqlite3
import statistics
import time
from datetime import datetime, timedelta, timezone

from common.ids import first_id_at, iso
from storage.search import index_pending

NAME = "reports"
TITLE = "Reports at 1 M messages"
P99_GOAL_MS = 500
CONTACTS, PER_CONTACT, DAYS, TAIL = 20_000, 50, 90, 3_000
REPORTS = ("messages", "first-response", "bot-outcomes", "deliveries", "campaigns", "opt-outs")
OUTCOMES = ("rule", "provider", "handoff", "provider_failed", "paused", "greeting")
# One contact's cycle: (direction, author) by message number % 5.
CYCLE = (("inbound", "contact"), ("outbound", "bot"), ("inbound", "contact"), ("inbound", "contact"),
         ("outbound", "user"))


def _id(prefix, at, n):
    return first_id_at(prefix, at)[:-16] + f"{n:016d}"


def seed(db_path, account_id, user_id, now):
    """The messages, contacts and webhooks; returns counts. Written a time slice at a time in id order (the
    primary key's pages fill in order), with a large page cache for the other indexes."""
    cx = sqlite3.connect(str(db_path), isolation_level=None)
    cx.execute("PRAGMA synchronous=OFF")
    cx.execute("PRAGMA cache_size=-400000")
    cx.execute("BEGIN")
    start = now - timedelta(days=DAYS)
    step = timedelta(days=DAYS - 1) / PER_CONTACT
    contact_ids = [_id("ct", start, c) for c in range(CONTACTS)]
    cx.executemany("INSERT INTO contacts (id, account_id, first_name, created_at) VALUES (?, ?, ?, ?)",
                   [(contact_id, account_id, f"Contact {c}", iso(start)) for c, contact_id in enumerate(contact_ids)])
    outbox_id = 0
    for k in range(PER_CONTACT):  # one time slice: every contact's k-th message, within the same hour or so
        direction, author = CYCLE[k % 5]
        messages, outbox, attempts = [], [], []
        for c, contact_id in enumerate(contact_ids):
            at = start + k * step + timedelta(seconds=(c * 37) % 3600 + (k % 5) * 90)
            message_id = _id("msg", at, c * PER_CONTACT + k)
            outcome = json.dumps({"outcome": OUTCOMES[(c + k) % len(OUTCOMES)]}) if k % 5 == 0 else None
            messages.append((message_id, account_id, contact_id, direction, "received" if direction == "inbound"
                             else "Sent", "hello", author, user_id if author == "user" else None, outcome, iso(at)))
            if direction == "outbound" and (c + k) % 2 == 0:
                outbox_id += 1
                outbox.append((outbox_id, account_id, message_id, f"wh_{outbox_id}", iso(at)))
                if outbox_id % 5 == 0:
                    attempts.append((outbox_id, account_id, iso(at), "HTTP 503"))
                attempts.append((outbox_id, account_id, iso(at + timedelta(minutes=1)), None))
        messages.sort()
        _flush(cx, messages, outbox, attempts)
    # A server ran on this data directory before (its fold moved the watermarks past these backdated rows):
    # the summaries start over.
    for table in ("report_daily", "report_response_buckets", "report_campaign_replies", "report_watermarks"):
        cx.execute(f"DELETE FROM {table}")
    cx.execute("COMMIT")
    counts = {"messages": cx.execute("SELECT COUNT(*) FROM messages").fetchone()[0],
              "delivery_attempts": cx.execute("SELECT COUNT(*) FROM delivery_attempts").fetchone()[0]}
    cx.close()
    return counts


def _flush(cx, messages, outbox, attempts):
    cx.executemany("INSERT INTO messages (id, account_id, contact_id, direction, status, body, author, author_user_id,"
                   " bot_outcome, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", messages)
    cx.executemany("INSERT INTO outbox (id, account_id, kind, message_id, webhook_id, payload, status, attempts,"
                   " next_attempt_at, created_at) VALUES (?, ?, 'reply', ?, ?, '{}', 'sent', 1, ?, ?)",
                   [(*o, o[-1]) for o in outbox])
    cx.executemany("INSERT INTO delivery_attempts (outbox_id, account_id, at, http_status, error, duration_ms)"
                   " VALUES (?, ?, ?, 200, ?, 20)", attempts)
    index_pending(cx, len(messages))  # the search index, as the server's writer would have written it


def fold_everything(db_path, now):
    """The reports worker's fold over the whole history, batch by batch as the server runs it; (seconds, rows)."""
    from services.reports_worker import BATCH, BOT_WAIT, SETTLE
    from storage.db import connect_sync
    from storage.report_fold import fold
    cx = connect_sync(db_path)
    started, total = time.monotonic(), 0
    while True:
        cx.execute("BEGIN IMMEDIATE")
        folded = fold.sync(cx, now - SETTLE, now - BOT_WAIT, BATCH)
        cx.execute("COMMIT")
        total += folded
        if folded < BATCH:
            break
    cx.close()
    return time.monotonic() - started, total


def add_tail(db_path, account_id, now):
    """TAIL messages of the last seconds: not folded yet when the reports are read."""
    cx = sqlite3.connect(str(db_path), isolation_level=None)
    contact_id = _id("ct", now, 0)
    cx.execute("BEGIN")
    cx.execute("INSERT INTO contacts (id, account_id, first_name, created_at) VALUES (?, ?, 'Tail', ?)",
               (contact_id, account_id, iso(now)))
    cx.executemany("INSERT INTO messages (id, account_id, contact_id, direction, status, body, author, created_at)"
                   " VALUES (?, ?, ?, 'inbound', 'received', 'hi', 'contact', ?)",
                   [(_id("msg", now + timedelta(milliseconds=i), i), account_id, contact_id,
                     iso(now + timedelta(milliseconds=i))) for i in range(TAIL)])
    index_pending(cx, TAIL)
    cx.execute("COMMIT")
    cx.close()


def _timed(client, path, n):
    times = []
    for _ in range(n):
        started = time.perf_counter()
        r = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        r.raise_for_status()
    times.sort()
    return {"n": n, "p50_ms": round(statistics.median(times), 1),
            "p99_ms": round(times[min(n - 1, int(n * 0.99))], 1), "max_ms": round(times[-1], 1)}


def run(ctx):
    now = datetime.now(timezone.utc)
    data = ctx.fresh_data_dir("reports")
    db_path = data / "parley.db"
    account_id = ctx.first_run["account_id"]
    user_id = sqlite3.connect(str(db_path)).execute("SELECT id FROM users WHERE account_id = ?",
                                                    (account_id,)).fetchone()[0]
    started = time.monotonic()
    counts = seed(db_path, account_id, user_id, now - timedelta(minutes=5))
    result = {**counts, "seed_seconds": round(time.monotonic() - started, 1)}
    ctx.log(f"  seeded {counts['messages']:,} messages in {result['seed_seconds']} s; folding")
    seconds, rows = fold_everything(db_path, now)
    result.update(fold_seconds=round(seconds, 1), folded_rows=rows, fold_rows_per_second=round(rows / seconds))
    add_tail(db_path, account_id, datetime.now(timezone.utc))
    result["db_mb"] = round(db_path.stat().st_size / 1e6)
    ctx.wait_for_quiet()
    parley = ctx.start_parley(data)
    try:
        first, last = (now - timedelta(days=DAYS - 1)).date(), now.date()
        query = f"from={first}&to={last}"
        with parley.client() as client:
            client.get("/login")
            r = client.post("/login", data={"email": ctx.first_run["login"], "password": ctx.first_run["password"],
                                             "_xsrf": client.cookies.get("_xsrf")})
            assert r.status_code == 303, r.text
            n = 10 if ctx.args.quick else 40
            _timed(client, f"/reports?{query}", 3)  # warm the page cache
            result["page"] = _timed(client, f"/reports?{query}", n)
            key = ctx.first_run["api_key"]
            result["api"] = {name: _timed(client, f"/v1/reports/{name}?{query}&apiKey={key}", n) for name in REPORTS}
            page = client.get(f"/reports?{query}").text
            result["page_charts"] = page.count('<svg class="chart"')  # 5: no campaign in this data
    finally:
        parley.stop()
    return result


def render(r):
    api_p99 = max(v["p99_ms"] for v in r["api"].values())
    return [f"{r['messages']:,} messages and {r['delivery_attempts']:,} delivery attempts (seeded in "
            f"{r['seed_seconds']} s, database {r['db_mb']} MB); the fold over all of it: {r['fold_seconds']} s "
            f"({r['fold_rows_per_second']:,} rows/s); {TAIL:,} messages left unfolded (the tail).",
            "",
            "| 90 days | p50 ms | p99 ms | max ms |", "|---|---|---|---|",
            f"| Reports page (6 charts) | {r['page']['p50_ms']} | {r['page']['p99_ms']} | {r['page']['max_ms']} |",
            *[f"| GET /v1/reports/{name} | {v['p50_ms']} | {v['p99_ms']} | {v['max_ms']} |"
              for name, v in r["api"].items()],
            "", f"Goal: p99 under {P99_GOAL_MS} ms (page {r['page']['p99_ms']} ms, API at most {api_p99} ms)."]


def goals(r):
    from bench.report import goal
    api_p99 = max(v["p99_ms"] for v in r["api"].values())
    return [goal("Reports page p99 at 1 M messages (ms)", r["page"]["p99_ms"], P99_GOAL_MS,
                 r["page"]["p99_ms"] < P99_GOAL_MS),
            goal("GET /v1/reports p99 at 1 M messages (ms)", api_p99, P99_GOAL_MS, api_p99 < P99_GOAL_MS)]
