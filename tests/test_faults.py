"""Fault tests against the real server.py over HTTPS: kill -9 under inbound load, a webhook receiver
that is down and then up, and a full disk. CI-sized by default; `make faults` multiplies the counts
with PARLEY_FAULT_SCALE (e.g. 10)."""
import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from standardwebhooks import Webhook

from tests import db_direct
from tests.fault_helpers import FROM_IDS, SCALE, InboundLoad, inbound_body, wait_for
from tests.parley_process import ParleyProcess, child_pids, free_port, pid_alive

INBOUND = "/v1/incoming_custom_channel_message"
SEND = "/v1/send_custom_channel_message"


def start(data_dir, first_run=None, *extra_args):
    parley = ParleyProcess(data_dir, "--rate-limit", "100000000", "--allow-private-webhooks", *extra_args,
                           http=False).start()
    parley.first_run = parley.first_run or first_run
    return parley


def db_rows(db_path, sql, *params):
    cx = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return cx.execute(sql, params).fetchall()
    finally:
        cx.close()


def check_consistent(db_path):
    """Nothing half-written: the file is sound, every reference resolves, every contact made by an inbound
    message has that message, and every fromId identity points at a contact."""
    assert db_rows(db_path, "PRAGMA integrity_check") == [("ok",)]
    assert db_rows(db_path, "PRAGMA foreign_key_check") == []
    assert db_rows(db_path, "SELECT m.id FROM messages m LEFT JOIN contacts c ON c.id = m.contact_id"
                            " WHERE c.id IS NULL") == []
    assert db_rows(db_path, "SELECT i.from_id FROM channel_identities i LEFT JOIN contacts c"
                            " ON c.id = i.contact_id WHERE c.id IS NULL") == []
    # A contact created for a fromId is committed with the message that introduced it (inbound from it,
    # or outbound to it), never alone.
    assert db_rows(db_path, "SELECT i.from_id FROM channel_identities i WHERE NOT EXISTS (SELECT 1 FROM"
                            " messages m WHERE m.account_id = i.account_id AND i.from_id IN (m.from_id, m.to_id))"
                   ) == []


@pytest.mark.sqlite_only("kills the server with its SQLite writer process and checks the file (PRAGMA integrity_check);"
                         " tests/test_postgres_faults.py is the PostgreSQL counterpart")
