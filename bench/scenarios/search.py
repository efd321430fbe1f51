"""Search over message text (issue 41): GET /v1/search p50/p99 over many messages, on SQLite and PostgreSQL.

MESSAGES messages (PARLEY_BENCH_SEARCH_MESSAGES, default 1,000,000; 100,000 with --quick) of 10,000 contacts are
written straight into each server's database (bench tooling, as the reports scenario does): English sentences
from a small vocabulary, one message in 50 with a phone number written in one of four spellings, one in 20 in
Japanese. On SQLite each chunk is indexed in its transaction, as the writer does (the seed's time includes the index); on PostgreSQL
the trigram indexes are dropped for the seed and built again after it (CREATE INDEX, timed). Then each query is
asked N times over HTTPS, one after another: a common word, a rare word, a prefix, a phone number in another
spelling than stored, 3 and 2 characters of Japanese.
"""
import os
import random
import statistics
import time
from datetime import datetime, timedelta, timezone

from common.ids import first_id_at, iso, new_id
from storage.search import index_pending

NAME = "search"
TITLE = "Search over message text"
P99_GOAL_MS = 100
CONTACTS = 10_000
WORDS = ("hello order delivery refund please thanks invoice account payment question package tomorrow "
         "address change cancel booking price discount weekend morning evening return size colour help").split()
RARE = "kilimanjaro"  # one message in 10,000
JAPANESE = ("東京駅で待っています", "明日の予約を変更したいです", "配送はいつになりますか", "ありがとうございました")
SPELLINGS = ("+1 (415) 555-{:04d}", "415-555-{:04d}", "415.555.{:04d}", "4155550{:03d}")
# The phone is stored as "4155550103" (n % 50 == 3 and n % 1000 == 103 always picks SPELLINGS[3]: 1 in 1,000
# messages) and asked in another spelling; a number never stored would measure an empty answer.
QUERIES = {"word": "refund", "rare word": RARE, "prefix": "deliv", "phone": "(415) 555-0103",
           "CJK, 3 characters": "東京駅", "CJK, 2 characters": "予約"}
# A small account beside the big one (SMALL messages of its own, none with the word) asks for the big one's common
# word: the search must not walk the other account's matches (SQLite: the index's account column, migration 0706).
SMALL = 100
BESIDE = "small account beside, the big one's word"


def messages_count(ctx):
    default = 100_000 if ctx.args.quick else 1_000_000
    return int(os.environ.get("PARLEY_BENCH_SEARCH_MESSAGES", default))


def _body(n, rng):
    if n % 20 == 7:
        return rng.choice(JAPANESE)
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 16)))
    if n % 50 == 3:
        words += " call me on " + SPELLINGS[n % 4].format(n % 1000 if n % 4 == 3 else n % 10_000)
    if n % 10_000 == 5:
        words += " " + RARE
    return words.capitalize()


