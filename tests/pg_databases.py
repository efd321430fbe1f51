"""Throwaway PostgreSQL databases for the tests (conftest.py's database_url fixture): one migrated template per
test session, then a fresh copy of it per test (CREATE DATABASE ... TEMPLATE is a file copy: far quicker than
migrating each), dropped after the test."""
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
        _template = name
    return _template


def create(server_url):
    """A fresh, migrated database; returns its URL."""
    template = _template_name(server_url)
    name = f"parley_test_{os.getpid()}_{next(_numbers)}"
    with _admin(server_url) as cx:
        cx.execute(f"DROP DATABASE IF EXISTS {name}")
        cx.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    return with_database(server_url, name)


def drop(server_url, url):
    name = urlsplit(url).path.lstrip("/")
    with _admin(server_url) as cx:
        cx.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


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
