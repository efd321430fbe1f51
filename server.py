#!/usr/bin/env python3
"""Parley's composition root: the CLI, make_app(), and main(), which opens storage, starts the
background tasks, listens (HTTPS, plus the plain-HTTP rejecter), awaits a shutdown signal, drains
and closes."""
import argparse
import asyncio
import json
import logging
import os
import signal
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import jinja2
import tornado.ioloop
import tornado.web

import settings as settings_module
from handlers import routes
from handlers.base import NotFoundHandler, StaticHandler, log_request
from handlers.bodies import BodyBudget, StreamedBodyRouting
from services import accounts, contact_import, import_runner, one_time_links
from services.bot import BotRunner
from services.campaign_runner import CampaignRunner
from services.delivery import DeliveryWorker
from services.import_runner import ImportWorker
from services.live import Hub
from services.retention import RetentionWorker
from common.errors import DomainError, NotFound
from common.ids import new_id
from services.ratelimit import RateLimiter
from services.secretbox import SecretBox
from services.tls import CertificateSource
from serving import (ConnectionGuard, GuardedHTTPServer, LogThrottle, RejecterApplication, connection_cap,
                     raise_file_limit)
from storage.db import Database, connect_sync

log = logging.getLogger("parley")
ROOT = Path(__file__).parent


@dataclass
class Services:
    """What handlers and background tasks share; built by open_services(), closed by close()."""
    settings: settings_module.Settings
    db: Database
    box: SecretBox
    keys: accounts.KeyRegistry
    limiter: RateLimiter
    delivery: "DeliveryWorker" = None  # the outbox worker; main() starts it, close() stops it
    imports: "ImportWorker" = None  # runs and resumes contact imports; main() starts it, close() stops it
    campaigns: "CampaignRunner" = None  # hands campaigns' messages to the outbox; main() starts it
    retention: "RetentionWorker" = None  # the periodic cleanup; main() starts it, close() stops it
    bot: "BotRunner" = None  # answers inbound messages after their 200; close() lets it finish
    hub: "Hub" = None  # live events to the UI's WebSockets; woken by every commit

    async def close(self):
        if self.bot is not None:
            await self.bot.stop()  # first: its replies are outbox rows the delivery worker sends
        if self.hub is not None:
            await self.hub.stop()
        if self.retention is not None:
            await self.retention.stop()
        if self.campaigns is not None:
            await self.campaigns.stop()  # its last batch commits before the db closes
        if self.imports is not None:
            await self.imports.stop()  # running imports stop after their current batch, resumed at next start
        if self.delivery is not None:
            await self.delivery.stop()  # before the db closes: attempts in flight record their outcome
        await self.db.close()


