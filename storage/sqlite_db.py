"""The SQLite backend: the single writer (group commit, in a child process: storage/writer.py) and the
reader connection."""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import pickle
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Concatenate

import aiosqlite

from storage.dialect import SQLITE
from storage.interface import Conflict, Connection, P, R, StorageUnavailable, function_reference, idempotency_claim
from storage.writer_supervisor import (CLOSING, Call, SETTLE_SECONDS, WriterSupervision, _Batch, _exited, _fail,
                                       encode_frame)

log = logging.getLogger("parley.db")

# Upper bound on the writes folded into one transaction; keeps a batch's latency bounded.
MAX_BATCH = 256
# The writes of one transaction while few wait. Each is answered only after its transaction's COMMIT, so it
# waits for every other write of its batch; small transactions, two in flight (PIPELINE), answer sooner and the
# writer still never idles between them. Inbound at 32 connections took 15-25 writes a batch when every waiting
# write went in, and the event loop idled ~20 % of the time waiting for them; at 12: +20-30 % requests/s
# (bench/README.md, "the writer's batch size"). A longer queue gets a quarter of it (a backlog still commits in
# few transactions), and while a background write waits or runs, a transaction takes all that wait (up to MAX_BATCH).
STEADY_BATCH = 12
# Transactions sent to the writer before the first is answered. With one, the writer idled from its COMMIT
# until the event loop had read the answer and sent the next batch, and the loop idled while every client
# waited on the writer (inbound at 32 connections: the loop ~75 % busy); with the next batch already in the
# writer's socket it starts at once (the same load: ~85 %, +25 % requests/s, p99 -40 %). The writer still
# runs one transaction at a time, in order; each caller is answered after its own COMMIT.
PIPELINE = 2


QUEUE_FULL = "storage is busy: too many writes are waiting; nothing was written, retry later"

_UNAVAILABLE = {sqlite3.SQLITE_FULL: "storage is full", sqlite3.SQLITE_READONLY: "storage is read-only",
                sqlite3.SQLITE_IOERR: "storage I/O error",
                sqlite3.SQLITE_BUSY: "storage is locked by another process"}


_UNIQUE = (sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)


def as_unavailable(exc: BaseException) -> BaseException:
    """SQLite's disk-full, read-only, I/O and busy errors as StorageUnavailable (the client may retry once
    the operator fixed the disk, or the lock is free), a unique-key clash as Conflict; any other exception
    unchanged."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code in _UNIQUE:
        conflict = Conflict(f"already stored: {exc}")
        conflict.__cause__ = exc
        return conflict
    reason = _UNAVAILABLE.get(code & 0xFF) if isinstance(code, int) else None
    if reason is None:
        return exc
    unavailable = StorageUnavailable(f"{reason}; nothing was written, retry later")
    unavailable.__cause__ = exc
    return unavailable


class SqliteConnection(sqlite3.Connection):
    """sqlite3's connection, plus what storage code asks of either database's (storage/pg_adapter.py)."""
    dialect = SQLITE
    _savepoints = 0

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[SqliteConnection]:
        """A nested transaction: what fails inside it rolls back alone and the transaction goes on."""
        SqliteConnection._savepoints += 1
        name = f"sp{SqliteConnection._savepoints}"
        self.execute(f"SAVEPOINT {name}")
        try:
            yield self
        except BaseException:
            self.execute(f"ROLLBACK TO {name}")
            self.execute(f"RELEASE {name}")
            raise
        self.execute(f"RELEASE {name}")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[SqliteConnection]:
        self.execute("BEGIN IMMEDIATE")
        try:
            yield self
        except BaseException:
            if self.in_transaction:  # (SQLite rolls back by itself on some errors: SQLITE_FULL, IOERR, BUSY)
                self.execute("ROLLBACK")
            raise
        self.execute("COMMIT")

    def execute_script(self, script: str) -> None:
        self.executescript(script)


# Erasure (GDPR art. 17, storage/erasure.py) must leave no byte of a person in the database file. SQLite keeps
# the old bytes of deleted or rewritten rows in free space until the page is reused: secure_delete overwrites
# them with zeros on every delete and update (on every connection, the writer process's too: a row rewritten
# long before its erasure left its old version behind). The old page versions the WAL still holds go with
# Database.purge_deleted (checkpoint_wal) after an erasure.
SECURE_DELETE = "secure_delete=ON"


def connect_sync(path: str | Path, *, timeout: float = 10.0) -> SqliteConnection:
    """A plain sqlite3 connection with Parley's PRAGMAs (used by ops commands and the threads below)."""
    cx = sqlite3.connect(str(path), timeout=timeout, isolation_level=None, check_same_thread=False,
                         factory=SqliteConnection)
    cx.row_factory = sqlite3.Row
    cx.execute("PRAGMA journal_mode=WAL")
    cx.execute("PRAGMA synchronous=FULL")
    cx.execute("PRAGMA foreign_keys=ON")
    cx.execute(f"PRAGMA {SECURE_DELETE}")
    cx.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    return cx