def test_kill_9_under_inbound_load_loses_no_answered_message_and_half_writes_nothing(tmp_path):
    """docs/design.md#api-decisions: "The 200 is sent once the message is durably committed". Spec §4.4: messageSid is
    "Unique per message. Used to prevent a message being processed twice." So after kill -9 under load
    and a restart, every messageId answered 200 is stored exactly once, nothing unanswered is
    half-written, and the client's retry of any sid (answered or not) yields exactly one message."""
    data = tmp_path / "data"
    parley = start(data)
    first_run = parley.first_run
    target = 150 * SCALE
    try:
        [writer] = child_pids(parley.proc.pid)
        with InboundLoad(parley, threads=8, from_ids=FROM_IDS) as load:
            load.wait_answered(target)
            parley.proc.send_signal(signal.SIGKILL)  # mid-flight: the threads are still sending
            parley.proc.wait(10)
        # The writer process finishes the transaction it may be in, and exits: no orphan holds the database.
        assert wait_for(lambda: not pid_alive(writer), 10), "the writer process outlived the server"
    finally:
        parley.stop()
    assert not load.other_statuses, load.other_statuses
    assert len(load.answered) >= target
    assert load.unanswered, "the kill should have cut some requests short"

    db_path = data / "parley.db"
    parley = start(data, first_run)  # restart on the same data: recovery of the WAL happens here
    try:
        check_consistent(db_path)
        stored = dict(db_rows(db_path, "SELECT external_id, id FROM messages WHERE external_id LIKE 'kill-%'"))
        counts = Counter(sid for (sid,) in db_rows(db_path, "SELECT external_id FROM messages"
                                                             " WHERE external_id LIKE 'kill-%'"))
        assert all(n == 1 for n in counts.values())
        print("FAULTSTAT answered", len(load.answered), "unanswered", len(load.unanswered),
              "unanswered but stored", len(load.unanswered & set(stored)))
        for sid, message_id in load.answered.items():
            assert stored.get(sid) == message_id, f"answered {sid} -> {message_id} but stored {stored.get(sid)}"
        # The client retries everything: answered sids give back their first id, unanswered ones are
        # stored now (or were already, whole), and nothing becomes two.
        key = first_run["api_key"]
        with parley.client() as client:
            for sid in sorted(load.answered)[:: max(1, len(load.answered) // (30 * SCALE))]:
                response = client.post(INBOUND, params={"apiKey": key}, json=load.sent[sid])
                assert response.status_code == 200 and response.json()["messageId"] == load.answered[sid]
            for sid in load.unanswered:
                response = client.post(INBOUND, params={"apiKey": key}, json=load.sent[sid])
                assert response.status_code == 200
                if sid in stored:
                    assert response.json()["messageId"] == stored[sid]
        counts = Counter(sid for (sid,) in db_rows(db_path, "SELECT external_id FROM messages"
                                                             " WHERE external_id LIKE 'kill-%'"))
        assert set(counts) == set(load.answered) | load.unanswered
        assert set(counts.values()) == {1}
        check_consistent(db_path)
    finally:
        parley.stop()


@pytest.mark.sqlite_only("the SQLite writer process")
def test_kill_9_of_the_writer_process_under_load_the_server_carries_on_and_loses_nothing(tmp_path):
    """The writer process dies mid-transaction (OOM killer, a crash): the requests of its batch are
    answered 503 (docs/api.md#errors: "The client may retry shortly"), a new writer takes over, every 200 is stored
    exactly once, and a retry of a refused sid stores it once."""
    data = tmp_path / "data"
    parley = start(data)
    key = parley.first_run["api_key"]
    db_path = data / "parley.db"
    try:
        [writer] = child_pids(parley.proc.pid)
        with InboundLoad(parley, threads=8, from_ids=[f"user-{k}" for k in range(10)]) as load:
            assert wait_for(lambda: len(load.answered) >= 100 * SCALE, 60)
            os.kill(writer, signal.SIGKILL)
            assert wait_for(lambda: set(child_pids(parley.proc.pid)) - {writer}, 10), "no new writer"
            answered_before = len(load.answered)
            assert wait_for(lambda: len(load.answered) >= answered_before + 100 * SCALE, 60), (
                f"no 200 after the writer was replaced: {len(load.answered) - answered_before} new answers, "
                f"statuses {dict(load.other_statuses)}, {sum(w.is_alive() for w in load.workers)} clients left")
        assert parley.proc.poll() is None
        assert set(load.other_statuses) <= {503}, load.other_statuses
        stored = dict(db_rows(db_path, "SELECT external_id, id FROM messages WHERE external_id LIKE 'kill-%'"))
        for sid, message_id in load.answered.items():
            assert stored.get(sid) == message_id
        with parley.client() as client:
            for sid in load.unanswered:  # the 503s: retried, each stored once
                response = client.post(INBOUND, params={"apiKey": key}, json=load.sent[sid])
                assert response.status_code == 200
        counts = Counter(sid for (sid,) in db_rows(db_path, "SELECT external_id FROM messages"
                                                             " WHERE external_id LIKE 'kill-%'"))
        assert set(counts) == set(load.answered) | load.unanswered and set(counts.values()) == {1}
        check_consistent(db_path)
    finally:
        parley.stop()
    assert "the writer process stopped unexpectedly" in open(parley.log.name, encoding="utf-8").read()


# ---- the writer dies after COMMIT, before its answer; the writer hangs ---------------------------

@pytest.mark.sqlite_only("the SQLite writer process")
def test_writer_killed_after_commit_the_client_learns_the_truth_and_a_keyed_retry_creates_nothing_twice(
        tmp_path, monkeypatch):
    """Issue 9: the writer process dies after COMMIT and before its answer reached the server (the
    test-only hook PARLEY_WRITER_FAULT kills it right there, after every keyed write and every list
    creation). A send with an Idempotency-Key is answered 200 with the real first answer, re-read from
    the key's row committed with it; its retry with the same key gets the same answer and nothing is
    sent twice. A write without a key that nothing can re-read answers 503 saying it IS stored (DESIGN
    §3), and it is."""
    monkeypatch.setenv("PARLEY_WRITER_FAULT",
                       "kill-after-commit:storage.idempotency.run_claimed,storage.lists.insert_list")
    data = tmp_path / "data"
    parley = start(data)
    key = parley.first_run["api_key"]
    db_path = data / "parley.db"
    try:
        with parley.client() as client:
            r = client.patch("/v1/account/settings", params={"apiKey": key},
                             json={"customChannelWebhookUrl": "http://127.0.0.1:9/replies"})
            assert r.status_code == 200, r.text
            writers = set(child_pids(parley.proc.pid))
            body = {"customData": {"fromId": "user-7", "customChannel": "faults", "body": "sent exactly once"}}
            first = client.post(SEND, params={"apiKey": key}, json=body, headers={"Idempotency-Key": "send-1"})
            assert first.status_code == 200, first.text
            assert wait_for(lambda: set(child_pids(parley.proc.pid)) - writers, 10), "the writer did not die"
            again = client.post(SEND, params={"apiKey": key}, json=body, headers={"Idempotency-Key": "send-1"})
            assert again.status_code == 200 and again.json() == first.json()
            assert again.headers["Idempotent-Replayed"] == "true"
            stored = client.post("/v1/lists", params={"apiKey": key}, json={"name": "Kept"})
            assert stored.status_code == 503, stored.text
            assert stored.json()["error"] == {"code": "UNAVAILABLE", "message": (
                "the write is stored, but its answer was lost when the storage writer stopped; "
                "a retry with the same Idempotency-Key returns it")}
            assert client.get("/v1/lists", params={"apiKey": key}).json()["data"][0]["name"] == "Kept"
    finally:
        parley.stop()
    assert db_rows(db_path, "SELECT id FROM messages WHERE body = 'sent exactly once'") == [
        (first.json()["messageId"],)]
    assert db_rows(db_path, "SELECT COUNT(*) FROM outbox WHERE message_id = ?", first.json()["messageId"]) == [(1,)]
    check_consistent(db_path)
    log_text = open(parley.log.name, encoding="utf-8").read()
    assert "was committed" in log_text and "was not committed" not in log_text


@pytest.mark.sqlite_only("the SQLite writer process")
@pytest.mark.parametrize("resume", ["replaced", "continued"])
def test_a_stopped_writer_cannot_stall_the_server(tmp_path, resume):
    """Issue 9: "SIGSTOP the writer -> writes answer 503 within the watchdog limit and the server recovers
    after SIGCONT or replacement". With --writer-stall-seconds 2, inbound load continues while the writer
    is stopped: no request hangs (each client waits at most 30 s), the requests of the held batch answer
    503 saying nothing was written (and nothing of them is stored), the writer is replaced and later
    requests are answered 200. Stopped for less than the limit and continued, every request ends 200.
    The slowest answer is printed (a figure, not an assertion)."""
    data = tmp_path / "data"
    parley = start(data, None, "--writer-stall-seconds", "2" if resume == "replaced" else "30")
    db_path = data / "parley.db"
    try:
        [writer] = child_pids(parley.proc.pid)
        with InboundLoad(parley, threads=4, from_ids=[f"user-{k}" for k in range(5)]) as load:
            assert wait_for(lambda: len(load.answered) >= 20 * SCALE, 60)
            os.kill(writer, signal.SIGSTOP)
            stopped_at = len(load.answered)
            if resume == "continued":
                time.sleep(1)
                os.kill(writer, signal.SIGCONT)
            assert wait_for(lambda: len(load.answered) >= stopped_at + 50 * SCALE, 60), (
                f"no 200 after the writer stopped: statuses {dict(load.other_statuses)}")
        assert parley.proc.poll() is None
        replaced = writer not in child_pids(parley.proc.pid)
        assert replaced == (resume == "replaced")
        assert set(load.other_statuses) <= ({503} if replaced else set()), load.other_statuses
        if replaced:
            assert load.other_statuses[503] >= 1
        print(f"\nslowest answer while the writer was stopped ({resume}): {load.slowest:.2f} s")
    finally:
        parley.stop()
    stored = dict(db_rows(db_path, "SELECT external_id, id FROM messages WHERE external_id LIKE 'kill-%'"))
    assert all(stored.get(sid) == message_id for sid, message_id in load.answered.items())
    assert not set(stored) & load.refused  # "nothing was written" was the truth
    check_consistent(db_path)


# ---- webhook receiver down, then up -----------------------------------------------------------

class Receiver:
    """A webhook receiver on a fixed port that can be down (nothing listening) or up; while up it
    verifies each Standard Webhooks signature and counts deliveries by webhook-id."""

    def __init__(self, secret):
        self.port = free_port()
        self.verifier = Webhook(secret)
        self.deliveries = Counter()
        self.bodies = {}
        self.bad_signatures = 0
        self.server = None

    def up(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    payload = receiver.verifier.verify(body, dict(self.headers))
                except Exception:
                    receiver.bad_signatures += 1
                    self.send_response(400)
                    self.end_headers()
                    return
                webhook_id = self.headers["webhook-id"]
                receiver.deliveries[webhook_id] += 1
                receiver.bodies[webhook_id] = payload
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def down(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/parley-replies"





def test_webhook_receiver_down_then_up_every_reply_ends_sent_and_none_is_delivered_twice(tmp_path):
    """Spec §6: "the message status becomes Sent on success and Failed on error or unreachability".
    docs/design.md#api-decisions: unreachable is retried with backoff (first retry after 5 s), "webhook-id stays the same
    across retries, and a later success moves the message to Sent". With the receiver down for the
    first attempts and up afterwards, every reply ends Sent and the receiver sees each webhook-id once."""
    parley = start(tmp_path / "data")
    key = parley.first_run["api_key"]
    receiver = None
    try:
        with parley.client() as client:
            secret = client.get("/v1/account/webhook-secret", params={"apiKey": key}).json()["secret"]
            receiver = Receiver(secret)  # down: nothing listens on its port yet
            response = client.patch("/v1/account/settings", params={"apiKey": key},
                                    json={"customChannelWebhookUrl": receiver.url})
            assert response.status_code == 200, response.text
            message_ids = []
            for n in range(20 * SCALE):
                response = client.post(SEND, params={"apiKey": key}, json={"customData": {
                    "fromId": f"user-{n % 7}", "customChannel": "faults", "body": f"reply {n}"}})
                assert response.status_code == 200, response.text
                message_ids.append(response.json()["messageId"])

            def statuses():
                return Counter(client.get(f"/v1/messages/{m}", params={"apiKey": key}).json()["status"]
                               for m in message_ids)
            # While the receiver is down every first attempt fails and is recorded with its error.
            assert wait_for(lambda: statuses() == Counter({"Failed": len(message_ids)}), 30), statuses()
            failed = client.get(f"/v1/messages/{message_ids[0]}", params={"apiKey": key}).json()
            assert failed["error"] and failed["attempts"][0]["error"]

            receiver.up()
            assert wait_for(lambda: statuses() == Counter({"Sent": len(message_ids)}), 45), statuses()
    finally:
        parley.stop()  # returns once the server has ended: nothing it owed can arrive later
        if receiver:
            receiver.down()
    # What the server recorded: each reply's delivery done (sent, nothing left to retry) after one success.
    recorded = {r["message_id"]: (r["status"], r["successes"]) for r in db_direct.rows(
        parley, "SELECT o.message_id, o.status, SUM(CASE WHEN a.error IS NULL THEN 1 ELSE 0 END) AS successes"
                " FROM outbox o JOIN delivery_attempts a ON a.outbox_id = o.id WHERE o.kind = 'reply'"
                " GROUP BY o.message_id, o.status")}
    assert recorded == {m: ("sent", 1) for m in message_ids}
    assert receiver.bad_signatures == 0
    assert len(receiver.deliveries) == len(message_ids)
    assert set(receiver.deliveries.values()) == {1}, receiver.deliveries
    assert sorted(p["messageId"] for p in receiver.bodies.values()) == sorted(message_ids)


# ---- disk full -------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 16 MB tmpfs mounted for the data directory (root only; skipped where mounting is refused)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill_disk(directory):
    """Write a filler file until the file system refuses; returns its path."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 20, 4096, 1):
            try:
                while f.write(b"\0" * size):
                    pass
            except OSError:
                pass
    return filler


@pytest.mark.sqlite_only("fills the data directory's filesystem, where only SQLite keeps its database")
def test_disk_full_fails_requests_cleanly_loses_nothing_acknowledged_and_recovers(small_disk):
    """Spec §7: "500 Server-side error. The client may retry shortly." (Parley answers 503 UNAVAILABLE:
    a server-side error the client may retry.) docs/design.md#api-decisions: the 200 is sent once the message is durably
    committed. With the disk full, inbound messages fail with 503 in the custom-channel error shape and
    the log says why in one line; every message answered 200 is still there; once space returns, the
    server accepts messages again without a restart."""
    data = small_disk  # the data directory is the mount; the server's log (its parent) is not on it
    parley = start(data)
    key = parley.first_run["api_key"]
    answered, refused = {}, 0
    try:
        with parley.client() as client:
            def send(sid):
                response = client.post(INBOUND, params={"apiKey": key}, json=inbound_body(sid, f"user-{len(sid) % 5}"))
                if response.status_code == 200:
                    answered[sid] = response.json()["messageId"]
                return response

            for n in range(20 * SCALE):
                assert send(f"before-{n}").status_code == 200
            filler = fill_disk(small_disk)
            # Pages already allocated may absorb a few writes; the disk is full once one is refused.
            failures = []
            for n in range(400 * SCALE):
                response = send(f"full-{n}")
                if response.status_code != 200:
                    failures.append(response)
                    if len(failures) >= 5:
                        break
            assert failures, "the full disk never refused a write"
            for response in failures:
                assert response.status_code == 503, response.text
                assert response.json() == {"error": "storage is full; nothing was written, retry later"}
            refused = len(failures)

            filler.unlink()  # space returns
            for n in range(20 * SCALE):
                assert send(f"after-{n}").status_code == 200
            for sid, message_id in answered.items():
                again = client.post(INBOUND, params={"apiKey": key}, json=inbound_body(sid, f"user-{len(sid) % 5}"))
                assert again.status_code == 200 and again.json()["messageId"] == message_id
    finally:
        parley.stop()
    log_text = open(parley.log.name, encoding="utf-8", errors="replace").read()
    assert "database or disk is full" in log_text, "the log should say the storage is full"
    assert "Traceback" not in log_text  # an expected fault, reported in one line, not as a crash
    db_path = data / "parley.db"
    check_consistent(db_path)
    stored = dict(db_rows(db_path, "SELECT external_id, id FROM messages"))
    assert all(stored.get(sid) == message_id for sid, message_id in answered.items())
    assert refused


# ---- storage refusing writes, in process (runs where mounting a tmpfs is not allowed) ----------

def _limit_pages(cx, extra):
    """Let the database grow by `extra` pages only: SQLite then fails writes with SQLITE_FULL."""
    pages = cx.execute("PRAGMA page_count").fetchone()[0]
    cx.execute(f"PRAGMA max_page_count={pages + extra}")


@pytest.mark.sqlite_only("PRAGMA max_page_count fills the SQLite file")
async def test_full_database_answers_503_with_the_reason_and_recovers(api, account, services):
    """Spec §7: "500 Server-side error. The client may retry shortly." docs/design.md#api-decisions "Errors": UNAVAILABLE
    is 503. A full database refuses the write with 503 (custom-channel shape on the inbound endpoint,
    the general envelope elsewhere), keeps what was acknowledged, and accepts writes again as soon as
    there is room, without a restart."""
    key = account["api_key"]
    first = await api.post(INBOUND, inbound_body("full-0", "user-0"), key=key)
    assert first.code == 200
    await services.db.write(_limit_pages, 0)
    big = "x" * 20000  # needs new pages
    refused = await api.post(INBOUND, {"customData": {**inbound_body("full-1", "user-1")["customData"], "body": big}},
                             key=key)
    assert refused.code == 503 and refused.json == {"error": "storage is full; nothing was written, retry later"}
    for n in range(1000):  # small rows fit in free space on existing pages for a while
        contact = await api.post("/v1/contacts", {"firstName": "F" * 200, "phone": f"+1415555{n:04d}"}, key=key)
        if contact.code != 201:
            break
    assert contact.code == 503 and contact.json["error"] == {
        "code": "UNAVAILABLE", "message": "storage is full; nothing was written, retry later"}
    await services.db.write(_limit_pages, 10_000)  # space returns
    again = await api.post(INBOUND, {"customData": {**inbound_body("full-1", "user-1")["customData"], "body": big}},
                           key=key)
    assert again.code == 200
    repeat = await api.post(INBOUND, inbound_body("full-0", "user-0"), key=key)
    assert repeat.json["messageId"] == first.json["messageId"]


def _insert_probe(cx, value):
    cx.execute("CREATE TABLE IF NOT EXISTS probe (v INTEGER)")
    cx.execute("INSERT INTO probe (v) VALUES (?)", (value,))
    return value


def _fails_like_a_full_disk(cx):
    cx.execute("ROLLBACK")  # what SQLite itself may do on SQLITE_FULL
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = sqlite3.SQLITE_FULL
    raise error


@pytest.mark.sqlite_only("SQLite's rollback on SQLITE_FULL in the writer's batch")
async def test_a_transaction_sqlite_rolled_back_fails_the_whole_batch_with_its_own_error(tmp_path):
    """docs/design.md#conventions: a request is answered only after its commit. SQLite may roll the whole transaction
    back on SQLITE_FULL/IOERR: then no write of that batch is durable, every caller is told so with the
    real reason (503 storage is full), and no later call of the batch commits on its own."""
    import asyncio
    from storage.db import Database, StorageUnavailable

    db = await Database(tmp_path / "parley.db").open()
    insert = _insert_probe
    try:
        await db.write(insert, 0)
        outcomes = await asyncio.gather(db.write(insert, 1), db.write(_fails_like_a_full_disk),
                                        db.write(insert, 2), return_exceptions=True)
        assert all(isinstance(o, StorageUnavailable) for o in outcomes), outcomes
        assert outcomes[0].status == 503
        assert await db.read(lambda cx: [r[0] for r in cx.execute("SELECT v FROM probe ORDER BY v")]) == [0]
        assert await db.write(insert, 3) == 3  # the writer carries on
    finally:
        await db.close()
