#!/usr/bin/env python3
"""Parley's composition root: make_app(), and main(), which opens storage, starts the
background tasks, listens (HTTPS, plus the plain-HTTP rejecter), awaits a shutdown signal, drains
and closes. `python server.py COMMAND` is the `parley` command (parley_cli.py)."""
import asyncio
import functools
import gc
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import jinja2
import tornado.ioloop
import tornado.web

import server_record
import settings as settings_module
from handlers import routes, serving_order
from handlers.base import StaticHandler, log_request
from handlers.bodies import BodyBudget, StreamedBodyRouting
from handlers.ui import text as ui_text
from handlers.ui_base import NotFoundPage
from services import accounts, erasure
from services.assignment import Assigner, SeenBeat
from services.bot_recovery import BotRecovery
from services.bot_runner import BotRunner
from services.leases import Lease, release_dead_owners
from services.campaign_runner import CampaignRunner
from services.conversation_status import SnoozeWaker
from services.mail_in import MailImporter
from services.sla import SlaWatcher
from services.delivery import DeliveryWorker
from services.import_limits import ImportLimits
from services.import_runner import ImportWorker
from services.live import Hub
from services.typing import CHANNEL as TYPING_CHANNEL, Typing
from services.event_stream import LongPolls
from services.reports_worker import ReportsWorker
from services.retention import RetentionWorker
from common.ids import new_id
from services.ratelimit import RateLimiter, SharedRateLimiter
from services.secretbox import SecretBox, SecretKeyError
from common.redact import RedactingFormatter
from services.tls import CertificateSource
from connection_guard import ConnectionGuard
from serving import (GuardedHTTPServer, LogThrottle, RejecterApplication, TlsRefusalLog, connection_cap,
                     raise_file_limit)
from storage import shared_facts
from storage.accounts import KEYS_CHANNEL
from storage.db import open_database
from storage.pg_listen import EVENTS_CHANNEL, PgListener

if TYPE_CHECKING:  # the Services' types (services/context.py's Protocol is what services see of it)
    from collections.abc import Callable
    from datetime import datetime

    from storage.postgres_db import PostgresDatabase
    from storage.sqlite_db import Database

log = logging.getLogger("parley")
ROOT = Path(__file__).parent


@dataclass
class Services:
    """What handlers and background tasks share; built by open_services(), closed by close()."""
    settings: settings_module.Settings
    db: "Database | PostgresDatabase"  # storage.db.open_database's
    box: SecretBox
    keys: accounts.KeyRegistry
    limiter: RateLimiter
    delivery: "DeliveryWorker" = None  # the outbox worker; main() starts it, close() stops it
    imports: "ImportWorker" = None  # runs and resumes contact imports; main() starts it, close() stops it
    import_limits: "ImportLimits" = None  # preview readers and drafts an account may hold at once
    campaigns: "CampaignRunner" = None  # hands campaigns' messages to the outbox; main() starts it
    retention: "RetentionWorker" = None  # the periodic cleanup; main() starts it, close() stops it
    snoozes: "SnoozeWaker" = None  # reopens snoozed conversations when their time comes; main() starts it
    reports: "ReportsWorker" = None  # folds new rows into the Reports' summaries; main() starts it
    sla: "SlaWatcher" = None  # breaches SLA waits whose time passed (conversation.sla_breached); main() starts it
    clock: "Callable[[], datetime] | None" = None  # business hours' and the SLA's now (aware); None: the real one
    bot: "BotRunner" = None  # answers inbound messages after their 200; close() lets it finish
    bot_recovery: "BotRecovery" = None  # answers what a dead process left undecided; main() starts it
    assigner: "Assigner" = None  # assigns waiting conversations to agents (one process at a time); main() starts it
    seen: "SeenBeat" = None  # tells the database who has a live page open on this process; main() starts it
    hub: "Hub" = None  # live events to the UI's WebSockets; woken by every commit
    typing: "Typing" = None  # typing indicators between the widget's visitors and the inbox (never stored)
    long_polls: "LongPolls" = None  # GET /v1/events long-polls waiting, bounded per key and per account
    mail_in: "MailImporter" = None  # the email channel's import, a connection per mailbox; main() starts it
    listener: "PgListener" = None  # PostgreSQL: wake-ups from the other processes of the database (and to them)

    async def close(self):
        if self.mail_in is not None:
            await self.mail_in.stop()  # before the bot: no new mail is handed to it
        if self.bot is not None:
            await self.bot.stop()  # first: its replies are outbox rows the delivery worker sends
        if self.hub is not None:
            await self.hub.stop()
        if self.retention is not None:
            await self.retention.stop()
        if self.snoozes is not None:
            await self.snoozes.stop()
        if self.reports is not None:
            await self.reports.stop()
        if self.sla is not None:
            await self.sla.stop()
        if self.bot_recovery is not None:
            await self.bot_recovery.stop()
        for worker in (self.assigner, self.seen):
            if worker is not None:
                await worker.stop()
        if self.campaigns is not None:
            await self.campaigns.stop()  # its last batch commits before the db closes
        if self.imports is not None:
            await self.imports.stop()  # running imports stop after their current batch, resumed at next start
        if self.delivery is not None:
            await self.delivery.stop()  # before the db closes: attempts in flight record their outcome
        if self.listener is not None:
            await self.listener.stop()
        await erasure.stop_rewrites()  # PostgreSQL's rewrite after an erasure needs the database
        await self.db.close()


