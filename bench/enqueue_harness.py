"""Benchmark tooling, not the app: how long a campaign's enqueue takes, alone (no server, no delivery).

Makes a fresh data dir (SQLite) or uses a fresh PostgreSQL database, creates an account, N contacts in a list
(plain SQL, multi-row inserts, both databases) and a campaign to all of them through the service layer, then
hands its recipients over with the runner's batch function (storage.campaigns.hand_over) through the
real Database.write_background, two batches queued at once and the batch size adapted as the runner does,
until none is pending. Prints total seconds, seconds per 1,000 recipients, batches and (PostgreSQL) statements
and round trips per batch.

    .venv/bin/python bench/enqueue_harness.py --contacts 10000 [--repeat 3]
    .venv/bin/python scripts/with_postgres.py .venv/bin/python bench/enqueue_harness.py --postgres --contacts 10000
    (--postgres reads PARLEY_TEST_DATABASE_URL, which scripts/with_postgres.py sets)
"""
import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import server
from bench.measure import cpu_seconds, process_tree
from common.ids import new_ids, now_iso
from services import accounts, campaigns, lists
from services.campaign_runner import PIPELINE
from storage.campaigns import hand_over
from settings import Settings
from storage import campaigns as campaign_store


class RoundTrips:
    """Counts what psycopg sends: statements, and round trips (a statement outside a pipeline, a pipeline, a
    COMMIT outside one). Patched in for PostgreSQL runs only."""

    def __init__(self):
        import psycopg
        self.statements = self.round_trips = 0
        counter = self
        execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany
        pipeline, commit = psycopg.Connection.pipeline, psycopg.Connection.commit

        def count_execute(cursor, *args, **kwargs):
            counter.statements += 1
            counter.round_trips += cursor.connection._pipeline is None
            return execute(cursor, *args, **kwargs)

        def count_executemany(cursor, query, params_seq, **kwargs):
            params_seq = list(params_seq)
            counter.statements += len(params_seq)
            counter.round_trips += cursor.connection._pipeline is None
            return executemany(cursor, query, params_seq, **kwargs)

        def count_pipeline(conn):
            counter.round_trips += conn._pipeline is None
            return pipeline(conn)

        def count_commit(conn):
            counter.statements += 1
            counter.round_trips += conn._pipeline is None
            return commit(conn)

        psycopg.Cursor.execute, psycopg.Cursor.executemany = count_execute, count_executemany
        psycopg.Connection.pipeline, psycopg.Connection.commit = count_pipeline, count_commit


def postgres_cpu(database_url):
    """CPU seconds used so far by the PostgreSQL cluster's processes (the postmaster in the socket directory the
    URL names, and its children), or None when that cannot be read (another machine, no /proc)."""
    host = re.search(r"host=([^&]+)", database_url or "")
    try:
        postmaster = int((Path(host.group(1)) / "data" / "postmaster.pid").read_text().split()[0])
    except (AttributeError, OSError, ValueError):
        return None
    return cpu_seconds(postmaster, process_tree(postmaster))  # its backends are its children


def _insert_contacts(cx, account_id, list_id, ids, now):
    for start in range(0, len(ids), 1000):
        chunk = ids[start:start + 1000]
        cx.executemany("INSERT INTO contacts (id, account_id, first_name, last_name, phone, email, created_at)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [(cid, account_id, f"Ann{i}", f"Lee{i}", f"+1212{200 + i // 10000:03d}{i % 10000:04d}",
                         f"bench{i}@example.com", now) for i, cid in enumerate(chunk, start)])
        cx.executemany("INSERT INTO list_members (list_id, contact_id, added_at) VALUES (?, ?, ?)",
                       [(list_id, cid, now) for cid in chunk])


