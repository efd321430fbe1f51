"""Several processes on one database (issue 20), in one process: worker leases, the shared secret key, the
health check. The multi-process test on PostgreSQL is tests/test_scale_out_e2e.py."""
import asyncio
from datetime import timedelta
import os
import socket
import subprocess
import time

import pytest
from tornado.httpclient import AsyncHTTPClient
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

import server
from common.errors import Unauthorized
from common.version import VERSION
from services import accounts, keys
from services import leases
from services.leases import Lease
from services.ratelimit import SharedRateLimiter
from services.secretbox import SecretBox, SecretKeyError
from services.worker_loop import WorkerLoop
from settings import Settings
from common.ids import iso, utcnow
from storage import delivery as delivery_store
from storage import leases as lease_store
from tests import db_direct
from tests.delivery_helpers import queue_reply
from tests.ui_helpers import PASSWORD, FormClient
from tests.waiting import until
from tests.process_helpers import second_process


def test_a_lease_has_one_owner_and_is_taken_over_when_it_lapses(io_loop, services):
    db = services.db
    first, second = Lease(db, "job", 30, owner="a"), Lease(db, "job", 30, owner="b")

    async def run():
        assert await first.hold() and first.held
        assert not await second.hold() and not second.held
        second._retry_at = 0  # tests: no pause between tries
        assert not await second.hold()
        await lease_store.expire(db, "job")  # the owner died: nobody renews
        first._renew_at = second._retry_at = 0  # (no waiting between tries in a test)
        assert await second.hold()
        assert not await first.hold() and not first.held  # the old owner finds out and stops
        await second.release()
        first._retry_at = 0
        assert await first.hold()  # a released lease is free at once
    io_loop.run_sync(run)


def test_a_restart_frees_at_once_what_a_dead_process_of_this_machine_held(io_loop, services, account):
    """A killed server's leases and delivery claims lapse only after --worker-lease-seconds; at start, a process
    frees those of processes of the same machine and pid namespace that are gone (services/leases.py dead_here),
    and nothing of a process that may still run: one alive, on another host or namespace, or named without one."""
    db, host, here = services.db, socket.gethostname(), leases.PROCESS_ID.rpartition("@")[2]
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = f"{host}:{gone.pid}:0a0b0c@{here}"
    alive = [f"{host}:{os.getppid()}:0a0b0c@{here}", f"elsewhere:{gone.pid}:0a0b0c@{here}",
             f"{host}:{gone.pid}:0a0b0c", f"{host}:{gone.pid}:0a0b0c@00000000", leases.PROCESS_ID]
    assert here and leases.dead_here(dead) and not any(leases.dead_here(owner) for owner in alive)

    async def run():
        for number, owner in enumerate([dead, *alive]):
            assert await Lease(db, f"job-{number}", 30, owner=owner).hold()
        message_id, _ = await queue_reply(services, account)  # an outbox row the dead process was delivering
        outbox_id = (await delivery_store.get_outbox_for_message(db, account["account_id"], message_id))["id"]
        now = utcnow()
        assert await delivery_store.claim(db, [outbox_id], dead, iso(now), iso(now + timedelta(minutes=5))) == \
            [outbox_id]
        assert await leases.release_dead_owners(db) == [dead]
        assert sorted(await lease_store.owners(db)) == sorted(alive)  # the dead one's claim is gone too
        assert await Lease(db, "job-0", 30, owner="someone new").hold()  # free now, not in 30 s
        return outbox_id
    outbox_id = io_loop.run_sync(run)
    assert db_direct.value(services, "SELECT claimed_by FROM outbox WHERE id = ?", outbox_id) is None


class Counting(WorkerLoop):
    name = "counting"
    poll_seconds = 0.01

    def __init__(self):
        super().__init__()
        self.rounds = 0

    async def round(self):
        self.rounds += 1


def test_only_the_lease_owner_runs_rounds(io_loop, services):
    async def run():
        owner, other = Counting(), Counting()
        owner.lease = Lease(services.db, "counting", 3, owner="a")
        other.lease = Lease(services.db, "counting", 3, owner="b")
        owner.start()
        while not owner.rounds:
            await asyncio.sleep(0.01)
        other.start()
        while not other.lease._retry_at:  # it asked for the lease and was refused: its loop decided
            await asyncio.sleep(0.01)
        assert owner.rounds > 0 and other.rounds == 0
        await owner.stop()  # gives the lease up: the other takes over within its next try
        for _ in range(100):
            if other.rounds:
                break
            await asyncio.sleep(0.05)
        await other.stop()
        assert other.rounds > 0
    io_loop.run_sync(run, timeout=20)


def test_every_background_job_has_a_lease(services):
    for worker in (services.campaigns, services.imports, services.retention, services.snoozes, services.reports,
                   services.bot_recovery):
        assert worker.lease is not None and worker.lease.name == worker.name
    assert services.delivery.lease is None  # deliveries are claimed row by row instead


def test_secret_key_file_is_shared_and_never_made_up(tmp_path):
    key_file = tmp_path / "shared.key"
    first = SecretBox.from_data_dir(tmp_path / "one")
    key_file.write_bytes((tmp_path / "one" / "secret.key").read_bytes())
    other = SecretBox.from_settings(Settings(data_dir=tmp_path / "two", secret_key_file=key_file))
    assert other.derive("cookie-secret") == first.derive("cookie-secret")
    assert other.decrypt(first.encrypt("whsec")) == "whsec"
    assert not (tmp_path / "two" / "secret.key").exists()
    with pytest.raises(SecretKeyError, match="no such file"):
        SecretBox.from_settings(Settings(data_dir=tmp_path / "two", secret_key_file=tmp_path / "missing.key"))


