"""Benchmark tooling, not the app: the least CPU an inbound message's write can cost on PostgreSQL (issue 19).

Records the statements one real inbound write sends (services.messaging.receive_inbound for a known fromId, the
common case), then drives PostgreSQL from 16 threads, each with a connection of its own, for --seconds, two ways:
- "statements": the recorded statements with fresh ids (the fromIds spread over 500, as for the call), in the
  adapter's two round trips (BEGIN and the read; the writes and the COMMIT), straight through psycopg, without
  Parley's services, pool or thread hand-offs;
- "one call": the same work as one PL/pgSQL function called once (defined below for this measurement only: the
  read, the message, its conversation and its message.created event; no opt-out keywords, no new contacts).
Prints writes per second and the CPU per write of PostgreSQL's backends and of this process. bench/README
"PostgreSQL (issue 19)" says what the figures mean for the inbound goal.

    .venv/bin/python scripts/with_postgres.py .venv/bin/python bench/pg_write_floor.py [--seconds 8 --rounds 2]
"""
import argparse
import asyncio
import itertools
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

import server
from bench.enqueue_harness import fresh_databases, postgres_cpu
from bench.inbound_harness import BODY, from_id, warmed_account
from services import messaging
from settings import Settings
from storage import pg_adapter

THREADS = 16
_CONVERSATION = (
    "INSERT INTO conversations (account_id, contact_id, last_message_id, last_message_at, last_direction, last_author,"
    " last_preview, channel, unread_count, failed_count) VALUES (p_account, v_contact, p_id, p_created, 'inbound',"
    " 'contact', left(p_body, 120), NULL, 1, 0) ON CONFLICT (account_id, contact_id) DO UPDATE SET"
    " last_message_at = excluded.last_message_at, last_direction = excluded.last_direction,"
    " last_author = excluded.last_author, last_preview = excluded.last_preview,"
    " last_message_id = excluded.last_message_id, unread_count = conversations.unread_count + 1,"
    " status = CASE WHEN conversations.status IN ('resolved', 'snoozed') THEN 'open' ELSE conversations.status END,"
    " snoozed_until = NULL")
FUNCTION = """
CREATE OR REPLACE FUNCTION bench_inbound(p_account text, p_id text, p_sid text, p_from text, p_to text, p_body text,
  p_created text, p_since text) RETURNS TABLE(o_stored boolean, o_contact text, o_campaign text, o_bot text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE v_stored boolean; v_contact text; v_campaign text; v_bot text;
BEGIN
  SELECT EXISTS (SELECT 1 FROM messages e WHERE e.account_id = a.id AND e.external_id = p_sid), i.contact_id,
    (SELECT CASE WHEN k.created_at >= p_since THEN k.campaign_id END FROM messages k WHERE k.account_id = a.id
     AND k.contact_id = i.contact_id AND k.author = 'campaign' ORDER BY k.id DESC LIMIT 1),
    (a.settings::jsonb #>> '{bot}')
  INTO v_stored, v_contact, v_campaign, v_bot
  FROM accounts a LEFT JOIN channel_identities i ON i.account_id = a.id AND i.from_id = p_from WHERE a.id = p_account;
  IF NOT v_stored AND v_contact IS NOT NULL THEN
    INSERT INTO messages (id, account_id, contact_id, direction, status, body, message_type, external_id, from_id,
      to_id, author, created_at, campaign_id) VALUES (p_id, p_account, v_contact, 'inbound', 'received', p_body,
      'text', p_sid, p_from, p_to, 'contact', p_created, v_campaign);
    CONVERSATION;
    WITH counter AS (INSERT INTO event_counters (account_id, seq) VALUES (p_account, 1) ON CONFLICT (account_id)
      DO UPDATE SET seq = event_counters.seq + 1 RETURNING seq)
    INSERT INTO events (account_id, seq, type, data, created_at) SELECT p_account, seq, 'message.created',
      json_build_object('messageId', p_id, 'contactId', v_contact, 'direction', 'inbound', 'author', 'contact',
                        'status', 'received')::text, p_created FROM counter;
  END IF;
  RETURN QUERY SELECT v_stored, v_contact, v_campaign, v_bot;
END $$;
""".replace("CONVERSATION", _CONVERSATION)


