"""A direct connection to the test's own database, whichever backend the suite runs on: for tests that look at
(or set up) rows no API shows. SQLite: connect_sync on the file; PostgreSQL (conftest's database_url fixture sets
PARLEY_DATABASE_URL for each test): a psycopg connection behind storage's adapter, so the same `?` SQL and the
same rows (row[0], row["col"], dict(row)). Autocommit on both: every statement is its own transaction."""
import functools
import os
import sqlite3
from pathlib import Path

from storage.db import connect_sync, is_postgres_url
from tests import pg_databases

try:
    import psycopg
    # What a constraint of the data raises on either backend (a test that checks the constraint itself).
    INTEGRITY_ERRORS = (sqlite3.IntegrityError, psycopg.IntegrityError)
except ImportError:  # an SQLite-only install
    INTEGRITY_ERRORS = (sqlite3.IntegrityError,)


def database_url(target=None):
    """The PostgreSQL URL of the test's database (or target itself, a postgresql:// URL), or "" on SQLite."""
    if isinstance(target, str) and is_postgres_url(target):
        return target
    settings = getattr(target, "settings", target)
    url = getattr(settings, "database_url", None)
    if url is not None:
        return url
    data_dir = _data_dir(target)
    if data_dir is not None and os.environ.get(pg_databases.SERVER_URL_VARIABLE):
        return pg_databases.env_for(data_dir)["PARLEY_DATABASE_URL"]
    return os.environ.get("PARLEY_DATABASE_URL", "")


def _data_dir(target):
    """The data directory of a ParleyProcess or of an SQLite file's path: on PostgreSQL, the one database its
    server processes and CLI runs use (tests/pg_databases.py)."""
    if hasattr(target, "data_dir"):
        return Path(target.data_dir)
    if isinstance(target, Path):
        return target.parent
    return None


def sqlite_path(target):
    if isinstance(target, (str, Path)):
        return Path(target)
    if hasattr(target, "data_dir"):  # a ParleyProcess
        return Path(target.data_dir) / "parley.db"
    settings = getattr(target, "settings", target)
    return settings.db_path


def connect(target, *, foreign_keys=True):
    """target: the services fixture, a Settings, a ParleyProcess, a postgresql:// URL, or the SQLite file's path
    (used on SQLite only: on PostgreSQL the test's database is PARLEY_DATABASE_URL). foreign_keys=False: this
    connection's writes are not checked against references (a row removed the way no endpoint does;
    PostgreSQL: replica mode, which skips the foreign keys' triggers)."""
    url = database_url(target)
    cx = connect_postgres(url) if url else connect_sync(sqlite_path(target))
    if not foreign_keys:
        cx.execute("SET session_replication_role = replica" if url else "PRAGMA foreign_keys=OFF")
    return cx


def on_sqlite(target=None):
    return not database_url(target)


def connect_postgres(url):
    """storage's PostgreSQL connection outside the pool (autocommit, sqlite3-like) on the database at url."""
    from storage.postgres_db import PostgresDatabase
    return _test_connection_class()(PostgresDatabase(url).connect_sync().raw)


@functools.cache
def _test_connection_class():
    from storage.pg_adapter import PgConnection  # psycopg: imported only when the suite runs on PostgreSQL

    class TestConnection(PgConnection):
        """Tests' "BEGIN IMMEDIATE" (SQLite's write lock taken up front) is PostgreSQL's BEGIN."""

        def execute(self, sql, params=()):
            if sql.strip().upper() == "BEGIN IMMEDIATE":
                sql = "BEGIN"
            return super().execute(sql, params)
    return TestConnection


def rows(target, sql, *params):
    """Every row of one query, as dicts."""
    cx = connect(target)
    try:
        return [dict(row) for row in cx.execute(sql, params).fetchall()]
    finally:
        cx.close()


def value(target, sql, *params):
    """The first column of the first row (e.g. a COUNT)."""
    cx = connect(target)
    try:
        return cx.execute(sql, params).fetchone()[0]
    finally:
        cx.close()


def execute(target, sql, *params):
    """One statement, committed; returns the number of rows it changed."""
    cx = connect(target)
    try:
        return cx.execute(sql, params).rowcount
    finally:
        cx.close()


def dump_text(target):
    """Every row of every table as text (SQLite: iterdump; PostgreSQL: each table's rows, repr'd): for tests
    that prove a secret is never stored in plain text."""
    cx = connect(target)
    try:
        if isinstance(cx, sqlite3.Connection):
            return "\n".join(cx.iterdump())
        tables = [row[0] for row in cx.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")]
        return "\n".join(f"{table}: {tuple(row)!r}" for table in tables
                         for row in cx.execute(f'SELECT * FROM "{table}"'))
    finally:
        cx.close()


def tables_as_json(target):
    """PostgreSQL: {table: every row of it as JSON text, one a line} for every table of the database (for tests
    that prove some text is stored nowhere)."""
    cx = connect(target)
    try:
        tables = [row[0] for row in cx.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            " AND table_type = 'BASE TABLE'")]
        return {table: "\n".join(row[0] for row in cx.execute(f'SELECT row_to_json(t)::text FROM "{table}" t'))
                for table in tables}
    finally:
        cx.close()


def query_plans(db_path, run):
    """Run storage calls on a traced connection; return {sql: EXPLAIN QUERY PLAN details}."""
    cx = connect_sync(db_path)
    statements = []
    cx.set_trace_callback(lambda sql: statements.append(sql) if sql.lstrip().upper().startswith(("SELECT", "WITH"))
                          else None)
    try:
        run(cx)
        cx.set_trace_callback(None)
        return {sql: [r["detail"] for r in cx.execute("EXPLAIN QUERY PLAN " + sql)] for sql in statements}
    finally:
        cx.close()
