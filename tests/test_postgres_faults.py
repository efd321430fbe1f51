"""PostgreSQL counterparts of tests/test_faults.py's SQLite-only faults (run when PARLEY_TEST_DATABASE_URL is set):
the real server.py over HTTPS killed with -9 under inbound load, the database server restarted under load (a
cluster of the test's own, tests/pg_cluster.py), and the database dropping the server's connections. docs/design.md#api-decisions:
"The 200 is sent once the message is durably committed"; docs/api.md#custom-channel messageSid is "Unique per message. Used to
prevent a message being processed twice"; docs/api.md#errors / docs/design.md#api-decisions "Errors": a storage outage is 503 UNAVAILABLE,
which the client may retry."""
import asyncio
import json
import signal
import time
from collections import Counter

import pytest
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from tests import db_direct
from tests.parley_process import ParleyProcess
from tests.pg_cluster import PgCluster
from tests.fault_helpers import FROM_IDS, SCALE, InboundLoad, inbound_body, wait_for
from tests.inbound_helpers import INBOUND

pytestmark = pytest.mark.postgres_only

def start(data_dir, *extra_args, first_run=None):
    parley = ParleyProcess(data_dir, "--rate-limit", "100000000", "--allow-private-webhooks", *extra_args,
                           http=False).start()
    parley.first_run = parley.first_run or first_run
    return parley


def stored_sids(database):
    """messageSid -> [message ids] of the load's messages."""
    stored = {}
    for row in db_direct.rows(database, "SELECT external_id, id FROM messages WHERE external_id LIKE 'kill-%'"):
        stored.setdefault(row["external_id"], []).append(row["id"])
    return stored


def check_consistent(database):
    """Nothing half-written (test_faults.check_consistent without SQLite's PRAGMAs: the foreign keys are
    PostgreSQL's own constraints): every contact made for a fromId is committed with a message of it."""
    assert db_direct.rows(database, "SELECT m.id FROM messages m LEFT JOIN contacts c ON c.id = m.contact_id"
                                    " WHERE c.id IS NULL") == []
    assert db_direct.rows(database, "SELECT i.from_id FROM channel_identities i WHERE NOT EXISTS (SELECT 1 FROM"
                                    " messages m WHERE m.account_id = i.account_id AND i.from_id IN (m.from_id, m.to_id))"
                          ) == []


