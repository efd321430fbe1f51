"""Database: the single SQLite writer (group commit) and the reader connection."""
import asyncio
import functools
import json
import logging
import sqlite3
from pathlib import Path

import aiosqlite

from services.errors import Unavailable

log = logging.getLogger("parley.db")

MIGRATIONS = Path(__file__).parent / "migrations"
# Upper bound on the writes folded into one transaction; keeps a batch's latency bounded.
MAX_BATCH = 256


class StorageUnavailable(Unavailable):
    """503 UNAVAILABLE: the disk is full, the database read-only or failing; nothing was written."""


_UNAVAILABLE = {sqlite3.SQLITE_FULL: "storage is full", sqlite3.SQLITE_READONLY: "storage is read-only",
                sqlite3.SQLITE_IOERR: "storage I/O error"}


def as_unavailable(exc):
    """SQLite's disk-full, read-only and I/O errors as StorageUnavailable (the client may retry once the
    operator fixed the disk); any other exception unchanged."""
    code = getattr(exc, "sqlite_errorcode", None)
    reason = _UNAVAILABLE.get(code & 0xFF) if isinstance(code, int) else None
    if reason is None:
        return exc
    unavailable = StorageUnavailable(f"{reason}; nothing was written, retry later")
    unavailable.__cause__ = exc
    return unavailable


def connect_sync(path, *, timeout=10.0):
    """A plain sqlite3 connection with Parley's PRAGMAs (used by ops commands and the threads below)."""
    cx = sqlite3.connect(str(path), timeout=timeout, isolation_level=None, check_same_thread=False)
    cx.row_factory = sqlite3.Row
    cx.execute("PRAGMA journal_mode=WAL")
    cx.execute("PRAGMA synchronous=FULL")
    cx.execute("PRAGMA foreign_keys=ON")
    cx.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    return cx


