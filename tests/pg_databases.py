"""Throwaway PostgreSQL databases for the tests (conftest.py's database_url fixture): one migrated template per
test session, then a copy of it per test (CREATE DATABASE ... TEMPLATE: far quicker than migrating each), emptied
after the test and reused by the next test of the same process when its schema is still the template's."""
import itertools
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

SERVER_URL_VARIABLE = "PARLEY_TEST_DATABASE_URL"
_template = None
_by_data_dir = {}  # a data directory's database: one server process or CLI run finds what another stored
_numbers = itertools.count(1)


def with_database(url, name):
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def _admin(server_url):
    import psycopg
    return psycopg.connect(server_url, autocommit=True)


def _template_name(server_url):
    """The session's template database, made and migrated on first use."""
    global _template
    if _template is None:
        import asyncio
        import concurrent.futures

        from storage.postgres_db import PostgresDatabase
        name = f"parley_template_{os.getpid()}"
        with _admin(server_url) as cx:
            cx.execute(f"DROP DATABASE IF EXISTS {name}")
            cx.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'")

        async def migrate():
            db = await PostgresDatabase(with_database(server_url, name), pool_size=1).open()
            await db.close()
        # In a thread of its own: the first caller may be inside a running event loop (Playwright's, a fixture's).
        with concurrent.futures.ThreadPoolExecutor(1) as executor:
            executor.submit(asyncio.run, migrate()).result()
        global _template_fingerprint
        import psycopg
        with psycopg.connect(with_database(server_url, name), autocommit=True) as cx:
            _template_fingerprint = cx.execute(_SCHEMA_FINGERPRINT).fetchone()[0]
        _template = name
    return _template


def create(server_url):
    """A fresh, migrated database; returns its URL. One a finished test of this process gave back (release) is
    emptied and reused when it still has the template's schema: CREATE DATABASE costs ~0.4-0.5 s once the
    cluster is busy, once per test of the half, where emptying its 35 tables costs a few hundredths."""
    template = _template_name(server_url)
    while _free:
        url = _free.pop()
        if _emptied(server_url, url):
            return url
        drop(server_url, url)
    name = f"parley_test_{os.getpid()}_{next(_numbers)}"
    with _admin(server_url) as cx:
        cx.execute(f"DROP DATABASE IF EXISTS {name}")
        # FILE_COPY: a file copy and a checkpoint (cheap without fsync); PostgreSQL 15's default, WAL_LOG,
        # writes every page of the template to the WAL.
        cx.execute(f"CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY")
    return with_database(server_url, name)


def drop(server_url, url):
    name = urlsplit(url).path.lstrip("/")
    with _admin(server_url) as cx:
        cx.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def release(url):
    """A test is done with its database: kept for the next create() of this process (the cluster and every
    database go when the run ends, scripts/with_postgres.py)."""
    _free.append(url)


# What a test may change besides rows: tables, columns and their defaults, constraints, indexes, triggers,
# functions, schemas, the database's settings, and the migrations applied. A database whose schema is no longer
# the template's (a migration test, a trigger made to fail writes) is dropped, not reused.
_SCHEMA_FINGERPRINT = """
SELECT md5(string_agg(item, ',' ORDER BY item)) FROM (
  SELECT 'col:' || c.oid::regclass::text || ':' || c.relkind::text || ':' || coalesce(a.attname, '') || ':'
         || coalesce(format_type(a.atttypid, a.atttypmod), '') || ':' || a.attnotnull::text || ':'
         || coalesce(pg_get_expr(d.adbin, d.adrelid), '') AS item
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
  UNION ALL SELECT 'con:' || conrelid::regclass::text || ':' || conname || ':' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace <> 'pg_catalog'::regnamespace
  UNION ALL SELECT 'idx:' || pg_get_indexdef(i.indexrelid) FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
  UNION ALL SELECT 'trg:' || tgrelid::regclass::text || ':' || tgname || ':' || tgenabled::text FROM pg_trigger
   WHERE NOT tgisinternal
  UNION ALL SELECT 'fn:' || p.oid::regprocedure::text || ':' || md5(p.prosrc) FROM pg_proc p
   WHERE p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
  UNION ALL SELECT 'ns:' || nspname FROM pg_namespace
  UNION ALL SELECT 'set:' || array_to_string(setconfig, ';') FROM pg_db_role_setting
   WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
  UNION ALL SELECT 'migrations:' || string_agg(version::text, ';' ORDER BY version) FROM schema_migrations
) AS schema_items"""
_template_fingerprint = None
_free = []  # databases of finished tests of this process, to be emptied and reused


def _emptied(server_url, url):
    """Empty a released database for the next test: every session on it ended (a server process the test
    left), every row but schema_migrations' deleted, sequences restarted. False (to be dropped) when its
    schema is not the template's or it cannot be emptied at once."""
    import psycopg
    name = urlsplit(url).path.lstrip("/")
    try:
        with psycopg.connect(url, autocommit=True) as cx:
            cx.execute("SET lock_timeout = '5s'")
            cx.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                       " WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            if cx.execute("SELECT count(*) FROM pg_prepared_xacts WHERE database = %s", (name,)).fetchone()[0]:
                return False
            if cx.execute(_SCHEMA_FINGERPRINT).fetchone()[0] != _template_fingerprint:
                return False
            tables = [r[0] for r in cx.execute(
                "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables"
                " WHERE schemaname NOT IN ('pg_catalog', 'information_schema') AND tablename <> 'schema_migrations'")]
            sequences = [r[0] for r in cx.execute(
                "SELECT format('%I.%I', schemaname, sequencename) FROM pg_sequences WHERE last_value IS NOT NULL")]
            # DELETE, not TRUNCATE: TRUNCATE makes new files for every table and index (~0.5 s); the tables of
            # a test hold few rows. The replica role skips the foreign keys' triggers, so any order does.
            with cx.transaction():
                cx.execute("SET LOCAL session_replication_role = replica")
                for table in tables:
                    cx.execute(f"DELETE FROM {table}")
                for sequence in sequences:
                    cx.execute(f"ALTER SEQUENCE {sequence} RESTART")
            return True
    except psycopg.Error:
        return False


def register(data_dir, url):
    """url is the database of data_dir (the settings fixture's, for the test's own data directory)."""
    _by_data_dir[Path(data_dir).resolve()] = url


def env_for(data_dir):
    """The environment for a server process or CLI run on data_dir: on PostgreSQL, PARLEY_DATABASE_URL names
    that data directory's database (made on first use), so that a module's server, started before any test,
    and the CLI runs of its tests share one database, as they share the SQLite file."""
    env = dict(os.environ)
    server_url = env.get(SERVER_URL_VARIABLE)
    if server_url:
        key = Path(data_dir).resolve()
        if key not in _by_data_dir:
            _by_data_dir[key] = create(server_url)
        env["PARLEY_DATABASE_URL"] = _by_data_dir[key]
    return env