def retry_all(parley, load, stored):
    """The client retries every sid it sent: answered ones give back their first id, the others are stored
    now (or were already, whole); then every sid is one message."""
    key = parley.first_run["api_key"]
    with parley.client() as client:
        for sid in sorted(load.answered)[:: max(1, len(load.answered) // (30 * SCALE))]:
            response = client.post(INBOUND, params={"apiKey": key}, json=load.sent[sid])
            assert response.status_code == 200 and response.json()["messageId"] == load.answered[sid]
        for sid in load.unanswered:  # every sid without a 200 (503s included)
            response = client.post(INBOUND, params={"apiKey": key}, json=load.sent[sid])
            assert response.status_code == 200, response.text
            if sid in stored:
                assert response.json()["messageId"] == stored[sid][0]


def test_kill_9_of_the_server_under_inbound_load_loses_no_answered_message(tmp_path, database_url):
    """kill -9 of server.py while 8 threads post inbound messages: the transactions it had open die with its
    connections, so after a restart every messageSid answered 200 is stored exactly once under the answered
    messageId, nothing unanswered is half-written, and retrying every sid leaves one message each."""
    assert database_url
    data = tmp_path / "data"
    parley = start(data)
    first_run = parley.first_run
    target = 150 * SCALE
    try:
        with InboundLoad(parley, threads=8, from_ids=FROM_IDS) as load:
            load.wait_answered(target)
            parley.proc.send_signal(signal.SIGKILL)  # mid-flight: the threads are still sending
            parley.proc.wait(10)
    finally:
        parley.stop()
    assert not load.other_statuses, load.other_statuses
    assert len(load.answered) >= target
    assert load.unanswered, "the kill should have cut some requests short"

    parley = start(data, first_run=first_run)
    try:
        check_consistent(database_url)
        stored = stored_sids(database_url)
        assert all(len(ids) == 1 for ids in stored.values())
        for sid, message_id in load.answered.items():
            assert stored.get(sid) == [message_id], f"answered {sid} -> {message_id} but stored {stored.get(sid)}"
        retry_all(parley, load, stored)
        stored = stored_sids(database_url)
        assert set(stored) == set(load.answered) | load.unanswered
        assert {len(ids) for ids in stored.values()} == {1}
        check_consistent(database_url)
    finally:
        parley.stop()


@pytest.fixture
def own_cluster():
    """A PostgreSQL cluster of this test's own (it is stopped and started again): its `parley` database."""
    cluster = PgCluster().start()  # in /tmp: the cluster user cannot enter pytest's root-only tmp_path
    try:
        cx = db_direct.connect_postgres(cluster.url())
        cx.execute("CREATE DATABASE parley")
        cx.close()
        yield cluster
    finally:
        cluster.stop()


def test_postgresql_restarted_under_load_is_503_while_down_then_recovers_losing_nothing(tmp_path, own_cluster):
    """The database server stops (pg_ctl stop -m fast: every connection closed) while 8 threads post inbound
    messages, and starts again a few seconds later; server.py keeps running. While it is down requests are
    answered 503 (never 500, never a hang); once it is back requests are answered 200 again without a restart
    of server.py; every messageSid answered 200 is stored exactly once, and the client's retries of the
    others store each once."""
    url = own_cluster.url("parley")
    data = tmp_path / "data"
    parley = start(data, "--database-url", url)
    try:
        with InboundLoad(parley, threads=8, from_ids=FROM_IDS) as load:
            assert load.wait_answered(50 * SCALE), "no load before the outage"
            own_cluster.stop_server("fast")
            assert wait_for(lambda: load.other_statuses[503] >= 8, 60), load.other_statuses
            answered_while_down = len(load.answered)
            time.sleep(1)
            own_cluster.start_server()
            assert load.wait_answered(answered_while_down + 50 * SCALE), \
                "the server did not recover once PostgreSQL was back"
        assert parley.proc.poll() is None, "server.py stopped"
        assert not load.cut, "a request hung past the client's 30 s timeout instead of being answered 503"
        assert set(load.other_statuses) == {503}, load.other_statuses
        stored = stored_sids(url)
        assert all(len(ids) == 1 for ids in stored.values())
        for sid, message_id in load.answered.items():
            assert stored.get(sid) == [message_id], f"answered {sid} -> {message_id} but stored {stored.get(sid)}"
        assert not load.refused & set(stored), "a write answered 'nothing was written' was stored"
        check_consistent(url)
        retry_all(parley, load, stored)
        counts = Counter(row["external_id"] for row in db_direct.rows(
            url, "SELECT external_id FROM messages WHERE external_id LIKE 'kill-%'"))
        assert set(counts) == set(load.answered) | load.unanswered and set(counts.values()) == {1}
    finally:
        parley.stop()


async def test_connections_dropped_by_the_database_are_replaced(http_server_client, account, services,
                                                                database_url):
    """pg_terminate_backend of every connection the app holds (a failover, an idle timeout of a proxy, an
    administrator): a request may be answered 503 but never 500, and requests succeed again at once, each
    messageSid stored once."""
    key = account["api_key"]
    client = SimpleAsyncHTTPClient(force_instance=True, max_clients=16)

    async def post(sid):
        r = await client.fetch(http_server_client.get_url(f"{INBOUND}?apiKey={key}"), method="POST",
                               raise_error=False, headers={"Content-Type": "application/json"},
                               body=json.dumps(inbound_body(sid, "dropped")))
        return r.code, json.loads(r.body) if r.body else None

    def terminate():
        admin = db_direct.connect_postgres(database_url)
        try:
            return admin.execute("SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                 " WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()[0]
        finally:
            admin.close()
    try:
        assert [code for code, _ in await asyncio.gather(*(post(f"kill-warm-{i}") for i in range(8)))] == [200] * 8
        assert await asyncio.get_running_loop().run_in_executor(None, terminate) >= 1
        first = await asyncio.gather(*(post(f"kill-after-{i}") for i in range(8)))
        assert {code for code, _ in first} <= {200, 503}, first
        retried = [await post(f"kill-after-{i}") for i in range(8)]
        assert [code for code, _ in retried] == [200] * 8, retried
        for (code, body), (_, again) in zip(first, retried):
            if code == 200:
                assert again["messageId"] == body["messageId"]
    finally:
        client.close()
    stored = stored_sids(services)
    assert len(stored) == 16 and {len(ids) for ids in stored.values()} == {1}
