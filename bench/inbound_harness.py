"""Benchmark tooling, not the app: what one inbound message's write costs in CPU, on each side, without HTTP.

Opens the real services on a fresh data dir (SQLite) or a fresh PostgreSQL database, creates an account, stores
600 messages from 500 fromIds (their contacts made), then calls services.messaging.receive_inbound N more times
from the same fromIds, `--concurrency` at a time, and prints writes per second, this process's CPU per write and
the database's CPU per write: PostgreSQL's backends (read from /proc), or SQLite's writer process. The bench's
inbound load adds the HTTP, TLS and rate-limit work to this; what it leaves out is what no server can avoid.

    .venv/bin/python bench/inbound_harness.py --writes 3000 --concurrency 16
    .venv/bin/python scripts/with_postgres.py .venv/bin/python bench/inbound_harness.py --postgres
    (--postgres reads PARLEY_TEST_DATABASE_URL, which scripts/with_postgres.py sets)
"""
import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import server  # noqa: E402
from bench.enqueue_harness import fresh_databases, postgres_cpu  # noqa: E402
from services import accounts, messaging  # noqa: E402
from settings import Settings  # noqa: E402

FROM_IDS = 500
BODY = "Hello there, I would like to know more about the spring offer"


def _process_cpu(pid):
    """CPU seconds used so far by process pid (SQLite's writer)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_once(writes, concurrency, database_url, pool_size=10):
    with tempfile.TemporaryDirectory(prefix="inbound-harness-") as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", allow_private_webhooks=True, http_port=0,
                            database_url=database_url, database_pool_size=pool_size)
        services = await server.open_services(settings)
        try:
            made = await accounts.create_account(services.db, services.box, services.keys, name="Bench",
                                                 email=f"bench-{time.time_ns()}@example.com", with_user=False)

            async def receive(i):
                await messaging.receive_inbound(services, made["account_id"], message_sid=f"sid{i}",
                                                from_id=f"+1212555{i % FROM_IDS:04d}", to_id="bench", body=BODY)

            for i in range(-600, 0):  # every fromId's contact exists: the common case measured below
                await receive(i)
            slots = asyncio.Semaphore(concurrency)

            async def receive_in_slot(i):
                async with slots:
                    await receive(i)

            def database_cpu():
                pid = services.db.writer_pid
                return _process_cpu(pid) if pid else postgres_cpu(database_url)

            cpu, db_cpu, started = time.process_time(), database_cpu(), time.perf_counter()
            await asyncio.gather(*(receive_in_slot(i) for i in range(writes)))
            seconds = time.perf_counter() - started
            cpu, db_cpu = time.process_time() - cpu, database_cpu() - db_cpu
            backend = "postgresql" if database_url else "sqlite"
            side = "PostgreSQL's backends" if database_url else "the writer process"
            if database_url:
                backend += f" pool={pool_size}"
            print(f"{backend} concurrency={concurrency} writes={writes}: {writes / seconds:.0f} writes/s,"
                  f" this process {cpu / writes * 1000:.3f} ms of CPU a write,"
                  f" {side} {db_cpu / writes * 1000:.3f} ms", flush=True)
        finally:
            await services.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--postgres", action="store_true", help="use PARLEY_TEST_DATABASE_URL's server")
    parser.add_argument("--pool-size", type=int, nargs="+", default=[10], help="PostgreSQL: database_pool_size")
    args = parser.parse_args()
    for concurrency in args.concurrency:
        for pool_size in args.pool_size if args.postgres else [None]:
            for database_url in fresh_databases(args.postgres, args.repeat):
                asyncio.run(run_once(args.writes, concurrency, database_url, pool_size or 10))


if __name__ == "__main__":
    main()