def seed(cx, account_id, count, postgres):
    """The contacts and count messages, in id order, in batches of 10,000."""
    rng = random.Random(41)
    start = datetime.now(timezone.utc) - timedelta(days=365)
    contact_ids = [first_id_at("ct", start)[:-16] + f"{c:016d}" for c in range(CONTACTS)]
    cx.execute("BEGIN")
    cx.executemany("INSERT INTO contacts (id, account_id, first_name, created_at) VALUES (?, ?, ?, ?)",
                   [(c, account_id, "Search", iso(start)) for c in contact_ids])
    cx.execute("COMMIT")
    if postgres:
        cx.execute("DROP INDEX messages_body_trgm")
        cx.execute("DROP INDEX messages_digits_trgm")
    step = timedelta(days=365) / count
    for first in range(0, count, 10_000):
        rows = []
        for n in range(first, min(count, first + 10_000)):
            at = start + n * step
            rows.append((first_id_at("msg", at)[:-16] + f"{n:016d}", account_id, contact_ids[n % CONTACTS],
                         "inbound" if n % 3 else "outbound", "received" if n % 3 else "Sent", _body(n, rng), iso(at)))
        cx.execute("BEGIN")
        cx.executemany("INSERT INTO messages (id, account_id, contact_id, direction, status, body, created_at)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        if not postgres:
            index_pending(cx, len(rows))  # what the server's writer does between its batches
        cx.execute("COMMIT")
    if postgres:  # the migration's indexes (0600_message_search.postgresql.sql)
        started = time.monotonic()
        cx.execute("CREATE INDEX messages_body_trgm ON messages USING gin (body gin_trgm_ops)")
        cx.execute("CREATE INDEX messages_digits_trgm ON messages USING gin (translate(body, ' ()+-./', '')"
                   " gin_trgm_ops) WHERE body ~ '[0-9]'")
        cx.execute("ANALYZE messages")
        return round(time.monotonic() - started, 1)
    return None


def _timed(client, path, n):
    times, found = [], None
    for _ in range(n):
        started = time.perf_counter()
        r = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        r.raise_for_status()
        found = len(r.json()["data"])
    times.sort()
    return {"n": n, "found": found, "p50_ms": round(statistics.median(times), 1),
            "p99_ms": round(times[min(n - 1, int(n * 0.99))], 1), "max_ms": round(times[-1], 1)}


def _measure(ctx, label, parley, url, count):
    from urllib.parse import quote

    from bench.scenarios.postgres import _connect
    cx = _connect(parley, url)
    started = time.monotonic()
    try:
        index_seconds = seed(cx, parley.first_run["account_id"], count, bool(url))
    finally:
        cx.close()
    result = {"seed_seconds": round(time.monotonic() - started, 1), "index_build_seconds": index_seconds}
    ctx.log(f"  {label}: {count:,} messages seeded in {result['seed_seconds']} s")
    small_key = _small_account(parley, url)
    ctx.wait_for_quiet()
    key, n = parley.first_run["api_key"], 20 if ctx.args.quick else 100
    asked = [(name, q, key) for name, q in QUERIES.items()] + [(BESIDE, QUERIES["word"], small_key)]
    with parley.client() as client:
        for name, q, asker in asked:
            path = f"/v1/search?q={quote(q)}&limit=20&apiKey={asker}"
            _timed(client, path, 3)  # warm the caches
            result[name] = _timed(client, path, n)
            ctx.log(f"  {label} {name}: {result[name]}")
    return result


def _small_account(parley, url):
    """A second account with SMALL messages of one contact, none with the big one's words; its API key."""
    from bench.scenarios.postgres import _connect
    from tests.parley_process import run_cli
    created = run_cli(parley.data_dir, "create-account", "--name", "Small", "--email", "small@bench.example",
                      *(("--database-url", url) if url else ()))
    contact_id, at = new_id("ct"), iso(datetime.now(timezone.utc))
    cx = _connect(parley, url)
    try:
        cx.execute("BEGIN")
        cx.execute("INSERT INTO contacts (id, account_id, first_name, created_at) VALUES (?, ?, ?, ?)",
                   (contact_id, created["account_id"], "Small", at))
        cx.executemany("INSERT INTO messages (id, account_id, contact_id, direction, status, body, created_at)"
                       " VALUES (?, ?, ?, 'inbound', 'received', ?, ?)",
                       [(new_id("msg"), created["account_id"], contact_id, f"Small shop note {n}", at)
                        for n in range(SMALL)])
        if not url:
            index_pending(cx, SMALL)
        cx.execute("COMMIT")
    finally:
        cx.close()
    return created["api_key"]


def run(ctx):
    from bench.scenarios.postgres import _connect, _server
    from tests.pg_cluster import PgCluster, available
    count = messages_count(ctx)
    result = {"messages": count}
    sqlite = _server(ctx, "search-sqlite")
    try:
        result["sqlite"] = _measure(ctx, "SQLite", sqlite, "", count)
    finally:
        sqlite.stop()
    if not available():
        result["postgres"] = {"skipped": "PostgreSQL 15 is not installed (postgresql-15)"}
        return result
    cluster = PgCluster().start()
    try:
        admin = _connect(None, cluster.url())
        admin.execute("CREATE DATABASE parley_search")
        admin.close()
        url = cluster.url("parley_search")
        parley = _server(ctx, "search-postgres", "--database-url", url)
        try:
            result["postgres"] = _measure(ctx, "PostgreSQL", parley, url, count)
        except Exception as error:  # the SQLite figures stay reported
            ctx.log(f"  PostgreSQL failed: {error!r}")
            result["postgres"] = {"skipped": f"failed: {error!r}"}
        finally:
            parley.stop()
    finally:
        cluster.stop()
    return result


def render(r):
    lines = [f"{r['messages']:,} messages of {CONTACTS:,} contacts; 20 results a page; one query at a time.", "",
             "| query | SQLite p50 ms | SQLite p99 ms | PostgreSQL p50 ms | PostgreSQL p99 ms | found (of 20) |",
             "|---|---|---|---|---|---|"]
    pg = r.get("postgres", {})
    pg = {} if "skipped" in pg else pg
    for name, q in [*QUERIES.items(), (BESIDE, QUERIES["word"])]:
        if name not in r["sqlite"]:
            continue  # (a run from before the query was asked)
        s, p = r["sqlite"][name], pg.get(name, {})
        lines.append(f"| {name} (`{q}`) | {s['p50_ms']} | {s['p99_ms']} | {p.get('p50_ms', '-')} | {p.get('p99_ms', '-')} "
                     f"| {s['found']}, {p.get('found', '-')} |")
    lines += ["", f"Seed (index included): SQLite {r['sqlite']['seed_seconds']} s; PostgreSQL "
                  f"{pg.get('seed_seconds', '-')} s, of which the trigram indexes' build {pg.get('index_build_seconds', '-')} s."]
    return lines


def goals(r):
    from bench.report import goal
    out = []
    for label in ("sqlite", "postgres"):
        if "skipped" in r.get(label, {"skipped": True}):
            continue
        for name in ("word", "phone", "CJK, 3 characters", "CJK, 2 characters"):
            p99, found = r[label][name]["p99_ms"], r[label][name]["found"]
            # A query that found nothing measured an empty answer, not a search: not met, whatever its time.
            out.append(goal(f"Search p99, {name}, {label}, {r['messages']:,} messages (ms)", p99, P99_GOAL_MS,
                            p99 <= P99_GOAL_MS and found > 0))
    return out
