"""The PostgreSQL backend: the same read()/write() seam as the SQLite one (storage/sqlite_db.py), over a pool
of psycopg connections. No writer process: each write runs ``fn(cx, ...)`` in a worker thread inside one
transaction of its own, and is answered after its COMMIT (an answered write is committed). Invariants the
single SQLite writer gave for free are constraints of the data here (unique indexes, conditional UPDATEs;
see docs/architecture.md)."""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Concatenate

import psycopg
import psycopg_pool

from storage import migrate as migrations
from storage.interface import Conflict, Connection, P, R, StorageUnavailable, WriteOutcomeUnknown, idempotency_claim
from storage.pg_adapter import PgConnection, configure

log = logging.getLogger("parley.db")

POOL_SIZE = 10  # connections, and the worker threads that use them
# How long an erasure's table rewrite (purge_deleted) waits for its table's lock before it gives up and is tried
# again later (services/erasure.py): while it waits, the requests for that table queue behind it.
REWRITE_LOCK_TIMEOUT = "2s"
SWITCH_INTERVAL = 0.0005  # seconds: sys.setswitchinterval while a PostgreSQL database is open
QUEUE_FULL = "storage is busy: too many writes are waiting; nothing was written, retry later"
CLOSING = "the database is closing; nothing was written"
DOWN = "the database cannot be reached; nothing was written, retry later"
# How long a request waits for a pooled connection while the database was last found unreachable, instead of the
# pool's 15 s: the pool's own reconnection hands one over as soon as the server is back, and meanwhile requests
# (and the background workers sharing the worker threads) are answered 503 at once instead of queueing for
# minutes behind one another's waits.
UNREACHABLE_WAIT = 1.0
UNKNOWN = "the connection to the database was lost at COMMIT: the write may or may not be stored; " \
          "retry with the same Idempotency-Key"


def as_storage_error(exc: BaseException) -> BaseException:
    """The driver's errors as the seam's: a unique-key clash as Conflict, a lost or refused connection as
    StorageUnavailable; any other exception unchanged."""
    if isinstance(exc, psycopg.errors.UniqueViolation):
        conflict = Conflict(f"already stored: {exc.diag.constraint_name or exc}")
        conflict.__cause__ = exc
        return conflict
    if isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout)) and not isinstance(
            exc, psycopg.errors.QueryCanceled):
        unavailable = StorageUnavailable(DOWN)
        unavailable.__cause__ = exc
        return unavailable
    return exc


