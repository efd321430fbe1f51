"""Migrations on both databases (storage/migrate.py): which file each runs, and that PostgreSQL's schema (the
baseline, then the same migrations) has the tables and columns SQLite's has."""
import pytest

from storage import db as dbmod
from storage.db import connect_sync
from storage.migrate import migration_files

# PostgreSQL's own bookkeeping for live events (storage/events.py _PostgresOrder).
POSTGRES_ONLY = {("event_counters", "account_id"), ("event_counters", "seq"), ("events", "tx")}
# SQLite's search index (migration 0600: FTS5 and its shadow tables); PostgreSQL indexes messages itself (pg_trgm).
SQLITE_ONLY_TABLE_PREFIX = "message_search"


def test_a_postgresql_file_replaces_its_sql_twin_on_postgresql_only(tmp_path):
    for name in ("0001_a.sql", "0002_b.sql", "0002_b.postgresql.sql", "0003_c.py", "0004_d.postgresql.sql",
                 "baseline.postgresql.sql", "notes.txt"):
        (tmp_path / name).write_text("")
    names = lambda dialect: {v: p.name for v, p in migration_files(tmp_path, dialect).items()}  # noqa: E731
    assert names("sqlite") == {1: "0001_a.sql", 2: "0002_b.sql", 3: "0003_c.py"}
    assert names("postgresql") == {1: "0001_a.sql", 2: "0002_b.postgresql.sql", 3: "0003_c.py",
                                   4: "0004_d.postgresql.sql"}


def test_postgresql_has_every_table_and_column_sqlite_has(tmp_path, settings, services):
    if not settings.uses_postgres:
        pytest.skip("needs PARLEY_TEST_DATABASE_URL")
    sqlite = connect_sync(tmp_path / "schema.db")
    try:
        dbmod.migrate(sqlite)
        tables = [r[0] for r in sqlite.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                               " AND name NOT LIKE 'sqlite_%'")]
        on_sqlite = {(t, r[1]) for t in tables if not t.startswith(SQLITE_ONLY_TABLE_PREFIX)
                     for r in sqlite.execute(f"PRAGMA table_info({t})")}
        sqlite_versions = {r[0] for r in sqlite.execute("SELECT version FROM schema_migrations")}
    finally:
        sqlite.close()
    pg = services.db.connect_sync()
    try:
        on_postgres = {tuple(r) for r in pg.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'")}
        pg_versions = {r[0] for r in pg.execute("SELECT version FROM schema_migrations")}
    finally:
        pg.close()
    assert on_postgres - POSTGRES_ONLY == on_sqlite
    assert pg_versions == sqlite_versions
