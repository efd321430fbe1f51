"""Retention under load (issue 9): inbound p99 while the cleanup deletes old webhooks, beside the same
load on the same data with nothing to delete.

Both servers start on a copy of one data directory seeded with old, delivered webhooks (an outbox row
and a delivery attempt each, 40 days old). "idle" runs with --retention-webhook-days 0 (everything kept:
the cleanup finds nothing); "cleanup" with the default 30 days, so its first cleanup, which starts with
the server, deletes them in batches of --retention-batch-size rows while wrk drives the inbound
endpoint. Enough rows are seeded that the cleanup is still deleting when the load ends (the result
says how many were left), so every measured request competed with it.
"""
import shutil
import sqlite3
import time
from datetime import datetime, timedelta, timezone

NAME = "retention"
TITLE = "Inbound load while the retention cleanup runs"
INBOUND = "/v1/incoming_custom_channel_message"
P99_GOAL_MS = 30  # the core inbound goal, with the cleanup running


def seed_old_webhooks(db_path, account_id, count, chunk=50_000):
    """`count` delivered webhooks (outbox row + one attempt) last attempted 40 days ago, written straight
    into the stopped server's database."""
    old = (datetime.now(timezone.utc) - timedelta(days=40)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    cx = sqlite3.connect(str(db_path), isolation_level=None)
    cx.execute("PRAGMA synchronous=OFF")
    first = (cx.execute("SELECT MAX(id) FROM outbox").fetchone()[0] or 0) + 1
    cx.execute("BEGIN")
    for start in range(first, first + count, chunk):
        ids = range(start, min(start + chunk, first + count))
        cx.executemany("INSERT INTO outbox (id, account_id, kind, webhook_id, payload, status, attempts,"
                       " next_attempt_at, created_at, sent_at) VALUES (?, ?, 'reply', ?, ?, 'sent', 1, ?, ?, ?)",
                       ((i, account_id, f"wh_bench_{i}", '{"body": "an old reply"}', old, old, old) for i in ids))
        cx.executemany("INSERT INTO delivery_attempts (outbox_id, account_id, at, http_status, duration_ms)"
                       " VALUES (?, ?, ?, 200, 40)", ((i, account_id, old) for i in ids))
    cx.execute("COMMIT")
    cx.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cx.close()


def old_rows(ctx, data_dir):
    return ctx.count_rows(data_dir / "parley.db", "SELECT COUNT(*) FROM outbox WHERE webhook_id LIKE 'wh_bench_%'")


def run(ctx):
    args = ctx.args
    # ~12k rows/s is what the cleanup deletes at most (200 per write, a 20 ms pause between writes), so
    # this many outlast the load: warm-up plus the measured runs.
    seconds = 2 + args.duration * args.repeat
    count = max(50_000, 15_000 * seconds)
    base = ctx.fresh_data_dir("retention-seed")
    ctx.log(f"  seeding {count:,} delivered webhooks 40 days old")
    seed_old_webhooks(base / "parley.db", ctx.first_run["account_id"], count)
    result = {"seeded_rows": count}
    key = ctx.first_run["api_key"]
    for label, extra in (("idle", ("--retention-webhook-days", "0")), ("cleanup", ())):
        data = ctx.workdir / f"retention-{label}" / "data"
        shutil.copytree(base, data)
        ctx.wait_for_quiet()  # before the server starts: once it runs, its own cleanup keeps the machine busy
        parley = ctx.start_parley(data, *extra)
        started = time.monotonic()
        try:
            path = f"{INBOUND}?apiKey={key}"
            ctx.load.wrk(parley.base, parley.proc.pid, "inbound", path, ctx.salts.sid(f"ret-warm-{label}"), 500,
                         duration=2, quiet_first=False)
            runs = [ctx.load.wrk(parley.base, parley.proc.pid, "inbound", path, ctx.salts.sid(f"ret-{label}"), 500,
                                 quiet_first=False) for _ in range(args.repeat)]
            elapsed = time.monotonic() - started
        finally:
            parley.stop()
        left = old_rows(ctx, data)
        result[label] = {**ctx.median_of(runs), "old_rows_left": left,
                         "old_rows_deleted": count - left, "seconds_under_load": round(elapsed, 1),
                         "deleted_per_second": round((count - left) / elapsed)}
        shutil.rmtree(data.parent, ignore_errors=True)
    result["cleanup_ran_throughout"] = result["cleanup"]["old_rows_left"] > 0
    result["p99_ratio"] = round(result["cleanup"]["p99_ms"] / result["idle"]["p99_ms"], 2)
    return result


def render(result):
    lines = ["| Inbound, 32 connections | req/s | p50 ms | p99 ms | old rows deleted during the load | left |",
             "|---|---:|---:|---:|---:|---:|"]
    for label, title in (("idle", "nothing to delete"), ("cleanup", "cleanup running")):
        r = result[label]
        lines.append(f"| {title} | {r['rps']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
                     f"{r['old_rows_deleted']:,} ({r['deleted_per_second']:,}/s) | {r['old_rows_left']:,} |")
    lines += ["", f"{result['seeded_rows']:,} delivered webhooks (outbox row + attempt) seeded 40 days old; p99 with "
                  f"the cleanup running is {result['p99_ratio']}× the idle p99"
                  f"{'' if result['cleanup_ran_throughout'] else ' (the cleanup finished before the load did: seed more)'}."]
    return lines


def goals(result):
    from bench.report import goal
    p99 = result["cleanup"]["p99_ms"]
    return [goal(f"inbound p99 <= {P99_GOAL_MS} ms while the retention cleanup runs", p99, P99_GOAL_MS,
                 p99 <= P99_GOAL_MS and result["cleanup_ran_throughout"])]
