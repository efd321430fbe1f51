"""The `parley` command (and `python server.py …`): serve, and the ops commands, each of which prints one JSON
object on stdout. COMMANDS is the list `parley --help` shows; each command's --help ends with an example."""
import argparse
import asyncio
import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import server_record
import settings as settings_module
from common.errors import DomainError, NotFound
from common.version import VERSION
from services import accounts, audit, contact_import, import_runner, one_time_links
from storage.db import connect_sync

log = logging.getLogger("parley")


async def _with_services(settings, fn):
    import server  # here, not at the top: server.py imports this module
    services = await server.open_services(settings)
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
        s.db, settings.base_url, args.email, args.account_id)))


def cmd_rotate_key(settings, args):
    async def run(s):
        account = await accounts.get_account_by_email(s.db, args.email)
        if account is None:
            raise SystemExit(json.dumps({"error": f"no account with email {args.email}"}))
        return {"account_id": account["id"], "api_key": await accounts.rotate_key(s.db, s.keys, account["id"],
                                                                               by=audit.OPERATOR)}
    return asyncio.run(_with_services(settings, run))


def cmd_set_rate_limit(settings, args):
    """The per-account override of --rate-limit (docs/operations.md "Settings"): a busy integration gets more."""
    per_minute = None if args.per_minute == "default" else _positive_int(args.per_minute)

    async def run(s):
        account = await accounts.get_account_by_email(s.db, args.email)
        if account is None:
            raise SystemExit(json.dumps({"error": f"no account with email {args.email}"}))
        await accounts.set_rate_limit(s.db, s.keys, account["id"], per_minute, by=audit.OPERATOR)
        # null: the server's own --rate-limit (this command does not know the running server's flags)
        return {"account_id": account["id"], "rateLimitPerMinute": per_minute}
    return asyncio.run(_with_services(settings, run))


def _positive_int(text):
    try:
        return int(text)
    except ValueError:
        raise SystemExit(json.dumps({"error": f"--per-minute must be a whole number or default, not {text!r}"})) \
            from None


def cmd_backup(settings, args):
    """Online backup through SQLite's backup API: consistent even while the server writes. On PostgreSQL,
    pg_dump's (custom format, for pg_restore) when pg_dump is installed; else it says to use pg_dump."""
    out = Path(args.out)
    if settings.uses_postgres:
        return _pg_dump(settings.database_url, out)
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


