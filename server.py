#!/usr/bin/env python3
"""Parley's composition root: the CLI, make_app(), and main(), which opens storage, starts the
background tasks, listens (HTTPS, plus the plain-HTTP rejecter), awaits a shutdown signal, drains
and closes."""
import argparse
import asyncio
import json
import logging
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
from handlers.base import NotFoundHandler, log_request
from services import accounts
from services.delivery import DeliveryWorker
from services.live import Hub, prune_events
from common.errors import DomainError
from services.ratelimit import RateLimiter
from services.secretbox import SecretBox
from services.tls import CertificateSource
from serving import DrainingHTTPServer, RejecterApplication
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
    hub: "Hub" = None  # live events to the UI's WebSockets; woken by every commit

    async def close(self):
        if self.hub is not None:
            await self.hub.stop()
        if self.delivery is not None:
            await self.delivery.stop()  # before the db closes: attempts in flight record their outcome
        await self.db.close()


async def open_services(settings):
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = await Database(settings.db_path).open()
    services = Services(settings=settings, db=db, box=SecretBox.from_data_dir(settings.data_dir),
                        keys=accounts.KeyRegistry(db, settings.data_dir), limiter=RateLimiter())
    services.delivery = DeliveryWorker(services)
    services.hub = Hub(db)
    db.add_commit_listener(services.hub.notify)
    return services


class ParleyApplication(tornado.web.Application):
    def __init__(self, settings, services):
        self.settings_obj = settings
        self.services = services
        self.inflight = 0
        # The admin UI's templates (UiHandler.render): autoescaped, strict about undefined names.
        self.jinja = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT / "templates")),
                                       autoescape=True, undefined=jinja2.StrictUndefined)
        super().__init__(
            routes(),
            default_handler_class=NotFoundHandler,
            log_function=log_request,
            template_path=str(ROOT / "templates"),
            static_path=str(ROOT / "static"),
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


def configure_logging(level):
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("tornado.access").setLevel(logging.WARNING)


def print_first_run(info):
    print(json.dumps({"event": "first_run", "ui_url": info["ui_url"], "login": info["login"],
                      "password": info["password"], "api_key": info["api_key"],
                      "account_id": info["account_id"]}), flush=True)
    print("\nParley is ready. These credentials are shown once; keep them now.\n"
          f"  UI:       {info['ui_url']}\n  login:    {info['login']}\n  password: {info['password']}\n"
          f"  API key:  {info['api_key']}\n"
          f"  try:      curl -k \"{info['ui_url']}v1/account?apiKey={info['api_key']}\"\n", flush=True)


async def main(settings):
    """Open, listen, await SIGTERM/SIGINT, drain, close."""
    services = await open_services(settings)
    certs = CertificateSource(settings.data_dir, settings.tls_cert, settings.tls_key,
                              hosts=[urlsplit(settings.base_url).hostname])
    certs.ensure()
    app = make_app(settings, services)
    # Bodies above this are cut by Tornado itself; below it handlers answer 413 in our error shape.
    body_cap = settings.max_media_request_bytes
    https = DrainingHTTPServer(app, ssl_options=certs.load(), max_body_size=body_cap)
    https.listen(settings.port, settings.host)
    servers = [https]
    if settings.http_port and settings.behind_proxy:
        # The proxy terminates TLS and forwards here; only a proxy on this machine can reach the port,
        # and ApiHandler still refuses anything the proxy did not mark X-Forwarded-Proto: https.
        plain = DrainingHTTPServer(app, xheaders=True, max_body_size=body_cap)
        plain.listen(settings.http_port, "127.0.0.1")
        servers.append(plain)
    elif settings.http_port:
        plain = DrainingHTTPServer(RejecterApplication(settings.base_url), max_body_size=65536)
        plain.listen(settings.http_port, settings.host)
        servers.append(plain)

    first = await accounts.ensure_owner(services.db, services.box, services.keys, settings.base_url)
    if first:
        print_first_run(first)

    def reload_certificate():
        context = certs.reload_if_changed()
        if context is not None:
            https.ssl_options = context  # new connections get it; open ones keep theirs

    async def prune_live_events():
        # LEAD: the retention registry (harden-store) replaces this task: register
        # services.live.prune_events(db, settings.live_events_retention_hours) there.
        try:
            await prune_events(services.db, settings.live_events_retention_hours)
        except Exception:
            log.exception("pruning live events failed; trying again at the next run")

    tasks = [tornado.ioloop.PeriodicCallback(reload_certificate, 1000),
             tornado.ioloop.PeriodicCallback(services.limiter.prune, 60_000),
             tornado.ioloop.PeriodicCallback(prune_live_events, 600_000)]
    for task in tasks:
        task.start()
    services.delivery.start()  # picks up rows left pending by a previous run at once
    services.hub.start()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("listening on https://%s:%d%s", settings.host, settings.port,
             f" and http://{settings.host}:{settings.http_port} (rejects)" if settings.http_port else "")
    print(json.dumps({"event": "listening", "port": settings.port, "http_port": settings.http_port}), flush=True)
    await stop.wait()

    log.info("shutting down: no new connections, waiting for %d request(s) in flight", app.inflight)
    for server in servers:
        server.stop()
    await services.hub.stop()  # open pages reconnect to the next server and resume from their last event
    deadline = time.monotonic() + settings.shutdown_grace_seconds
    while (app.inflight > 0 or any(s.receiving for s in servers)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    for task in tasks:
        task.stop()
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
    async def run(s):
        created = await accounts.create_account(
            s.db, s.box, s.keys, name=args.name, email=args.email,
            account_type="agency" if args.agency else "standard", agency_email=args.agency_email,
            password=args.password)
        out = {k: created[k] for k in ("account_id", "email", "api_key", "type")}
        if not args.password:
            out["password"] = created["password"]
        return out
    return asyncio.run(_with_services(settings, run))


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
    target = sqlite3.connect(str(out))
    try:
        source.backup(target)
        version = target.execute("PRAGMA user_version").fetchone()[0]
    finally:
        target.close()
        source.close()
    return {"backup": str(out), "bytes": out.stat().st_size, "schema_version": version}


def build_parser():
    parser = argparse.ArgumentParser(prog="server.py", description="Parley: self-hosted customer messaging.")
    sub = parser.add_subparsers(dest="command")
    commands = {
        "serve": sub.add_parser("serve", help="run the HTTPS server (the default)"),
        "create-account": sub.add_parser("create-account", help="create an account; prints its API key once"),
        "rotate-key": sub.add_parser("rotate-key", help="generate a new API key; the old one dies at once"),
        "backup": sub.add_parser("backup", help="online backup of the database to OUT"),
    }
    c = commands["create-account"]
    c.add_argument("--name", required=True)
    c.add_argument("--email", required=True)
    c.add_argument("--agency", action="store_true", help="an agency account (may grant credits)")
    c.add_argument("--agency-email", help="make a sub-account of the agency with this email")
    c.add_argument("--password", help="UI password (generated and printed when omitted)")
    commands["rotate-key"].add_argument("--email", required=True)
    commands["backup"].add_argument("out", metavar="OUT")
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
    if args.command == "serve":
        asyncio.run(main(settings))
        return 0
    runner = {"create-account": cmd_create_account, "rotate-key": cmd_rotate_key, "backup": cmd_backup}
    try:
        result = runner[args.command](settings, args)
    except DomainError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(cli())
