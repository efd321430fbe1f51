"""What a serving process records about itself in its data directory (server.json), so that the ops commands
run with the same --data-dir follow it: the links they print use the server's address, and they use (or refuse
to guess) its database. The data directory is the key: it holds the server's secret key and (SQLite) its
database, so an ops command run from anywhere names it (--data-dir or PARLEY_DATA_DIR) and finds the rest here.
Never a secret: the database URL is recorded without its password."""
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from common.version import VERSION

FILE_NAME = "server.json"


def redacted_url(url):
    """A database URL without its password (postgresql://parley@host:5432/db)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc}" if user else netloc))


def database_description(settings):
    """Which database the settings name, in words an operator can check: the file, or the URL sans password."""
    if settings.uses_postgres:
        return f"PostgreSQL {redacted_url(settings.database_url)}"
    return f"SQLite {settings.db_path.resolve()}"


def _now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _path(data_dir):
    return Path(data_dir) / FILE_NAME


def _write(data_dir, record):
    """Whole or not at all: a reader never sees half a file."""
    path = _path(data_dir)
    temporary = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    temporary.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(temporary, path)


def record_start(settings):
    """The serving process's effective settings, once it listens; returns the record."""
    record = {"version": VERSION, "pid": os.getpid(), "startedAt": _now(), "stoppedAt": None,
              "dataDir": str(settings.data_dir.resolve()), "host": settings.host, "port": settings.port,
              "httpPort": settings.http_port, "publicUrl": settings.base_url,
              "database": database_description(settings)}
    _write(settings.data_dir, record)
    return record


def record_stop(settings, record):
    """A clean stop: the record stays (the last server of this directory), saying when it stopped. Another
    process of the same directory that started since then owns the file: it is left alone."""
    current = read(settings.data_dir)
    if current is not None and current.get("pid") == record["pid"]:
        _write(settings.data_dir, {**current, "stoppedAt": _now()})


def read(data_dir):
    try:
        return json.loads(_path(data_dir).read_text())
    except (OSError, ValueError):
        return None


def is_running(record):
    if record.get("stoppedAt"):
        return False
    try:
        os.kill(int(record["pid"]), 0)
    except ProcessLookupError:
        return False  # killed, or the machine restarted: it never recorded its stop
    except (PermissionError, ValueError, KeyError, TypeError):
        return True  # a process of another user (the service account) holds that pid
    return True


class Mismatch(Exception):
    """The ops command's settings name another database than the server of its data directory uses."""


def follow(settings, given):
    """The settings an ops command should use: the server's address for links unless --public-url or --port
    was given (``given``: the names set by flags or PARLEY_* variables), and a refusal when the server of this
    data directory keeps its data in PostgreSQL while the command would open the directory's SQLite file.
    Returns (settings, record or None)."""
    record = read(settings.data_dir)
    if record is None:
        return settings, None
    if not {"public_url", "port"} & given and record.get("publicUrl"):
        settings = settings.model_copy(update={"public_url": record["publicUrl"]})
    recorded = record.get("database", "")
    if recorded.startswith("PostgreSQL") and not settings.uses_postgres:
        raise Mismatch(f"the server of {record['dataDir']} keeps its data in {recorded}: give this command the "
                       f"same --database-url (PARLEY_DATABASE_URL), with its password")
    return settings, record


def describe_use(settings, record):
    """The stderr line of an ops command: which database it used, and what it knows of the server."""
    data_dir = settings.data_dir.resolve()
    used = database_description(settings)
    if record is None:
        server = f"no server has recorded its settings in {data_dir}: is it the server's --data-dir?"
    elif is_running(record):
        server = f"the server of {data_dir} runs at {record.get('publicUrl')} (pid {record.get('pid')})"
    else:
        server = (f"the server of {data_dir} is not running (it last started at {record.get('startedAt')}"
                  f"{', stopped at ' + record['stoppedAt'] if record.get('stoppedAt') else ''})")
    line = f"database: {used}; {server}"
    recorded = (record or {}).get("database")
    if recorded and recorded != used:
        line += f"; that server used {recorded}"
    return line