async def _record(database_url):
    """An account whose fromIds have their contacts, and the statements of one more inbound write:
    (account id, the probe message {id, from_id, contact_id}, [(sql, params)])."""
    with tempfile.TemporaryDirectory(prefix="pg-write-floor-") as tmp:
        services = await server.open_services(Settings(data_dir=Path(tmp) / "data", http_port=0,
                                                       database_url=database_url))
        try:
            account_id = await warmed_account(services)
            sent, send = [], pg_adapter.PgConnection._send

            def recording(cx, sql, params):
                sent.append((sql, list(params or ())))
                return send(cx, sql, params)

            pg_adapter.PgConnection._send = recording
            try:
                probe, _ = await messaging.receive_inbound(services, account_id, message_sid="probe",
                                                           from_id=from_id(7), to_id="bench", body=BODY)
            finally:
                pg_adapter.PgConnection._send = send
            return account_id, probe, sent
        finally:
            await services.close()


def _statements(recorded, probe):
    """One write as the adapter sends it, with fresh ids and the fromIds spread as one_call's are: the read
    opens the transaction, the rest go with the COMMIT."""
    (read_sql, read_args), *writes = [(pg_adapter.translate(sql), args) for sql, args in recorded]

    def fresh(args, n, contact_id=None):
        swaps = [(probe["id"], f"msg_bench{n:012d}"), ("probe", f"sid{n}"),
                 (probe["from_id"], from_id(n))]
        if contact_id:
            swaps.append((probe["contact_id"], contact_id))
        for old, new in swaps:
            args = [a.replace(old, new) if isinstance(a, str) else a for a in args]
        return args

    def write(cx, account_id, n):
        with cx.pipeline():
            cx.execute("BEGIN")
            cursor = cx.execute(read_sql, fresh(read_args, n))
        contact_id = cursor.fetchone()[1]
        with cx.pipeline():
            for sql, args in writes:
                cx.execute(sql, fresh(args, n, contact_id))
            cx.execute("COMMIT")
    write.__name__ = "statements"
    return write


def one_call(cx, account_id, n):
    cx.execute("SELECT * FROM bench_inbound(%s, %s, %s, %s, %s, %s, %s, %s)",
               (account_id, f"msg_call{n:012d}", f"call{n}", from_id(n), "bench", BODY,
                "2026-11-26T12:00:00.000Z", "2026-11-23T12:00:00.000Z")).fetchone()


one_call.__name__ = "one call"


def _load(database_url, account_id, write, numbers, seconds):
    """THREADS threads, each on a connection of its own, write for ``seconds``; CPU read while they are open
    (a backend's CPU leaves /proc with it)."""
    done = [0] * THREADS
    started, finished, release = (threading.Barrier(THREADS + 1), threading.Barrier(THREADS + 1),
                                  threading.Event())

    def run(k):
        with psycopg.connect(database_url, autocommit=True) as cx:
            write(cx, account_id, next(numbers))  # psycopg prepares a statement from its 5th use
            started.wait()
            stop = time.monotonic() + seconds
            while time.monotonic() < stop:
                write(cx, account_id, next(numbers))
                done[k] += 1
            finished.wait()
            release.wait()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    started.wait()
    cpu, db_cpu, began = time.process_time(), postgres_cpu(database_url), time.perf_counter()
    finished.wait()
    cpu, db_cpu, seconds = (time.process_time() - cpu, postgres_cpu(database_url) - db_cpu,
                            time.perf_counter() - began)
    release.set()
    for thread in threads:
        thread.join()
    n = sum(done)
    print(f"{write.__name__:>10}: {n / seconds:6.0f} writes/s, PostgreSQL {db_cpu / n * 1000:.3f} ms of CPU a write,"
          f" this process {cpu / n * 1000:.3f} ms", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for database_url in fresh_databases(True, 1):
        account_id, probe, recorded = asyncio.run(_record(database_url))
        with psycopg.connect(database_url, autocommit=True) as cx:
            cx.execute(FUNCTION)
        numbers = itertools.count()
        for _ in range(args.rounds):
            for write in (_statements(recorded, probe), one_call):
                _load(database_url, account_id, write, numbers, args.seconds)


if __name__ == "__main__":
    main()