def secure_data_dir(settings):
    """The data directory 0700 and the database (with its -wal and -shm, which SQLite creates with the
    database's mode) 0600, like secret.key: they hold every conversation. Existing ones are corrected."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(settings.data_dir, 0o700)
    if settings.uses_postgres:
        return  # the database is PostgreSQL's to keep
    os.close(os.open(settings.db_path, os.O_WRONLY | os.O_CREAT, 0o600))  # an empty file is a new database
    for path in (settings.db_path, Path(f"{settings.db_path}-wal"), Path(f"{settings.db_path}-shm")):
        if path.exists():
            os.chmod(path, 0o600)


async def open_services(settings):
    secure_data_dir(settings)
    db = await open_database(settings).open()
    box = SecretBox.from_settings(settings)
    if settings.uses_postgres:
        await check_shared_key(db, box)
    services = Services(settings=settings, db=db, box=box,
                        keys=accounts.KeyRegistry(db, settings.data_dir),
                        limiter=SharedRateLimiter(db) if settings.uses_postgres else RateLimiter())
    services.delivery = DeliveryWorker(services)
    services.imports = ImportWorker(services)
    services.import_limits = ImportLimits(settings)
    services.campaigns = CampaignRunner(services)
    services.retention = RetentionWorker(services)
    services.snoozes = SnoozeWaker(services)
    services.reports = ReportsWorker(services)
    services.sla = SlaWatcher(services)
    services.bot = BotRunner(services)
    services.bot_recovery = BotRecovery(services)
    services.assigner = Assigner(services)
    services.seen = SeenBeat(services)
    services.mail_in = MailImporter(services)
    for worker in (services.imports, services.campaigns, services.retention, services.snoozes, services.reports,
                   services.bot_recovery, services.sla, services.assigner, services.mail_in):
        worker.lease = Lease(db, worker.name, settings.worker_lease_seconds)  # one process runs each at a time
    services.hub = Hub(db, max_per_session=settings.live_sockets_per_session,
                       max_per_account=settings.live_sockets_per_account)
    db.add_commit_listener(services.hub.notify)
    services.typing = Typing(services.hub, db)
    services.long_polls = LongPolls(settings.events_long_polls_per_key, settings.events_long_polls_per_account,
                                    settings.events_long_polls_max)
    if settings.uses_postgres:  # other processes' commits wake this hub, and this one's wake theirs
        def committed_elsewhere():  # and the assigner: a conversation queued or an agent freed over there
            services.hub.notify()
            services.assigner.notify()

        services.listener = PgListener(settings.database_url, {EVENTS_CHANNEL: committed_elsewhere,
                                                               KEYS_CHANNEL: services.keys.forget},
                                       signals={TYPING_CHANNEL: services.typing.received})
        services.typing.elsewhere = functools.partial(services.listener.signal, TYPING_CHANNEL)
        db.add_commit_listener(services.listener.committed)
        services.listener.start()
    return services


async def check_shared_key(db, box):
    """Every process of one database uses one secret key: the first to start records its fingerprint, and a
    process with another key stops here (its cookies would be refused by the others, and the secrets stored
    by them unreadable to it)."""
    stored = await shared_facts.agree(db, "secret_key_fingerprint", box.fingerprint())
    if stored != box.fingerprint():
        await db.close()
        raise SecretKeyError("this database was set up with another secret key: start every server with the same "
                         "--secret-key-file (or the same secret.key in --data-dir)")


class ParleyApplication(StreamedBodyRouting, tornado.web.Application):
    def __init__(self, settings, services):
        self.settings_obj = settings
        self.services = services
        self.inflight = 0
        self.body_budget = BodyBudget(settings.max_buffered_body_bytes)
        # The admin UI's templates (UiHandler.render): autoescaped, strict about undefined names.
        self.jinja = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT / "templates")),
                                       autoescape=True, undefined=jinja2.StrictUndefined)
        ui_text.install(self.jinja)
        super().__init__(
            serving_order(routes()),
            default_handler_class=NotFoundPage,
            log_function=log_request,
            template_path=str(ROOT / "templates"),
            static_path=str(ROOT / "static"),
            static_handler_class=StaticHandler,
            autoescape="xhtml_escape",
            xsrf_cookies=True,
            xsrf_cookie_kwargs={"httponly": True, "secure": True, "samesite": "Lax"},
            cookie_secret=services.box.derive("cookie-secret"),
            # /ws: pings find dead connections (and keep NAT mappings alive); pages send nothing big.
            websocket_ping_interval=30,
            websocket_ping_timeout=30,
            websocket_max_message_size=4096,
        )


def make_app(settings, services):
    return ParleyApplication(settings, services)


# Loggers that a flood of bad connections could fill (one line per refused handshake, per timeout, per
# failed accept): each of their messages is logged at most once per interval, with a count.
THROTTLED_LOGGERS = ("parley.connections", "tornado.general", "tornado.application", "asyncio")
log_throttle = LogThrottle(interval=10.0)


def configure_logging(level):
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])
    logging.getLogger("tornado.access").setLevel(logging.WARNING)
    logging.getLogger("tornado.general").addFilter(TlsRefusalLog())  # first: it rewrites what LogThrottle sees
    # aiosqlite's debug lines quote every statement's arguments: key hashes, session hashes, messages.
    logging.getLogger("aiosqlite").setLevel(max(logging.INFO, logging.getLogger().level))
    for name in THROTTLED_LOGGERS:
        logging.getLogger(name).addFilter(log_throttle)


# File descriptors kept for what is not a client connection: the database and its writer, media files,
# certificates, webhook deliveries (--delivery-concurrency more).
FD_RESERVE = 128


def print_first_run(info):
    """The setup link only: it is spent once and dies in 24 h, so a captured log keeps nothing that lasts."""
    print(json.dumps({"event": "first_run", "ui_url": info["ui_url"], "login": info["login"],
                      "setup_url": info["setup_url"], "expires_at": info["expires_at"],
                      "account_id": info["account_id"]}), flush=True)
    print("\nParley is ready. Open this one-time link to choose the owner's password (it works once,\n"
          f"until {info['expires_at']}); the Settings page then shows the API key.\n"
          f"  setup:    {info['setup_url']}\n  login:    {info['login']}\n", flush=True)


async def main(settings):
    """Open, listen, await SIGTERM/SIGINT, drain, close. Whatever fails once the services are open (a
    port already in use, an unreadable certificate) still closes them: the writer process stops cleanly."""
    if settings.allow_private_webhooks:
        log.warning("--allow-private-webhooks is on: webhook and AI provider URLs may be private, loopback or "
                    "plain http addresses. For local testing only: never in production.")
    services = await open_services(settings)
    servers, tasks, guard, recovery, record = [], [], None, None, None
    try:
        certs = CertificateSource(settings.data_dir, settings.tls_cert, settings.tls_key,
                                  hosts=[urlsplit(settings.base_url).hostname], profile=settings.tls_profile)
        certs.ensure()
        app = make_app(settings, services)
        # Messages stored before this run takes requests that the bot never decided on (a kill, a crash)
        # are answered once serving; the boundary keeps them apart from those this run answers itself.
        recover_before = new_id("msg")
        cap = connection_cap(settings.max_connections, raise_file_limit(),
                             FD_RESERVE + settings.delivery_concurrency)
        guard = ConnectionGuard(cap, socket_share=settings.live_sockets_share)
        app.connection_guard = guard  # /ws asks it whether a WebSocket may take one more connection
        limits = dict(guard=guard, idle_connection_timeout=settings.idle_timeout_seconds,
                      body_timeout=settings.body_timeout_seconds, max_header_size=settings.max_header_bytes,
                      # The largest body any route takes; each route's own limit answers 413 below it.
                      max_body_size=settings.max_media_request_bytes)
        https = GuardedHTTPServer(app, ssl_options=certs.load(),
                                  handshake_timeout=settings.tls_handshake_timeout_seconds, **limits)
        servers.append(https)
        https.listen(settings.port, settings.host)
        if settings.http_port and settings.behind_proxy:
            # The proxy terminates TLS and forwards here; only a proxy on this machine can reach the port,
            # and ApiHandler still refuses anything the proxy did not mark X-Forwarded-Proto: https.
            plain = GuardedHTTPServer(app, xheaders=True, **limits)
            servers.append(plain)
            plain.listen(settings.http_port, "127.0.0.1")
        elif settings.http_port:
            plain = GuardedHTTPServer(RejecterApplication(settings.base_url), **{**limits, "max_body_size": 65536})
            servers.append(plain)
            plain.listen(settings.http_port, settings.host)

        first = await accounts.ensure_owner(services.db, services.box, services.keys, settings.base_url)
        if first:
            print_first_run(first)

        def reload_certificate():
            context = certs.reload_if_changed()
            if context is not None:
                https.ssl_options = context  # new connections get it; open ones keep theirs

        tasks += [tornado.ioloop.PeriodicCallback(reload_certificate, 1000),
                  tornado.ioloop.PeriodicCallback(services.limiter.prune, 60_000),
                  tornado.ioloop.PeriodicCallback(log_throttle.flush, log_throttle.interval * 1000)]
        for task in tasks:
            task.start()
        await release_dead_owners(services.db)  # a killed run's jobs and deliveries resume now, not when they lapse
        services.delivery.start()  # picks up rows left pending by a previous run at once
        services.imports.start()  # resumes imports a previous run left running
        services.campaigns.start()  # resumes running campaigns after their last committed batch
        services.retention.start()  # a first cleanup now, then every --retention-interval-seconds
        services.snoozes.start()  # wakes the snoozes that ended while the server was down at once
        services.reports.start()  # a first fold now (what a previous run left), then every interval
        services.sla.start()  # breaches what came due while the server was down at once
        recovery = asyncio.ensure_future(services.bot.recover(recover_before))
        services.bot_recovery.start()  # and later, what any process left undecided (one process at a time)
        services.assigner.start()  # what waits for an agent now, then whenever something frees one up
        services.seen.start()
        services.mail_in.start()  # each mailbox from its checkpoint: what arrived while the server was down first
        services.hub.start()

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        # What startup made (modules, routes, templates, the models: ~70,000 objects) lives as long as the process:
        # out of the cyclic GC's reach, a full collection is ~3x shorter. Each one stops the event loop, and every
        # request in flight with it (inbound load: ~50 ms of CPU each before, ~15 ms after; bench/README).
        gc.collect()
        gc.freeze()
        record = server_record.record_start(settings)  # what the ops commands of this --data-dir follow
        log.info("listening on https://%s:%d%s", settings.host, settings.port,
                 f" and http://{settings.host}:{settings.http_port} (rejects)" if settings.http_port else "")
        print(json.dumps({"event": "listening", "port": settings.port, "http_port": settings.http_port}),
              flush=True)
        await stop.wait()

        log.info("shutting down: no new connections, waiting for %d request(s) in flight", app.inflight)
        app.draining = True  # /healthz answers 503: a balancer's keep-alive connections move elsewhere
        for server in servers:
            server.stop()
        await services.hub.stop()  # open pages reconnect to the next server and resume from their last event
        deadline = time.monotonic() + settings.shutdown_grace_seconds
        while (app.inflight > 0 or any(s.receiving for s in servers)) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        for task in tasks:
            task.stop()
        if recovery is not None and not recovery.done():
            recovery.cancel()
        for server in servers:
            server.stop()
        if guard is not None:
            guard.abort_all()  # idle, lingering and unfinished connections: nobody is answered on them now
        for server in servers:
            try:
                await asyncio.wait_for(server.close_all_connections(), 2)
            except TimeoutError:
                pass
        await services.close()
        if record is not None:
            server_record.record_stop(settings, record)
    log.info("stopped")


from parley_cli import cli  # noqa: E402 (the CLI calls back into main() and open_services() above)

if __name__ == "__main__":
    sys.exit(cli())