def _pg_dump(url, out):
    pg_dump = shutil.which("pg_dump")
    if pg_dump is None:
        raise SystemExit(json.dumps({"error": "the database is PostgreSQL: back it up with pg_dump "
                                              "(pg_dump --format=custom --file OUT DATABASE_URL), which is not "
                                              "installed here"}))
    os.close(os.open(out, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(out, 0o600)
    done = subprocess.run([pg_dump, "--format=custom", "--file", str(out), "--dbname", url],
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(json.dumps({"error": f"pg_dump failed: {done.stderr.strip()}"}))
    return {"backup": str(out), "bytes": out.stat().st_size, "format": "pg_dump custom (restore with pg_restore)"}


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


def _create_account_arguments(c):
    c.add_argument("--name", required=True)
    c.add_argument("--email", required=True)
    c.add_argument("--agency", action="store_true", help="an agency account (may grant credits)")
    c.add_argument("--agency-email", help="make a sub-account of the agency with this email")
    c.add_argument("--password", help="UI password, for scripts (when omitted, a one-time setup link is printed)")


def _email_argument(c):
    c.add_argument("--email", required=True, help="the account's email")


def _rate_limit_arguments(c):
    _email_argument(c)
    c.add_argument("--per-minute", required=True, metavar="N", help="requests per API key per minute for this "
                   "account, or default (the server's --rate-limit)")


def _user_email_argument(c):
    c.add_argument("--email", required=True, help="the user's email")
    c.add_argument("--account-id", help="the account (acc_…), when the email is a user of several")


def _backup_arguments(c):
    c.add_argument("out", metavar="OUT", help="the file to write (created with mode 0600)")


def _import_arguments(c):
    _email_argument(c)
    c.add_argument("file", metavar="FILE.csv", help="UTF-8 CSV with a header row; comma or semicolon separated")
    c.add_argument("--list", metavar="LIST_ID", help="add every imported contact to this list of the account")
    c.add_argument("--default-country", metavar="CC", help="ISO country code for phone numbers without +")
    c.add_argument("--map", action="append", metavar="FIELD=COLUMN",
                   help="firstName, lastName, phone or email = a column's name or 1-based number (empty: skip "
                        "the field); repeatable; the rest is guessed from the header")


def _serve(settings, args):
    import server  # here, not at the top: server.py imports this module
    from services.secretbox import SecretKeyError
    try:
        asyncio.run(server.main(settings))
    except (OSError, SecretKeyError) as exc:  # a port in use, a certificate that cannot be read: one line, no traceback
        log.error("cannot serve: %s", exc)
        return 1
    return 0


class Command:
    """One subcommand: its one-line help, an example for its --help, its own arguments, and what it runs
    (run(settings, args) returns the JSON object to print, or, for serve, the exit code)."""

    def __init__(self, name, help, example, run, arguments=None):
        self.name, self.help, self.example, self.run, self.arguments = name, help, example, run, arguments


COMMANDS = [
    Command("serve", "run the HTTPS server (the default when no command is given)",
            "parley serve --port 9443 --public-url https://parley.example.com:9443", _serve),
    Command("create-account", "create an account and its UI user; prints its API key once",
            'parley create-account --name "Acme" --email ops@acme.test', cmd_create_account,
            _create_account_arguments),
    Command("reset-password", "print a one-time sign-in link for a user, who then chooses a new password",
            "parley reset-password --email ops@acme.test", cmd_reset_password, _user_email_argument),
    Command("rotate-key", "generate a new API key for an account; the old one stops working at once",
            "parley rotate-key --email ops@acme.test", cmd_rotate_key, _email_argument),
    Command("set-rate-limit", "give one account its own API rate limit (requests per key per minute)",
            "parley set-rate-limit --email ops@acme.test --per-minute 3000", cmd_set_rate_limit,
            _rate_limit_arguments),
    Command("backup", "online backup of the database to OUT, consistent while the server runs",
            "parley backup /var/backups/parley.db", cmd_backup, _backup_arguments),
    Command("import-contacts", "import contacts from a CSV file into an account (and a list)",
            "parley import-contacts --email ops@acme.test leads.csv --default-country DE --map phone=Mobile",
            cmd_import_contacts, _import_arguments),
]


class ExampleFormatter(argparse.RawDescriptionHelpFormatter):
    """Command names and their help on one line each; the example epilog kept as written."""

    def __init__(self, prog):
        super().__init__(prog, max_help_position=26, width=100)
        # argparse leaves the subcommands' extra indent out of the column it aligns help texts at.
        self._action_max_length = 22


def build_parser(prog="parley"):
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=ExampleFormatter,
        description="Parley: self-hosted customer messaging.\nEvery command takes the settings (--data-dir at least) "
                    "as flags or PARLEY_* variables;\n`%(prog)s COMMAND --help` lists them, with an example.")
    parser.add_argument("--version", action="version", version=f"parley {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.help,
                           epilog=f"example:\n  {command.example}", formatter_class=ExampleFormatter)
        if command.arguments:
            command.arguments(p)
        settings_module.add_arguments(p)
    return parser


def cli(argv=None, prog=None):
    """`parley …` (the console script) and `python server.py …`; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(prog or ("server.py" if os.path.basename(sys.argv[0]) == "server.py" else "parley"))
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["serve", *argv]
    args = parser.parse_args(argv)
    try:
        settings = settings_module.from_namespace(args)
    except Exception as exc:
        parser.error(str(exc))
    if args.command != "serve":
        try:
            settings, record = server_record.follow(settings, settings_module.given(args))
        except server_record.Mismatch as exc:
            print(json.dumps({"error": str(exc)}))
            return 1
    import server  # here, not at the top: server.py imports this module
    server.configure_logging(settings.log_level)
    os.umask(0o077)  # whatever this process and its writer create (media, certificates, backups) is private
    command = next(c for c in COMMANDS if c.name == args.command)
    if command.name == "serve":
        return command.run(settings, args)
    # Which database this command used, on stderr (stdout is the JSON answer): a backup of the wrong
    # directory's file is seen at once.
    print(f"parley {command.name}: {server_record.describe_use(settings, record)}", file=sys.stderr, flush=True)
    try:
        result = command.run(settings, args)
    except DomainError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps(result))
    return 0 if result.get("status", "completed") == "completed" else 1  # an import that did not complete


def main():
    """The console script's entry point."""
    sys.exit(cli())


if __name__ == "__main__":
    main()
