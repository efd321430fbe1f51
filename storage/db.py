"""The storage seam: ``open_database(settings)`` gives the backend the settings ask for (the SQLite file in
the data directory, or PostgreSQL for a postgresql:// --database-url), each with the same
``read(fn, *args)`` / ``write(fn, *args)`` / ``write_background(fn, *args)`` for ``fn(cx, ...)`` storage
functions. Storage modules import what they share from here."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from storage import migrate as _migrate
from storage.interface import OwnConnection
from storage.interface import (Conflict, StorageUnavailable, StoredResultLost, WriteOutcomeUnknown,  # noqa: F401
                               database_errors,
                               fetch_all, fetch_one, function_reference, idempotency_claim, reads, resolve,
                               writes)
from storage.sqlite_db import PIPELINE, QUEUE_FULL, Database, as_unavailable, connect_sync, log  # noqa: F401
from storage.writer_supervisor import (CLOSING, FRAME_HEADER, NOT_WRITTEN, STORED, UNKNOWN,  # noqa: F401
                                       _batch_record, encode_frame)

if TYPE_CHECKING:
    from settings import Settings
    from storage.interface import Store
    from storage.pg_adapter import PgConnection
    from storage.postgres_db import PostgresDatabase
    from storage.sqlite_db import SqliteConnection

    def _backends_fit_the_seam(sqlite: Database, postgres: PostgresDatabase, sqlite_cx: SqliteConnection,
                               postgres_cx: PgConnection) -> tuple[Store, Store, OwnConnection, OwnConnection]:
        """mypy (make lint) checks that both backends and their connections are what storage code is typed with."""
        return sqlite, postgres, sqlite_cx, postgres_cx

MIGRATIONS = Path(__file__).parent / "migrations"


def migrate(cx: OwnConnection) -> None:
    """Apply the migrations not yet applied (storage/migrate.py), on either database's connection."""
    _migrate.migrate(cx, MIGRATIONS)


def is_postgres_url(url: str | None) -> bool:
    if not url:
        return False
    return url.split(":", 1)[0] in ("postgresql", "postgres")


def open_database(settings: Settings) -> Database | PostgresDatabase:
    """The unopened Database the settings name: PostgreSQL for a postgresql:// database_url, else SQLite."""
    if is_postgres_url(settings.database_url):
        from storage.postgres_db import PostgresDatabase  # psycopg is imported only by those who use it
        return PostgresDatabase(settings.database_url, max_pending=settings.write_queue_limit,
                                pool_size=settings.database_pool_size)
    return Database(settings.db_path, max_pending=settings.write_queue_limit,
                    stall_seconds=settings.writer_stall_seconds)
