"""Fixtures that build a real Parley on tmp_path: a real SQLite file (or, with PARLEY_TEST_DATABASE_URL, a
fresh PostgreSQL database per test), the real app, real HTTP."""
import asyncio
import json
import os
import random
import shutil

import hypothesis
import pytest

import server
from services import accounts
from services.campaign_runner import BATCH_MAX, CampaignRunner
from services.delivery import DeliveryWorker
from settings import Settings
from storage import sqlite_db
from tests import pg_databases
from tests.bot_helpers import Provider
from tests.delivery_helpers import Receiver

pytest_plugins = ["tests.ui_fixtures"]  # the UI tests' fixtures, for every module


# Hypothesis (schemathesis's engine): `ci`, the default, draws the same examples on every run, so a red run is
# a finding that reproduces and a green one cannot turn red by chance; `deep` (make faults) draws anew, with
# PARLEY_FUZZ_EXAMPLES raising the examples per operation.
hypothesis.settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis.settings.register_profile("deep", derandomize=False, database=None, print_blob=True)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def database_url(request, monkeypatch):
    """With PARLEY_TEST_DATABASE_URL (a PostgreSQL server URL): a fresh, migrated database for each test that
    has a tmp_path (those are the ones that store anything), also set as PARLEY_DATABASE_URL so that the
    server processes and CLI runs of the test use it. Without the variable: "" (SQLite, as ever)."""
    server_url = os.environ.get(pg_databases.SERVER_URL_VARIABLE)
    if not server_url or "tmp_path" not in request.fixturenames:
        yield ""
        return
    url = pg_databases.create(server_url)
    monkeypatch.setenv("PARLEY_DATABASE_URL", url)
    pg_databases.register(request.getfixturevalue("tmp_path") / "data", url)
    try:
        yield url
    finally:
        pg_databases.release(url)


@pytest.fixture
def settings(request, tmp_path, database_url):
    """The server's settings for a test; a module or test marked settings(name=value, ...) gets those set too
    (a 1 s webhook_timeout_seconds keeps the delivery timeout tests short)."""
    marker = request.node.get_closest_marker("settings")
    return Settings(**{"data_dir": tmp_path / "data", "allow_private_webhooks": True, "http_port": 0,
                       "database_url": database_url, **(marker.kwargs if marker else {})})


@pytest.fixture(scope="session")
def migrated_sqlite_file(tmp_path_factory):
    """A SQLite database with every migration applied, made once per test session (per xdist worker): the
    services fixture starts from a copy instead of migrating a new file for each test (~0.25 s each)."""
    from storage import db
    path = tmp_path_factory.mktemp("template") / "parley.db"
    cx = db.connect_sync(path)
    try:
        db.migrate(cx)
        cx.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file: copying it is enough
    finally:
        cx.close()
    return path


@pytest.fixture
def services(request, io_loop, settings, monkeypatch):
    """The app's services in this process. On SQLite: from a copy of the migrated template, with the writer
    on a thread (storage/writer_supervisor.py WriterThread) unless the test is marked writer_process: the
    tests whose subject is the writer process itself (a kill, a stall, its pid) start it as the server does."""
    if not settings.uses_postgres:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        if not settings.db_path.exists():
            shutil.copyfile(request.getfixturevalue("migrated_sqlite_file"), settings.db_path)
        if not request.node.get_closest_marker("writer_process"):
            monkeypatch.setattr(sqlite_db.Database, "writer_in_thread", True)
    svc = io_loop.run_sync(lambda: server.open_services(settings))
    yield svc
    io_loop.run_sync(svc.close, timeout=30)


@pytest.fixture
def app(settings, services):
    return server.make_app(settings, services)


@pytest.fixture
def make_account(io_loop, services):
    """make_account(type="standard", agency_email=None) -> {"account_id", "api_key", "email", ...}"""
    counter = iter(range(1, 10_000))

    def make(account_type="standard", agency_email=None, name=None):
        n = next(counter)
        return io_loop.run_sync(lambda: accounts.create_account(
            services.db, services.box, services.keys, name=name or f"Account {n}",
            email=f"owner{n}-{account_type}@example.com", account_type=account_type,
            agency_email=agency_email, with_user=False))
    return make


@pytest.fixture
def account(make_account):
    return make_account()


@pytest.fixture
def other_account(make_account):
    """A second, unrelated account: for tenancy tests (it must see, change and learn nothing)."""
    return make_account()


# ---- agencies and sub-accounts (the credits, sub-accounts and auto-recharge tests) ----------------

@pytest.fixture
def agency(make_account):
    return make_account("agency")


@pytest.fixture
def sub(make_account, agency):
    """A sub-account of ``agency``."""
    return make_account(agency_email=agency["email"])


@pytest.fixture
def other_agency(make_account):
    return make_account("agency")


@pytest.fixture
def other_sub(make_account, other_agency):
    """A sub-account of another agency: ``agency`` must not reach it."""
    return make_account(agency_email=other_agency["email"])


class Api:
    """JSON calls against the in-process server: api.post("/v1/contacts", {...}, key=...)."""

    def __init__(self, client):
        self.client = client

    async def call(self, method, path, body=None, *, key=None, headers=None, raw=None, query_key=True):
        headers = dict(headers or {})
        if key and query_key:
            path += ("&" if "?" in path else "?") + "apiKey=" + key
        elif key:
            headers["x-api-key"] = key
        data = raw
        if body is not None:
            data = json.dumps(body)
            headers.setdefault("Content-Type", "application/json")
        if data is None and method in ("POST", "PUT", "PATCH"):
            data = ""
        response = await self.client.fetch(path, method=method, body=data, headers=headers,
                                           raise_error=False, allow_nonstandard_methods=True)
        # A CSV export's answer is no JSON.
        is_json = "json" in response.headers.get("Content-Type", "application/json")
        response.json = json.loads(response.body) if response.body and is_json else None
        return response

    async def get(self, path, **kw):
        return await self.call("GET", path, **kw)

    async def post(self, path, body=None, **kw):
        return await self.call("POST", path, body, **kw)

    async def patch(self, path, body=None, **kw):
        return await self.call("PATCH", path, body, **kw)

    async def delete(self, path, **kw):
        return await self.call("DELETE", path, **kw)