@pytest.mark.postgres_only
def test_a_process_with_another_key_is_refused(io_loop, services, settings, tmp_path):
    (tmp_path / "other.key").write_bytes(b"x" * 43 + b"=")
    other = settings.model_copy(update={"secret_key_file": tmp_path / "other.key"})
    with pytest.raises(SecretKeyError, match="another secret key"):
        io_loop.run_sync(lambda: server.open_services(other))
    same = settings.model_copy(update={"data_dir": tmp_path / "elsewhere",
                                       "secret_key_file": settings.data_dir / "secret.key"})
    opened = io_loop.run_sync(lambda: server.open_services(same))  # the same key, from elsewhere: accepted
    io_loop.run_sync(opened.close)


def test_healthz(io_loop, api, app, services):
    async def run():
        ok = await api.get("/healthz")
        assert ok.code == 200 and ok.json == {"status": "ok", "version": VERSION}  # issue 43 §2: the version
        app.draining = True
        draining = await api.get("/healthz")
        assert draining.code == 503 and draining.json["status"] == "unavailable"
        app.draining = False
    io_loop.run_sync(run)


@pytest.mark.postgres_only
def test_a_commit_in_one_process_wakes_the_live_hub_of_another(io_loop, services, settings, tmp_path, account):
    b = second_process(io_loop, settings, tmp_path)
    woken = []
    services.listener.handlers["parley_events"] = lambda: woken.append(1)

    async def run():
        await services.listener.connected.wait()
        await b.listener.connected.wait()
        await accounts.update_settings(b.db, account["account_id"], {"customChannelWebhookUrl": "https://x.test/"})
        assert await until(lambda: woken)
    try:
        io_loop.run_sync(run)
    finally:
        io_loop.run_sync(b.close)


@pytest.mark.postgres_only
def test_a_key_rotated_in_one_process_fails_at_once_in_another(io_loop, services, settings, tmp_path, account):
    b = second_process(io_loop, settings, tmp_path)
    key_hash = keys.hash_api_key(account["api_key"])

    async def run():
        await services.listener.connected.wait()
        assert (await services.keys.principal_for(key_hash)).account_id == account["account_id"]  # cached now
        await accounts.rotate_key(b.db, b.keys, account["account_id"])
        assert await until(lambda: services.listener.received)
        with pytest.raises(Unauthorized):
            await services.keys.principal_for(key_hash)
    try:
        io_loop.run_sync(run)
    finally:
        io_loop.run_sync(b.close)


@pytest.mark.postgres_only
def test_the_api_rate_limit_is_one_limit_for_every_process(io_loop, services):
    first, second = SharedRateLimiter(services.db), SharedRateLimiter(services.db)  # two processes

    async def run():
        answers = [await (first if n % 2 else second).hit_shared("key-hash", 10) for n in range(15)]
        allowed = [a for a, _ in answers]
        assert allowed == [True] * 10 + [False] * 5
        assert answers[9][1]["X-RateLimit-Remaining"] == "0" and answers[10][1]["Retry-After"] == "6"
        assert (await first.hit_shared("other key", 10))[0]  # keys are independent
        assert await first.prune_shared() == 0  # budgets not full again yet: kept
    io_loop.run_sync(run)


class _Served:
    """One process's app on its own port, fetched by path like pytest-tornado's http_server_client."""

    def __init__(self, settings, services):
        sock, self.port = bind_unused_port()
        self.server = HTTPServer(server.make_app(settings, services))
        self.server.add_sockets([sock])
        self.http = AsyncHTTPClient(force_instance=True)

    async def fetch(self, path, **kw):
        return await self.http.fetch(f"http://127.0.0.1:{self.port}{path}", **kw)

    def close(self):
        self.http.close()
        self.server.stop()


@pytest.mark.postgres_only
def test_sign_in_attempts_are_limited_once_for_every_process(io_loop, services, settings, tmp_path):
    """Ten attempts per email and address in a burst, whichever process answers them (issue 36 item 9): per
    process, each of two let ten through."""
    b = second_process(io_loop, settings, tmp_path)
    io_loop.run_sync(lambda: accounts.create_account(services.db, services.box, services.keys, name="Acme",
                                                     email="owner@acme.example", password=PASSWORD))
    served = [_Served(settings, services), _Served(settings.model_copy(update={"data_dir": tmp_path / "host-b"}), b)]
    browsers = [FormClient(s) for s in served]

    async def run():
        codes, started = [], time.monotonic()
        while 429 not in codes and len(codes) < 20:
            browser = browsers[len(codes) % 2]
            await browser.get("/login")
            codes.append((await browser.post("/login", {"email": "owner@acme.example", "password": "guess"})).code)
        earned = int((time.monotonic() - started) / 6)  # one attempt every 6 s is earned back
        assert 10 <= codes.index(429) <= 10 + earned and set(codes[:-1]) == {401}, (codes, earned)
    try:
        io_loop.run_sync(run, timeout=120)
    finally:
        for s in served:
            s.close()
        io_loop.run_sync(b.close)
