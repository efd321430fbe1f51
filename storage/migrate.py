"""Schema migrations for both databases, tracked in one schema_migrations table.

Files in migrations/: ``NNNN_name.sql`` runs on both databases, unless ``NNNN_name.postgresql.sql`` lies
beside it (PostgreSQL then runs that one; SQLite never does); ``NNNN_name.py`` has migrate(cx), given the
connection (the PostgreSQL adapter speaks like sqlite3). A fresh PostgreSQL database starts from
``baseline.postgresql.sql``: the schema as of migration BASELINE in PostgreSQL DDL, every version up to it
recorded as applied; later numbers follow the rule above.

Applied numbers are kept in schema_migrations, not only as SQLite's PRAGMA user_version (still set to the
highest, for backups and tools): branches number their migrations in ranges of their own, so one merged
later may carry a number below one a database already has, and "newer than user_version" would skip it."""
from __future__ import annotations

import importlib.util
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

from storage.dialect import dialect_of
from storage.interface import Connection, OwnConnection

if TYPE_CHECKING:
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec

log = logging.getLogger("parley.db")

BASELINE = 172  # the last migration baseline.postgresql.sql contains
PG_SUFFIX = ".postgresql.sql"
# Concurrent first starts on one PostgreSQL database take turns (pg_advisory_xact_lock's key: "parley-mi").
PG_LOCK_KEY = 0x7061726c65796d69


def migration_files(directory: Path, dialect: str) -> dict[int, Path]:
    """{version: path} of the migrations this dialect runs."""
    chosen = {}
    for path in sorted(directory.glob("[0-9][0-9][0-9][0-9]_*.*")):
        portable = path.suffix in (".sql", ".py") and not path.name.endswith(PG_SUFFIX)
        if portable and (dialect == "sqlite" or int(path.name[:4]) not in chosen):
            chosen[int(path.name[:4])] = path
    if dialect == "postgresql":
        for path in directory.glob(f"[0-9][0-9][0-9][0-9]_*{PG_SUFFIX}"):
            chosen[int(path.name[:4])] = path
    return dict(sorted(chosen.items()))


def migrate(cx: OwnConnection, directory: Path) -> None:
    """Apply every migration of directory not yet applied, in number order."""
    if dialect_of(cx).name == "postgresql":
        return _migrate_postgres(cx, directory)
    return _migrate_sqlite(cx, directory)


def _migrate_sqlite(cx: OwnConnection, directory: Path) -> None:
    """Each migration in its own transaction."""
    files = migration_files(directory, "sqlite")
    cx.execute("BEGIN IMMEDIATE")
    try:
        cx.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                   " applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))")
        applied = {row[0] for row in cx.execute("SELECT version FROM schema_migrations")}
        if not applied:
            # A database from before the table: user_version is all it knows, every number up to it was applied.
            current = cx.execute("PRAGMA user_version").fetchone()[0]
            applied = {version for version in files if version <= current}
            cx.executemany("INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                           [(version, files[version].name) for version in sorted(applied)])
        cx.execute("COMMIT")
    except BaseException:
        cx.execute("ROLLBACK")
        raise
    for version, path in files.items():
        if version in applied:
            continue
        cx.execute("BEGIN IMMEDIATE")
        try:
            _apply(cx, version, path)
            highest = cx.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
            cx.execute(f"PRAGMA user_version={highest}")
            cx.execute("COMMIT")
        except BaseException:
            cx.execute("ROLLBACK")
            raise
        log.info("applied migration %s", path.name)


def _migrate_postgres(cx: OwnConnection, directory: Path) -> None:
    """All in one transaction under an advisory lock: a second server starting at once waits, then finds
    everything applied. PostgreSQL's DDL is transactional, so a failed migration leaves nothing behind."""
    files = migration_files(directory, "postgresql")
    with cx.transaction():
        cx.execute("SELECT pg_advisory_xact_lock(?)", (PG_LOCK_KEY,))
        cx.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                   " applied_at TEXT NOT NULL DEFAULT to_char(now() AT TIME ZONE 'UTC',"
                   " 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'))")
        applied = {row[0] for row in cx.execute("SELECT version FROM schema_migrations")}
        if not applied:
            _check_collation(cx)
            cx.execute_script((directory / "baseline.postgresql.sql").read_text())
            applied = {version for version in files if version <= BASELINE}
            cx.executemany("INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                           [(version, files[version].name) for version in sorted(applied)])
            log.info("created the PostgreSQL schema (as of migration %04d)", BASELINE)
        for version, path in files.items():
            if version not in applied:
                _apply(cx, version, path)
                log.info("applied migration %s", path.name)


def _check_collation(cx: Connection) -> None:
    """Ids and keyset cursors compare as bytes (SQLite's order, and Python's): a database whose text sorts by
    a language's rules would page wrongly. Refused at creation, saying how to make one that is right."""
    collation = cx.execute("SELECT datcollate FROM pg_database WHERE datname = current_database()").fetchone()[0]
    if collation not in ("C", "POSIX", "C.UTF-8", "C.utf8"):
        raise RuntimeError(f"the database sorts text by the {collation} locale; Parley needs byte order: create it "
                           "with  createdb --locale=C --template=template0 NAME  (or LC_COLLATE 'C')")


def _apply(cx: OwnConnection, version: int, path: Path) -> None:
    """Run one migration in the open transaction and record it."""
    for line in _run_migration(cx, path):
        log.info("migration %s: %s", path.name, line)
    cx.execute("INSERT INTO schema_migrations (version, name) VALUES (?, ?)", (version, path.name))


def _run_migration(cx: OwnConnection, path: Path) -> list[str]:
    """Run one migration file; returns what a Python migration has to say."""
    if path.suffix == ".py":
        spec = cast("ModuleSpec", importlib.util.spec_from_file_location(f"parley_migration_{path.stem}", path))
        module = importlib.util.module_from_spec(spec)
        cast("Loader", spec.loader).exec_module(module)
        return module.migrate(cx) or []
    if dialect_of(cx).name == "postgresql":
        cx.execute_script(path.read_text())
        return []
    for statement in _split_sql(path.read_text()):
        cx.execute(statement)
    return []


def rewrite_sqlite_table(cx: Connection, table: str, old: str, new: str, what: str) -> None:
    """For a SQLite migration: replace ``old`` (found exactly once) by ``new`` in the table's CREATE statement, by
    SQLite's documented procedure for changes that alter nothing stored (a widened CHECK, a dropped NOT NULL:
    https://www.sqlite.org/lang_altertable.html#otheralter): sqlite_master rewritten and schema_version moved on,
    in the migration's transaction (a rebuild cannot run there: foreign_keys cannot be turned off inside one).
    RuntimeError naming ``what`` when the statement is not the one expected."""
    sql = cx.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()[0]
    if sql.count(old) != 1:
        raise RuntimeError(f"{table}'s {what} is not the one this migration changes: {sql}")
    version = cx.execute("PRAGMA schema_version").fetchone()[0]
    cx.execute("PRAGMA writable_schema = ON")
    try:
        cx.execute("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?", (sql.replace(old, new), table))
        cx.execute(f"PRAGMA schema_version = {version + 1}")
    finally:
        cx.execute("PRAGMA writable_schema = OFF")


def _split_sql(script: str) -> Iterator[str]:
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            if statement.strip():
                yield statement
            statement = ""
    if statement.strip():
        yield statement