@pytest.fixture
def receiver(io_loop):
    """A real local HTTP server recording the webhooks it gets (tests/delivery_helpers.py Receiver)."""
    r = Receiver()

    async def start():
        r.start()
    io_loop.run_sync(start)
    yield r
    io_loop.run_sync(r.close)


@pytest.fixture
def workers(io_loop, services):
    """make(services=..., **kw) -> a DeliveryWorker with a seeded jitter; all stopped at teardown."""
    made = []

    def make(svc=None, **kw):
        kw.setdefault("rng", random.Random(7))
        worker = DeliveryWorker(svc or services, **kw)
        made.append(worker)
        return worker
    yield make
    for worker in made:
        io_loop.run_sync(worker.stop)


@pytest.fixture
def worker(io_loop, services):
    """A delivery worker the test drives (run_due), with a seeded jitter."""
    w = DeliveryWorker(services, rng=random.Random(7))
    yield w
    io_loop.run_sync(w.stop)


@pytest.fixture
def runner(services):
    """A runner whose clock the test moves (its buckets fill only when the test says time passed)."""
    clock = {"now": 1000.0}
    r = CampaignRunner(services, clock=lambda: clock["now"], batch_size=BATCH_MAX)
    r.clock_state = clock
    return r


@pytest.fixture
def provider(io_loop):
    """A real local chat-completions server for the bot (tests/bot_helpers.py Provider)."""
    p = io_loop.run_sync(lambda: asyncio.sleep(0, Provider()))
    yield p
    io_loop.run_sync(p.close)


@pytest.fixture
def api(http_server_client):
    return Api(http_server_client)


@pytest.fixture
def imap_server():
    """A real IMAP server with IDLE (pymap's in-memory demo mailbox) on a loopback port (tests/mail_server.py)."""
    from tests.mail_server import ImapServer
    server = ImapServer().start()
    yield server
    server.stop()


@pytest.fixture
def mail_server():
    """A real SMTP server (aiosmtpd) on a loopback port, keeping what it receives (tests/mail_server.py)."""
    from tests.mail_server import MailServer  # imported here: only the email tests load aiosmtpd
    server = MailServer().start()
    yield server
    server.stop()


def stores_nothing(item):
    """A test with no data directory (neither tmp_path nor tmp_path_factory in its fixtures) gets no database
    (database_url above, pg_databases.env_for): it runs the same on both halves, so the PostgreSQL half
    leaves it to the SQLite half (docs/testing.md)."""
    return not {"tmp_path", "tmp_path_factory"} & set(getattr(item, "fixturenames", ()))


def browser_only(item):
    """A Chromium test checks what a browser shows and does; the pages come from the same services on both
    databases, and the in-process UI tests (FormClient) and the end-to-end API tests run on PostgreSQL too, so the
    PostgreSQL half leaves these to the SQLite half unless marked postgres_too (docs/testing.md)."""
    return "chromium" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("postgres_too")


# The modules that take longest (the --durations of CI runs: a server process, a browser, a fuzzer or a kill -9),
# longest first. They run before the rest: xdist hands each worker consecutive tests in collection order, and a
# long test started last keeps one worker busy while the others have nothing left (longest first fills the end
# with the short tests). A module missing here is only run later, never skipped.
RUN_FIRST = ("test_openapi", "test_accessibility", "test_server_e2e", "test_contact_import_e2e", "test_scale_out_e2e",
             "test_postgres_faults", "test_campaigns_e2e", "test_faults", "test_ui_edges_e2e", "test_users_ui",
             "test_inbox_e2e", "test_bot_e2e", "test_limits", "test_parley_cli", "test_campaigns_ui",
             "test_widget_e2e", "test_tls", "test_day2_access_ui", "test_docs_page", "test_team_inbox_e2e")


def run_first_rank(item):
    module = item.module.__name__.rsplit(".", 1)[-1] if getattr(item, "module", None) else ""
    return RUN_FIRST.index(module) if module in RUN_FIRST else len(RUN_FIRST)


def pytest_collection_modifyitems(config, items):
    """sqlite_only tests are skipped on PostgreSQL, postgres_only ones on SQLite, each with its reason; on
    PostgreSQL, the tests that store nothing and the browser's are left out (they ran in the SQLite half). The
    RUN_FIRST modules go first (a stable sort: each module's tests stay together and in their order)."""
    items.sort(key=run_first_rank)
    on_postgres = bool(os.environ.get("PARLEY_TEST_DATABASE_URL"))
    if on_postgres:
        kept = [item for item in items if item.get_closest_marker("postgres_only")
                or not (stores_nothing(item) or browser_only(item))]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
    for item in items:
        marker = item.get_closest_marker("sqlite_only")
        if marker and on_postgres:
            reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "SQLite by nature")
            item.add_marker(pytest.mark.skip(reason=f"SQLite only: {reason}"))
        if item.get_closest_marker("postgres_only") and not on_postgres:
            item.add_marker(pytest.mark.skip(reason="PostgreSQL only: set PARLEY_TEST_DATABASE_URL "
                                                    "(make test-postgres)"))