def secure_data_dir(settings):
    """The data directory 0700 and the database (with its -wal and -shm, which SQLite creates with the
    database's mode) 0600, like secret.key: they hold every conversation. Existing ones are corrected."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(settings.data_dir, 0o700)
    os.close(os.open(settings.db_path, os.O_WRONLY | os.O_CREAT, 0o600))  # an empty file is a new database
    for path in (settings.db_path, Path(f"{settings.db_path}-wal"), Path(f"{settings.db_path}-shm")):
        if path.exists():
            os.chmod(path, 0o600)


async def open_services(settings):
    secure_data_dir(settings)
    db = await Database(settings.db_path, max_pending=settings.write_queue_limit,
                        stall_seconds=settings.writer_stall_seconds).open()
    services = Services(settings=settings, db=db, box=SecretBox.from_data_dir(settings.data_dir),
                        keys=accounts.KeyRegistry(db, settings.data_dir), limiter=RateLimiter())
    services.delivery = DeliveryWorker(services)
    services.imports = ImportWorker(services)
    services.campaigns = CampaignRunner(services)
    services.retention = RetentionWorker(services)
    services.bot = BotRunner(services)
    services.hub = Hub(db)
    db.add_commit_listener(services.hub.notify)
    return services


class ParleyApplication(StreamedBodyRouting, tornado.web.Application):
    def __init__(self, settings, services):
        self.settings_obj = settings
        self.services = services
        self.inflight = 0
        self.body_budget = BodyBudget(settings.max_buffered_body_bytes)
        # The admin UI's templates (UiHandler.render): autoescaped, strict about undefined names.
        self.jinja = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT / "templates")),
                                       autoescape=True, undefined=jinja2.StrictUndefined)
        super().__init__(
            routes(),
            default_handler_class=NotFoundHandler,
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
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("tornado.access").setLevel(logging.WARNING)
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
    services = await open_services(settings)
    servers, tasks, guard, recovery = [], [], None, None
    try:
        certs = CertificateSource(settings.data_dir, settings.tls_cert, settings.tls_key,
                                  hosts=[urlsplit(settings.base_url).hostname])
        certs.ensure()
        app = make_app(settings, services)
        # Messages stored before this run takes requests that the bot never decided on (a kill, a crash)
        # are answered once serving; the boundary keeps them apart from those this run answers itself.
        recover_before = new_id("msg")
        cap = connection_cap(settings.max_connections, raise_file_limit(),
                             FD_RESERVE + settings.delivery_concurrency)
        guard = ConnectionGuard(cap)
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
        services.delivery.start()  # picks up rows left pending by a previous run at once
        services.imports.start()  # resumes imports a previous run left running
        services.campaigns.start()  # resumes running campaigns after their last committed batch
        services.retention.start()  # a first cleanup now, then every --retention-interval-seconds
        recovery = asyncio.ensure_future(services.bot.recover(recover_before))
        services.hub.start()

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        log.info("listening on https://%s:%d%s", settings.host, settings.port,
                 f" and http://{settings.host}:{settings.http_port} (rejects)" if settings.http_port else "")
        print(json.dumps({"event": "listening", "port": settings.port, "http_port": settings.http_port}),
              flush=True)
        await stop.wait()

        log.info("shutting down: no new connections, waiting for %d request(s) in flight", app.inflight)
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
            except asyncio.TimeoutError:
                pass
        await services.close()
    log.info("stopped")


# ---- ops commands: each prints one JSON object on stdout -------------------------------------

async def _with_services(settings, fn):
    services = await open_services(settings)
    try:
        return await fn(services)
    finally:
        await services.close()


def cmd_create_account(settings, args):
    """Without --password the output carries a one-time setup link (the owner chooses the password), never
    a password; --password is for scripts."""
    async def run(s):
        created = await accounts.create_account(
            s.db, s.box, s.keys, name=args.name, email=args.email,
            account_type="agency" if args.agency else "standard", agency_email=args.agency_email,
            password=args.password)
        out = {k: created[k] for k in ("account_id", "email", "api_key", "type")}
        if not args.password:
            link = await one_time_links.issue_for_account_owner(s.db, settings.base_url, created["account_id"],
                                                               "setup")
            out.update(setupUrl=link["url"], expiresAt=link["expiresAt"])
        return out
    return asyncio.run(_with_services(settings, run))


def cmd_reset_password(settings, args):
    """A one-time sign-in link for the user; using it ends the user's other sessions and asks for a new password."""
    return asyncio.run(_with_services(settings, lambda s: one_time_links.issue_reset_for_email(
        s.db, settings.base_url, args.email)))


def cmd_rotate_key(settings, args):
    async def run(s):
        account = await accounts.get_account_by_email(s.db, args.email)
        if account is None:
            raise SystemExit(json.dumps({"error": f"no account with email {args.email}"}))
        return {"account_id": account["id"], "api_key": await accounts.rotate_key(s.db, s.keys, account["id"])}
    return asyncio.run(_with_services(settings, run))


def cmd_backup(settings, args):
    """Online backup through SQLite's backup API: consistent even while the server writes."""
    out = Path(args.out)
    if not settings.db_path.exists():
        raise SystemExit(json.dumps({"error": f"no database at {settings.db_path}"}))
    source = connect_sync(settings.db_path)
    os.close(os.open(out, os.O_WRONLY | os.O_CREAT, 0o600))  # a copy of everything: private like the original
    os.chmod(out, 0o600)
    target = sqlite3.connect(str(out))
    try:
        source.backup(target)
        version = target.execute("PRAGMA user_version").fetchone()[0]
    finally:
        target.close()
        source.close()
    return {"backup": str(out), "bytes": out.stat().st_size, "schema_version": version}


class ProgressBar:
    """import-contacts' progress on a terminal (stderr), redrawn at most 5 times a second."""

    WIDTH = 30

    def __init__(self, stream):
        self.stream, self.drawn = stream, 0.0

    def __call__(self, job):
        p = contact_import.progress(job)
        if p["status"] == "running" and time.monotonic() - self.drawn < 0.2:
            return
        self.drawn = time.monotonic()
        filled = int(p["percent"] * self.WIDTH / 100)
        rate = f"  {p['rowsPerSecond']:.0f} rows/s" if p["rowsPerSecond"] else ""
        left = f", {p['secondsLeft']} s left" if p["secondsLeft"] is not None else ""
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {p['percent']:5.1f} %  {p['rowsRead']} rows: "
                          f"{p['created']} created, {p['matched']} matched, {p['failed']} failed{rate}{left}\x1b[K")
        self.stream.flush()

    def close(self):
        self.stream.write("\n")
        self.stream.flush()


