"""Benchmark tooling, not the app: what one inbound message's write costs in CPU, on each side, without HTTP.

Opens the real services on a fresh data dir (SQLite) or a fresh PostgreSQL database, creates an account, stores
600 messages from 500 fromIds (their contacts made), then calls services.messaging.receive_inbound N more times
from the same fromIds, `--concurrency` at a time, and prints writes per second, this process's CPU per write and
the database's CPU per write: PostgreSQL's backends (read from /proc), or SQLite's writer process. The bench's
inbound load adds the HTTP, TLS and rate-limit work to this; what it leaves out is what no server can avoid.

    .venv/bin/python bench/inbound_harness.py --writes 3000 --concurrency 16
    .venv/bin/python bench/inbound_harness.py --writes 3000 --concurrency 16 --business   (issue 40's cost)
    .venv/bin/python bench/inbound_harness.py --writes 3000 --concurrency 16 --assignment balanced   (and off)
    .venv/bin/python scripts/with_postgres.py .venv/bin/python bench/inbound_harness.py --postgres
    (--postgres reads PARLEY_TEST_DATABASE_URL, which scripts/with_postgres.py sets)
"""
import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import server
from bench.enqueue_harness import fresh_databases, postgres_cpu
from bench.measure import cpu_seconds
from services import accounts, messaging
from settings import Settings

FROM_IDS = 500
BODY = "Hello there, I would like to know more about the spring offer"


def from_id(n):
    """One of FROM_IDS phone numbers, by n."""
    return f"+1212555{n % FROM_IDS:04d}"


async def warmed_account(services):
    """A new account whose FROM_IDS fromIds have their contacts (600 messages stored): its id."""
    made = await accounts.create_account(services.db, services.box, services.keys, name="Bench",
                                         email=f"bench-{time.time_ns()}@example.com", with_user=False)
    for i in range(-600, 0):
        await messaging.receive_inbound(services, made["account_id"], message_sid=f"warm{i}", from_id=from_id(i),
                                        to_id="bench", body=BODY)
    return made["account_id"]


# --business: the account keeps business hours (Berlin, weekdays 9-17, a country's holidays), an outside-hours
# message and an SLA (issue 40): every contact's message starts or finds its SLA wait, and outside the hours the
# first of each closed period queues the message (a reply with its outbox row).
BUSINESS = {"businessHours": {"timezone": "Europe/Berlin", "holidays": ["2026-12-24"], "holidayCountry": "DE",
                              "weekly": {d: [["09:00", "12:30"], ["13:30", "17:00"]] for d in ("mon", "tue", "wed",
                                                                                               "thu", "fri")},
                              "outsideHoursMessage": "Hi {{firstName}}, we reply from {{nextOpenAt}}."},
            "sla": {"firstResponseMinutes": 60, "nextResponseMinutes": 120},
            "customChannelWebhookUrl": "http://127.0.0.1:9/replies"}


async def assigned_all(services, account_id):
    """Waits until no conversation of the account waits for an agent (the Assigner has caught up)."""
    from storage import assignment as assignment_store
    while await assignment_store.queue(services.db, account_id, 1):
        await asyncio.sleep(0.01)


async def run_once(writes, concurrency, database_url, pool_size, business=False, assignment=None):
    with tempfile.TemporaryDirectory(prefix="inbound-harness-") as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", allow_private_webhooks=True, http_port=0,
                            database_url=database_url, database_pool_size=pool_size)
        services = await server.open_services(settings)
        try:
            account_id = await warmed_account(services)  # every fromId's contact exists: the common case
            if business:
                await accounts.update_settings(services.db, account_id, BUSINESS)
                if business == "steady":  # each contact's wait started and (while closed) its message sent
                    for i in range(FROM_IDS):
                        await messaging.receive_inbound(services, account_id, message_sid=f"steady{i}",
                                                        from_id=from_id(i), to_id="bench", body=BODY)
            if assignment:  # issue 40's agents and open conversations; every measured message a new contact
                from bench.scenarios.assignment import AGENTS, OPEN, _seed
                _seed(settings.data_dir / "parley.db", account_id)
                await accounts.update_settings(services.db, account_id,
                                               {"assignment": {"mode": assignment, "awayAfterMinutes": None}})
                services.assigner.start()

            async def receive(i):
                sender = f"+1646555{i:04d}" if assignment else from_id(i)
                await messaging.receive_inbound(services, account_id, message_sid=f"sid{i}", from_id=sender,
                                                to_id="bench", body=BODY)

            slots = asyncio.Semaphore(concurrency)

            async def receive_in_slot(i):
                async with slots:
                    await receive(i)

            def database_cpu():
                pid = services.db.writer_pid
                return cpu_seconds(pid) if pid else postgres_cpu(database_url)

            cpu, db_cpu, started = time.process_time(), database_cpu(), time.perf_counter()
            await asyncio.gather(*(receive_in_slot(i) for i in range(writes)))
            if assignment:
                await assigned_all(services, account_id)  # the assignments' writes are counted too
            seconds = time.perf_counter() - started
            cpu, db_cpu = time.process_time() - cpu, database_cpu() - db_cpu
            backend = "postgresql" if database_url else "sqlite"
            side = "PostgreSQL's backends" if database_url else "the writer process"
            if database_url:
                backend += f" pool={pool_size}"
            if business:
                backend += f" business-hours+sla ({business})"
            if assignment:
                backend += f" assignment {assignment}, {AGENTS} agents, {OPEN:,} open, each message a new contact"
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
    parser.add_argument("--business", choices=("first", "steady"), help="the account keeps business hours and an "
                        "SLA: first, each contact's first message after they were set is measured among the others "
                        "(a wait starts, and while closed the outside-hours message is queued); steady, they were "
                        "before the measured ones (each message finds its wait running)")
    parser.add_argument("--assignment", choices=("off", "balanced"), help="SQLite: issue 40's 50 agents and "
                        "10,000 open conversations, and every measured message from a new contact; balanced: each "
                        "is assigned (the Assigner runs, and its writes are counted)")
    args = parser.parse_args()
    for concurrency in args.concurrency:
        for pool_size in args.pool_size if args.postgres else args.pool_size[:1]:  # SQLite: no pool
            for database_url in fresh_databases(args.postgres, args.repeat):
                asyncio.run(run_once(args.writes, concurrency, database_url, pool_size, args.business,
                                      args.assignment))


if __name__ == "__main__":
    main()