def migrate(cx):
    """Apply migrations/NNNN_*.sql newer than PRAGMA user_version, each in its own transaction."""
    current = cx.execute("PRAGMA user_version").fetchone()[0]
    for path in sorted(MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.sql")):
        version = int(path.name[:4])
        if version <= current:
            continue
        cx.execute("BEGIN IMMEDIATE")
        try:
            for statement in _split_sql(path.read_text()):
                cx.execute(statement)
            cx.execute(f"PRAGMA user_version={version}")
            cx.execute("COMMIT")
        except BaseException:
            cx.execute("ROLLBACK")
            raise
        log.info("applied migration %s", path.name)


def _split_sql(script):
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            if statement.strip():
                yield statement
            statement = ""
    if statement.strip():
        yield statement


class Database:
    """One writer connection fed by a queue, one reader connection; both run in aiosqlite's threads.

    ``write(fn, *args)`` queues ``fn(cx, *args)``; the writer task runs every queued call in one
    transaction (each inside a SAVEPOINT, so one failing call rolls back alone) and resolves each
    caller's future only after COMMIT returned: an answered write is durable.
    """

    def __init__(self, path):
        self.path = Path(path)
        self.transactions_committed = 0
        self.writes_committed = 0
        self._writer = None
        self._reader = None
        self._queue = None
        self._writer_task = None

    async def open(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        cx = connect_sync(self.path)
        try:
            migrate(cx)
        finally:
            cx.close()
        self._writer = await aiosqlite.connect(self.path, isolation_level=None,
                                              check_same_thread=False)
        self._reader = await aiosqlite.connect(self.path, isolation_level=None, check_same_thread=False)
        for conn in (self._writer, self._reader):
            await conn._execute(_configure, conn._conn)
        self._queue = asyncio.Queue()
        self._writer_task = asyncio.ensure_future(self._run_writer())
        return self

    async def close(self):
        """Flush queued writes, then close both connections."""
        if self._writer_task is not None:
            await self._queue.put(None)
            await self._writer_task
            self._writer_task = None
        for conn in (self._writer, self._reader):
            if conn is not None:
                await conn.close()
        self._writer = self._reader = None

    async def read(self, fn, *args, **kwargs):
        """Run ``fn(cx, *args)`` on the reader connection (one thread hop)."""
        return await self._reader._execute(fn, self._reader._conn, *args, **kwargs)

    async def write(self, fn, *args, **kwargs):
        """Queue ``fn(cx, *args)`` for the writer; returns its result once committed."""
        if self._writer_task is None:
            raise RuntimeError("database is closed")
        future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((future, lambda cx: fn(cx, *args, **kwargs)))
        return await future

    async def backup(self, target_path):
        target = sqlite3.connect(str(target_path))
        try:
            await self._reader._execute(self._reader._conn.backup, target)
        finally:
            target.close()

    async def _run_writer(self):
        stopping = False
        while not stopping:
            item = await self._queue.get()
            batch = []
            while item is not None:
                batch.append(item)
                if len(batch) >= MAX_BATCH or self._queue.empty():
                    break
                item = self._queue.get_nowait()
            stopping = item is None
            batch = [(f, call) for f, call in batch if not f.cancelled()]
            if not batch:
                continue
            # The whole batch runs in the writer thread: one hop per transaction, not per row.
            try:
                outcomes = await self._writer._execute(_run_batch, self._writer._conn,
                                                       [call for _, call in batch])
            except Exception as exc:  # COMMIT itself failed: nobody's write is durable.
                log.error("write transaction failed, %d writes rejected: %s", len(batch), exc)
                exc = as_unavailable(exc)
                for future, _ in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            if any(ok for ok, _ in outcomes):  # a lone failed call was rolled back, not committed
                self.transactions_committed += 1
            self.writes_committed += sum(1 for ok, _ in outcomes if ok)
            for (future, _), (ok, value) in zip(batch, outcomes):
                if future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    unavailable = as_unavailable(value)
                    if unavailable is not value:
                        log.error("write rejected: %s", value)
                    future.set_exception(unavailable)


def _configure(cx):
    cx.row_factory = sqlite3.Row
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON", "busy_timeout=10000"):
        cx.execute(f"PRAGMA {pragma}")


def _run_batch(cx, calls):
    """One transaction for all calls; each call inside its own SAVEPOINT so a failure rolls back alone.
    A lone call needs no SAVEPOINT (two statements saved on the common, uncontended path)."""
    isolate = len(calls) > 1
    outcomes = []
    cx.execute("BEGIN IMMEDIATE")
    try:
        for call in calls:
            if isolate:
                cx.execute("SAVEPOINT write")
            try:
                outcomes.append((True, call(cx)))
                if isolate:
                    cx.execute("RELEASE write")
            except Exception as exc:
                if not cx.in_transaction:
                    # SQLite rolled the whole transaction back (it may on SQLITE_FULL, IOERR, BUSY): fail
                    # the batch, or later calls would each commit alone through their SAVEPOINT.
                    raise
                if not isolate:
                    cx.execute("ROLLBACK")
                    return [(False, exc)]
                cx.execute("ROLLBACK TO write")
                cx.execute("RELEASE write")
                outcomes.append((False, exc))
        cx.execute("COMMIT")
    except BaseException:
        if cx.in_transaction:
            cx.execute("ROLLBACK")
        raise
    return outcomes


def _as_dict(row, json_columns):
    out = dict(row)
    for column in json_columns:
        out[column] = json.loads(out[column]) if out[column] else None
    return out


def fetch_one(cx, sql, params=(), json_columns=()):
    """The first row as a dict (JSON text columns decoded), or None."""
    row = cx.execute(sql, params).fetchone()
    return None if row is None else _as_dict(row, json_columns)


def fetch_all(cx, sql, params=(), json_columns=()):
    """Every row as a dict (JSON text columns decoded)."""
    return [_as_dict(row, json_columns) for row in cx.execute(sql, params)]


def reads(fn):
    """Make a sync storage function ``fn(cx, ...)`` awaitable as ``fn(db, ...)`` on the reader.
    The sync form stays reachable as ``fn.sync`` so transactions can compose storage functions."""
    @functools.wraps(fn)
    async def run(db, *args, **kwargs):
        return await db.read(fn, *args, **kwargs)
    run.sync = fn
    return run


def writes(fn):
    """Like ``reads``, but the call goes through the group-committing writer."""
    @functools.wraps(fn)
    async def run(db, *args, **kwargs):
        return await db.write(fn, *args, **kwargs)
    run.sync = fn
    return run