def cmd_import_contacts(settings, args):
    """The Contacts > Import job for operators, run in this process (its writer process shares the database
    with a running server's); the summary's status says whether it completed."""
    async def run(s):
        account = await accounts.get_account_by_email(s.db, args.email)
        if account is None:
            raise NotFound(f"no account with email {args.email}")
        runner = import_runner.cli_runner()
        job = await contact_import.create_for_cli(s, account["id"], args.file, runner, list_id=args.list,
                                                  region=args.default_country, overrides=args.map or ())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        bar = ProgressBar(sys.stderr) if sys.stderr.isatty() else None
        try:
            job = await import_runner.run_job(s, job, runner, should_stop=stop.is_set, on_progress=bar,
                                              pause=import_runner.CLI_PAUSE_SECONDS)
        finally:
            if bar:
                bar.close()
        if job["status"] == "running":  # stopped by a signal: what is committed stays
            job = await contact_import.interrupt(s, job, f"stopped by the operator after row {job['row_number']}")
        report = contact_import.report_path(settings.data_dir, job["id"])
        return {"import_id": job["id"], "status": job["status"], "rows": job["rows_read"], "created": job["created"],
                "matched": job["matched"], "failed": job["failed"],
                "error_report": str(report.resolve()) if job["errors_bytes"] else None, "message": job["message"]}
    return asyncio.run(_with_services(settings, run))


def build_parser():
    parser = argparse.ArgumentParser(prog="server.py", description="Parley: self-hosted customer messaging.")
    sub = parser.add_subparsers(dest="command")
    commands = {
        "serve": sub.add_parser("serve", help="run the HTTPS server (the default)"),
        "create-account": sub.add_parser("create-account", help="create an account; prints its API key once"),
        "reset-password": sub.add_parser("reset-password", help="print a one-time sign-in link for a user, who then "
                                                                "chooses a new password"),
        "rotate-key": sub.add_parser("rotate-key", help="generate a new API key; the old one dies at once"),
        "backup": sub.add_parser("backup", help="online backup of the database to OUT"),
        "import-contacts": sub.add_parser("import-contacts", help="import contacts from a CSV file into an account"),
    }
    c = commands["create-account"]
    c.add_argument("--name", required=True)
    c.add_argument("--email", required=True)
    c.add_argument("--agency", action="store_true", help="an agency account (may grant credits)")
    c.add_argument("--agency-email", help="make a sub-account of the agency with this email")
    c.add_argument("--password", help="UI password, for scripts (when omitted, a one-time setup link is printed)")
    commands["reset-password"].add_argument("--email", required=True, help="the user's email")
    commands["rotate-key"].add_argument("--email", required=True)
    commands["backup"].add_argument("out", metavar="OUT")
    c = commands["import-contacts"]
    c.add_argument("--email", required=True, help="the account's email")
    c.add_argument("file", metavar="FILE.csv", help="UTF-8 CSV with a header row; comma or semicolon separated")
    c.add_argument("--list", metavar="LIST_ID", help="add every imported contact to this list of the account")
    c.add_argument("--default-country", metavar="CC", help="ISO country code for phone numbers without +")
    c.add_argument("--map", action="append", metavar="FIELD=COLUMN",
                   help="firstName, lastName, phone or email = a column's name or 1-based number (empty: skip "
                        "the field); repeatable; the rest is guessed from the header")
    for p in commands.values():
        settings_module.add_arguments(p)
    return parser


def cli(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["serve", *argv]
    args = parser.parse_args(argv)
    try:
        settings = settings_module.from_namespace(args)
    except Exception as exc:
        parser.error(str(exc))
    configure_logging(settings.log_level)
    os.umask(0o077)  # whatever this process and its writer create (media, certificates, backups) is private
    if args.command == "serve":
        try:
            asyncio.run(main(settings))
        except OSError as exc:  # a port in use, a certificate that cannot be read: one line, no traceback
            log.error("cannot serve: %s", exc)
            return 1
        return 0
    runner = {"create-account": cmd_create_account, "reset-password": cmd_reset_password,
              "rotate-key": cmd_rotate_key, "backup": cmd_backup,
              "import-contacts": cmd_import_contacts}
    try:
        result = runner[args.command](settings, args)
    except DomainError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps(result))
    return 0 if result.get("status", "completed") == "completed" else 1  # an import that did not complete


if __name__ == "__main__":
    sys.exit(cli())