def checkpoint_wal(path: str | Path) -> bool:
    """Copy every page of the WAL into the database file and truncate the WAL to zero bytes, so that no old
    version of a page (an erased row's) stays in it. Blocking (run it in an executor); waits for readers and
    the writer up to the busy timeout. True when the WAL was emptied, False when a connection kept it busy."""
    cx = connect_sync(path)
    try:
        busy, _, _ = cx.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy == 0
    finally:
        cx.close()


class Database(WriterSupervision):
    """The single writer (a child process, storage/writer.py) and one reader connection (a thread).

    ``write(fn, *args)`` queues ``fn(cx, *args)`` -- fn a module-level function, args and result plain
    data, since both cross to the writer process. Every call queued while a transaction is in flight
    goes into the next one (group commit), each inside a SAVEPOINT so one failing call rolls back
    alone, and each caller's future resolves only after COMMIT returned: an answered write is durable.
    ``write_background(fn, *args)`` is for long writes (a campaign's batch): each runs alone, taking turns
    with the transactions of the others.

    What a failure means is always known and said: every transaction also records its batch number
    (writer_batches), so when the writer process dies (or is replaced by the watchdog) before answering,
    the callers of its batch learn whether their write is stored (StoredResultLost) or not
    (StorageUnavailable); WriteOutcomeUnknown only when even that cannot be read. At most ``max_pending``
    writes wait (503 at once beyond), and a batch that runs longer than ``stall_seconds`` gets its writer
    replaced, so a hung writer (a stuck disk, a lock held elsewhere) cannot hold requests for ever.
    """

    _reader: aiosqlite.Connection | None

    def __init__(self, path: str | Path, *, max_pending: int = 10_000, stall_seconds: float = 15.0) -> None:
        self.path = Path(path).resolve()
        self.max_pending, self.stall_seconds = max_pending, stall_seconds
        self.token = os.urandom(8).hex()  # names this Database's rows in writer_batches
        self.transactions_committed = 0
        self.writes_committed = 0
        self._reader = None
        self._process = None
        self._connection = None
        self._pending = collections.deque()  # (future, call) not yet sent
        self._background = collections.deque()  # the same, from write_background
        self._background_last = False  # whether the last transaction sent was a background write
        self._flights = collections.deque()  # the _Batches sent and not answered; the first is the one running
        self._batches_sent = 0
        self._send_scheduled = False
        self._closing = False
        self._idle = None  # type: ignore[assignment]  # until open()
        self._batches_since_start = 0
        self._failed_starts = 0  # writers in a row that died before answering a batch
        self._down = None  # while the writer is being restarted after a delay: why writes are refused
        self._recovery = None  # the task settling a lost writer's batch and starting the next writer
        self._commit_listeners: list[Callable[[], None]] = []

    async def open(self) -> Database:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._idle = asyncio.Event()
        self._idle.set()
        await self._start_writer()  # its interpreter starts while the migrations run
        cx = connect_sync(self.path)
        try:
            from storage import db  # its MIGRATIONS: tests point it elsewhere
            db.migrate(cx)
        finally:
            cx.close()
        self._reader = await aiosqlite.connect(self.path, isolation_level=None, check_same_thread=False,
                                              factory=SqliteConnection)
        await self._reader._execute(_configure, self._reader._conn)
        return self

    def connect_sync(self) -> SqliteConnection:
        """A connection of its own to the database file (ops commands, tests); the caller closes it."""
        return connect_sync(self.path)

    purges_in_background = False  # a checkpoint is quick: the erasure's answer waits for it

    async def purge_deleted(self, tables: Sequence[str] = ()) -> bool:
        """After an erasure: no old version of a deleted row left in the WAL (secure_delete zeroed the
        file's free space already; tables are PostgreSQL's concern). True when done, False when a connection
        kept the WAL busy."""
        return await asyncio.get_running_loop().run_in_executor(None, checkpoint_wal, self.path)

    def add_commit_listener(self, callback: Callable[[], None]) -> None:
        """callback() after every transaction that committed a write (before its callers resume): the live
        events hub reads what was committed. It must be quick and must not raise."""
        self._commit_listeners.append(callback)

    async def close(self, timeout: float = 30.0) -> None:
        """Flush queued writes (for at most ``timeout`` seconds: then the writes still waiting are
        refused and a batch still running is settled like a lost writer's), stop the writer process,
        close the reader."""
        if self._process is not None:
            self._closing = True
            try:
                await asyncio.wait_for(self._idle.wait(), timeout)
            except TimeoutError:
                log.error("closing: writes still queued after %g s are refused", timeout)
                self._fail_pending(StorageUnavailable(CLOSING))
                if self._flights and self._connection is not None:
                    self._replace_writer()
            if self._recovery is not None and not self._recovery.done():
                try:  # settling takes seconds at most; a restart backing off is cut short
                    await asyncio.wait_for(asyncio.shield(self._recovery), timeout)
                except TimeoutError:
                    self._recovery.cancel()
                self._fail_pending(StorageUnavailable(CLOSING))
            if self._connection is not None:  # None: the writer died and could not be restarted
                self._connection.transport.write(encode_frame(None))
                self._connection.transport.close()
            process, self._process = self._process, None
            if not await _exited(process, timeout):
                log.error("the writer process did not stop; killing it")
                process.kill()
                await _exited(process, SETTLE_SECONDS)
        if self._reader is not None:
            await self._reader.close()
            self._reader = None

    async def read(self, fn: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(cx, *args)`` on the reader connection (one thread hop)."""
        return await self._reader._execute(fn, self._reader._conn, *args, **kwargs)  # type: ignore[union-attr]

    async def write(self, fn: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Queue ``fn(cx, *args)`` for the writer process; returns its result once committed. Inside a
        request that carries an Idempotency-Key (storage/idempotency.py), the request's first write is
        run under that key instead."""
        claim = idempotency_claim.get()
        if claim is not None and claim.open:
            return await claim.run(self, fn, args, kwargs)
        return await self._queue(self._pending, fn, args, kwargs)

    async def write_background(self, fn: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Like write(), for a long write that can wait (a campaign's batch of hundreds of messages): it runs in
        a transaction of its own, and such transactions alternate with those of the other writes, so that
        neither waits for more than one of the other kind. A caller can keep the next one queued while one
        runs: the writer then never idles between them, and the writes that arrive meanwhile still go first."""
        return await self._queue(self._background, fn, args, kwargs)

    def _queue(self, queue: collections.deque[tuple[asyncio.Future[Any], tuple[str, str, Sequence[Any], Mapping[str, Any]]]], fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> asyncio.Future[Any]:
        """Queue a call; returns the future its outcome resolves."""
        if self._process is None or self._closing:
            raise RuntimeError("database is closed")
        if self._down is not None:
            raise self._down
        if len(self._pending) + len(self._background) >= self.max_pending:
            raise StorageUnavailable(QUEUE_FULL)
        future = asyncio.get_running_loop().create_future()
        queue.append((future, (*function_reference(fn), args, kwargs)))
        self._idle.clear()
        if len(self._flights) < PIPELINE and not self._send_scheduled:
            # Sent at the end of this loop iteration: writes queued meanwhile share the transaction.
            self._send_scheduled = True
            asyncio.get_running_loop().call_soon(self._send_batch)
        return future

    async def backup(self, target_path: str | Path) -> None:
        target = sqlite3.connect(str(target_path))
        try:
            await self._reader._execute(self._reader._conn.backup, target)  # type: ignore[union-attr]
        finally:
            target.close()

    def _send_batch(self) -> None:
        """Send transactions until PIPELINE are in flight or nothing waits; a reply (or the restarted writer)
        sends the rest."""
        self._send_scheduled = False
        while len(self._flights) < PIPELINE and self._connection is not None:
            futures, calls = self._next_calls()
            if not calls:
                if not self._flights:
                    self._idle.set()
                return
            self._batches_sent += 1
            number = self._batches_sent
            frame: bytes | None
            try:
                frame = encode_frame((number, calls))
            except Exception:  # some call's arguments cannot be pickled: fail those, send the rest
                frame = self._encode_picklable(number, futures, calls)
                if frame is None:
                    continue
            batch = _Batch(number, futures, calls, self._background_last, self.stall_seconds)
            self._flights.append(batch)
            if len(self._flights) == 1:
                self._watch(batch)
            self._connection.transport.write(frame)

    def _next_calls(self) -> tuple[list[asyncio.Future[Any]], list[tuple[str, str, Sequence[Any], Mapping[str, Any]]]]:
        """The next transaction's (futures, calls): the writes waiting (as many as _batch_limit says), or one
        background write, alternating while both kinds wait."""
        while self._pending or self._background:
            background = bool(self._background) and (not self._pending or not self._background_last)
            queue, limit = (self._background, 1) if background else (self._pending, self._batch_limit())
            self._background_last = background
            futures: list[asyncio.Future[Any]] = []
            calls: list[Call] = []
            while queue and len(calls) < limit:
                future, call = queue.popleft()
                if not future.cancelled():
                    futures.append(future)
                    calls.append(call)
            if calls:
                return futures, calls
        return [], []

    def _batch_limit(self) -> int:
        """How many of the waiting writes the next transaction takes (STEADY_BATCH says why)."""
        if self._background or any(batch.background for batch in self._flights):
            return MAX_BATCH  # these wait for a background write anyway: take every one that waits
        return min(MAX_BATCH, max(STEADY_BATCH, len(self._pending) // 4))

    @staticmethod
    def _encode_picklable(number: int, futures: list[asyncio.Future[Any]], calls: list[tuple[str, str, Sequence[Any], Mapping[str, Any]]]) -> bytes | None:
        """The frame of the calls whose arguments can be pickled; futures and calls keep only those (the
        others' callers are answered TypeError)."""
        kept = []
        for future, call in zip(list(futures), list(calls)):
            try:
                pickle.dumps(call, pickle.HIGHEST_PROTOCOL)
                kept.append((future, call))
            except Exception as exc:
                future.set_exception(TypeError(f"the arguments of {call[1]} cannot be sent to the writer: {exc}"))
        futures[:], calls[:] = [f for f, _ in kept], [c for _, c in kept]
        return encode_frame((number, calls)) if kept else None

    def _on_reply(self, reply: tuple[str, Any]) -> None:
        self._batches_since_start += 1
        batch = self._flights.popleft()
        batch.watchdog.cancel()  # type: ignore[union-attr]  # _watch set it when the writer started on it
        if self._flights:  # the writer has started on the next one
            self._watch(self._flights[0])
        futures = batch.futures
        kind, value = reply
        if kind == "failed":  # COMMIT itself failed: nobody's write is durable.
            log.error("write transaction failed, %d writes rejected: %s", len(futures), value)
            _fail(futures, as_unavailable(value))
        else:
            if any(ok for ok, _ in value):  # a lone failed call was rolled back, not committed
                self._committed()
            self.writes_committed += sum(1 for ok, _ in value if ok)
            for future, (ok, result) in zip(futures, value):
                if future.done():
                    continue
                if ok:
                    future.set_result(result)
                else:
                    unavailable = as_unavailable(result)
                    if unavailable is not result and not isinstance(unavailable, Conflict):
                        log.error("write rejected: %s", result)
                    future.set_exception(unavailable)
        self._send_batch()

    def _committed(self) -> None:
        """A transaction with at least one stored write committed (answered, or settled after its writer
        was lost): count it and call the commit listeners, before its callers resume."""
        self.transactions_committed += 1
        for callback in self._commit_listeners:
            callback()

def _configure(cx: sqlite3.Connection) -> None:
    cx.row_factory = sqlite3.Row
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON", SECURE_DELETE, "busy_timeout=10000"):
        cx.execute(f"PRAGMA {pragma}")