class PostgresDatabase:
    dialect = "postgresql"
    writer_pid = None  # no writer process
    one_writer = False  # writes run side by side: a long one does not hold the others up

    def __init__(self, url: str, *, max_pending: int = 10_000, pool_size: int = POOL_SIZE, **_ignored: Any) -> None:
        self.url, self.max_pending, self.pool_size = url, max_pending, pool_size
        self.token = os.urandom(8).hex()
        self.transactions_committed = 0
        self.writes_committed = 0
        # Set by open() (_pool again None once closed).
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor = None  # type: ignore[assignment]
        self._pending = 0
        self._closing = False
        self._idle: asyncio.Event = None  # type: ignore[assignment]
        self._commit_listeners: list[Callable[[], None]] = []
        self.unreachable = False  # the last connection attempt or statement found the server gone

    async def open(self) -> PostgresDatabase:
        # A worker thread back from a round trip waits for the GIL; by default the event loop keeps it up to 5 ms
        # (the switch interval), several times the round trip itself, and a write is a few round trips.
        sys.setswitchinterval(SWITCH_INTERVAL)
        self._idle = asyncio.Event()
        self._idle.set()
        self._background = asyncio.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(self.pool_size, thread_name_prefix="parley-pg")
        self._pool = psycopg_pool.ConnectionPool(self.url, min_size=min(2, self.pool_size), max_size=self.pool_size, open=False,
                                                 configure=configure, timeout=15.0, name="parley")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._open_and_migrate)
        return self

    def _open_and_migrate(self) -> None:
        self._pool.open(wait=True, timeout=30.0)  # type: ignore[union-attr]  # made by open()
        with self._pool.connection() as raw:  # type: ignore[union-attr]
            raw.autocommit = True
            from storage import db  # its MIGRATIONS: tests point it elsewhere
            migrations.migrate(PgConnection(raw), db.MIGRATIONS)

    def connect_sync(self) -> PgConnection:
        """A connection of its own outside the pool, in autocommit mode (ops commands, tests), speaking like
        sqlite3's (storage/pg_adapter.py); the caller closes it."""
        raw = psycopg.connect(self.url, autocommit=True)
        configure(raw)
        return PgConnection(raw)

    # purge_deleted takes long and locks each table while it runs: services/erasure.py runs it after the answer,
    # a table at a time.
    purges_in_background = True

    async def purge_deleted(self, tables: Sequence[str]) -> bool:
        """After an erasure: rewrite the tables it deleted from (VACUUM FULL: a new file for each table, its
        TOAST table and its indexes, holding only the live rows; the old files are removed). A plain VACUUM
        marks the dead row versions' space free but leaves their bytes in the pages, the person's name and
        email readable in the table and index files until the space happens to be reused (issue 36 §7).
        Each table is locked (ACCESS EXCLUSIVE) while it is copied: docs/operations.md says what that costs.
        A lock not had within REWRITE_LOCK_TIMEOUT raises (the caller tries again later): waiting longer, behind
        a long transaction, would hold every request for the table in the queue behind the rewrite."""
        def rewrite() -> bool:
            cx = self.connect_sync()  # VACUUM cannot run inside a transaction: autocommit
            try:
                cx.execute(f"SET lock_timeout = '{REWRITE_LOCK_TIMEOUT}'")
                cx.execute("VACUUM FULL " + ", ".join(tables))
            finally:
                cx.close()
            return True
        return await asyncio.get_running_loop().run_in_executor(self._executor, rewrite)

    def add_commit_listener(self, callback: Callable[[], None]) -> None:
        """callback() after every committed write (before its caller resumes): the live events hub."""
        self._commit_listeners.append(callback)

    async def close(self, timeout: float = 30.0) -> None:
        if self._pool is None:
            return
        self._closing = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            log.error("closing: writes still running after %g s", timeout)
        pool, self._pool = self._pool, None
        await asyncio.get_running_loop().run_in_executor(self._executor, pool.close)
        self._executor.shutdown(wait=False)

    async def read(self, fn: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(cx, *args)`` in a worker thread, each statement seeing what is committed (autocommit, as
        SQLite's reader)."""
        return await self._run(self._read_sync, fn, args, kwargs)

    async def write(self, fn: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(cx, *args)`` in one transaction; returns its result once committed. Inside a request that
        carries an Idempotency-Key, the request's first write runs under that key."""
        claim = idempotency_claim.get()
        if claim is not None and claim.open:
            return await claim.run(self, fn, args, kwargs)
        return await self._write(fn, args, kwargs)

    async def statement(self, fn: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(cx, ...)`` that makes one self-contained change in one statement (autocommit: it commits
        alone), without a transaction around it or the commit listeners: the shared rate limit, per request."""
        return await self._run(self._read_sync, fn, args, kwargs)

    async def write_background(self, fn: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Like write(), for a long write that can wait (a campaign's batch): these run one at a time, as on
        SQLite (a campaign's next batch, queued while one runs, starts from where that one left off), beside
        the other writes."""
        async with self._background:
            return await self._write(fn, args, kwargs)

    async def _write(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        fn = getattr(fn, "sync", fn)
        result = await self._run(self._write_sync, fn, args, kwargs)
        self.transactions_committed += 1
        self.writes_committed += 1
        for callback in self._commit_listeners:
            callback()
        return result

    async def _run(self, work: Callable[[Callable[..., Any], Sequence[Any], Mapping[str, Any]], Any], fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if self._pool is None or self._closing:
            raise RuntimeError("database is closed") if self._pool is None else StorageUnavailable(CLOSING)
        if self._pending >= self.max_pending:
            raise StorageUnavailable(QUEUE_FULL)
        self._pending += 1
        self._idle.clear()
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, work, fn, args, kwargs)
        finally:
            self._pending -= 1
            if not self._pending:
                self._idle.set()

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._pool.connection(  # type: ignore[union-attr]  # _run checked it is open
            timeout=UNREACHABLE_WAIT if self.unreachable else None)

    def _storage_error(self, exc: BaseException) -> BaseException:
        error = as_storage_error(exc)
        if isinstance(error, StorageUnavailable):
            self.unreachable = True
        return error

    def _read_sync(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        try:
            with self._connection() as raw:
                raw.autocommit = True
                result = fn(PgConnection(raw), *args, **kwargs)
        except Exception as exc:
            raise self._storage_error(exc) from None
        self.unreachable = False
        return result

    def _write_sync(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        try:
            with self._connection() as raw:
                raw.autocommit = False
                cx = PgConnection(raw)
                try:
                    result = fn(cx, *args, **kwargs)
                except BaseException:
                    if not raw.closed:
                        cx.rollback()
                    raise
                try:
                    cx.commit()  # with the statements execute_later holds, in one round trip
                except psycopg.OperationalError as exc:
                    # The connection went while the COMMIT was on its way (in a pipeline the error may come
                    # from a statement sent with it, the connection not yet marked broken): it may or may not
                    # have arrived, so never "nothing was written".
                    raise WriteOutcomeUnknown(UNKNOWN) from exc
                except psycopg.Error:
                    if not (raw.closed or raw.broken):
                        cx.rollback()  # a statement sent with the COMMIT failed: nothing of it is stored
                    raise
        except Exception as exc:
            error = self._storage_error(exc)
            if error is exc:
                raise
            raise error from exc
        self.unreachable = False
        return result

    async def backup(self, target_path: str | Path) -> None:
        raise StorageUnavailable("on PostgreSQL, back up with pg_dump")