async def run_once(n, database_url, trips=None):
    with tempfile.TemporaryDirectory(prefix="enqueue-harness-") as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", allow_private_webhooks=True, http_port=0,
                            database_url=database_url)
        services = await server.open_services(settings)
        try:
            db = services.db
            made = await accounts.create_account(db, services.box, services.keys, name="Bench",
                                                 email=f"bench-{time.time_ns()}@example.com", with_user=False)
            account_id = made["account_id"]
            await accounts.update_settings(db, account_id, {"customChannelWebhookUrl": "http://127.0.0.1:9/hook"},
                                           services.box)
            lst = await lists.create_list(db, account_id, "Everyone")
            await db.write(_insert_contacts, account_id, lst["id"], sorted(new_ids("ct", n)), now_iso())
            posted = time.perf_counter()
            campaign = await campaigns.create_campaign(db, account_id, name="Spring", list_id=lst["id"],
                                                       body="Hi {{firstName}} {{ lastName }}!",
                                                       rate_per_minute=campaigns.MAX_RATE_PER_MINUTE)
            snapshot = time.perf_counter() - posted
            runner = services.campaigns  # its batch size and how it adapts
            before = (trips.statements, trips.round_trips) if trips else (0, 0)
            cpu, server_cpu = time.process_time(), postgres_cpu(database_url)
            started, batches, queued, status, inside = time.perf_counter(), 0, 0, "running", 0.0
            while status == "running":
                size = int(runner.batch_size)
                results = await asyncio.gather(*(db.write_background(hand_over, campaign["id"], size, now_iso())
                                                 for _ in range(PIPELINE)))
                for result in results:
                    if runner.adaptive and result["queued"]:
                        runner._adapt(size, result["seconds"])
                    batches += result["queued"] > 0
                    queued += result["queued"]
                    inside += result["seconds"]
                status = results[-1]["status"]
                if not any(result["queued"] for result in results) and status == "running":
                    raise SystemExit(f"nothing handed over, campaign still running: {results}")
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu
            if server_cpu is not None:
                server_cpu = postgres_cpu(database_url) - server_cpu
            stored = await campaign_store.get_campaign(db, account_id, campaign["id"])
            assert stored["queued"] == n and stored["pending"] == 0, stored
            line = (f"{'postgresql' if database_url else 'sqlite'} N={n}: enqueue {seconds:.2f} s"
                    f" ({seconds / n * 1000:.3f} s per 1,000; {inside:.2f} s inside hand_over), {batches} batches (last size {int(runner.batch_size)}),"
                    f" snapshot {snapshot:.2f} s, this process's CPU {cpu:.2f} s")
            if server_cpu is not None:
                line += f", PostgreSQL's CPU {server_cpu:.2f} s"
            if trips:
                statements, round_trips = trips.statements - before[0], trips.round_trips - before[1]
                line += f", per batch {statements / batches:.1f} statements, {round_trips / batches:.1f} round trips"
            print(line, flush=True)
            return seconds
        finally:
            await services.close()


def fresh_databases(postgres, repeat):
    """Yields a database for each of ``repeat`` runs: "" (each run makes its own SQLite data dir), or with
    ``postgres`` a new database on PARLEY_TEST_DATABASE_URL's server, dropped once the run is over."""
    if not postgres:
        yield from [""] * repeat
        return
    from tests import pg_databases
    server_url = os.environ[pg_databases.SERVER_URL_VARIABLE]
    for _ in range(repeat):
        database_url = pg_databases.create(server_url)
        try:
            yield database_url
        finally:
            pg_databases.drop(server_url, database_url)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contacts", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--postgres", action="store_true", help="use PARLEY_TEST_DATABASE_URL's server")
    args = parser.parse_args()
    trips = RoundTrips() if args.postgres else None
    times = [asyncio.run(run_once(args.contacts, database_url, trips))
             for database_url in fresh_databases(args.postgres, args.repeat)]
    if len(times) > 1:
        print(f"range {min(times):.2f}-{max(times):.2f} s over {len(times)} runs")


if __name__ == "__main__":
    # The SQLite writer process finds a write's function by module name: run this file's as bench.enqueue_harness.
    from bench import enqueue_harness
    enqueue_harness.main()
