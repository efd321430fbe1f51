"""Database: the single SQLite writer (group commit, in a child process: storage/writer.py) and the
reader connection."""
import asyncio
import collections
import functools
import json
import logging
import os
import pickle
import socket
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import aiosqlite

from common.errors import Unavailable

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


FRAME_HEADER = struct.Struct("!I")  # each frame to and from the writer process: length, then a pickle


def encode_frame(obj):
    data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
    return FRAME_HEADER.pack(len(data)) + data


def function_reference(fn):
    """(module, qualname) of a module-level function: how a write names its function to the writer
    process. Closures and lambdas cannot cross a process boundary: TypeError, at the call."""
    reference = _references.get(fn)
    if reference is None:
        if "<locals>" in fn.__qualname__ or fn.__name__ == "<lambda>":
            raise TypeError(f"Database.write needs a module-level function, not {fn.__qualname__}: "
                            "it runs in the writer process")
        reference = _references[fn] = (fn.__module__, fn.__qualname__)
    return reference


_references = {}


class _WriterConnection(asyncio.Protocol):
    """The parent's end of the socket to the writer process: reads reply frames as they arrive (never
    blocking the loop) and hands each to the Database."""

    def __init__(self, on_reply, on_lost):
        self.on_reply, self.on_lost = on_reply, on_lost
        self.buffer = bytearray()
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buffer += data
        while len(self.buffer) >= FRAME_HEADER.size:
            size = FRAME_HEADER.size + FRAME_HEADER.unpack_from(self.buffer)[0]
            if len(self.buffer) < size:
                return
            reply = pickle.loads(bytes(self.buffer[FRAME_HEADER.size:size]))
            del self.buffer[:size]
            self.on_reply(reply)

    def connection_lost(self, exc):
        self.on_lost()


class Database:
    """The single writer (a child process, storage/writer.py) and one reader connection (a thread).

    ``write(fn, *args)`` queues ``fn(cx, *args)`` -- fn a module-level function, args and result plain
    data, since both cross to the writer process. Every call queued while a transaction is in flight
    goes into the next one (group commit), each inside a SAVEPOINT so one failing call rolls back
    alone, and each caller's future resolves only after COMMIT returned: an answered write is durable.
    """

    def __init__(self, path):
        self.path = Path(path).resolve()
        self.transactions_committed = 0
        self.writes_committed = 0
        self._reader = None
        self._process = None
        self._connection = None
        self._pending = collections.deque()  # (future, call) not yet sent
        self._in_flight = None  # the futures of the batch the writer process is running
        self._send_scheduled = False
        self._closing = False
        self._idle = None
        self._batches_since_start = 0
        self._failed_starts = 0  # writers in a row that died before answering a batch
        self._down = None  # while the writer is being restarted after a delay: why writes are refused
        self._commit_listeners = []

    async def open(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._idle = asyncio.Event()
        self._idle.set()
        await self._start_writer()  # its interpreter starts while the migrations run
        cx = connect_sync(self.path)
        try:
            migrate(cx)
        finally:
            cx.close()
        self._reader = await aiosqlite.connect(self.path, isolation_level=None, check_same_thread=False)
        await self._reader._execute(_configure, self._reader._conn)
        return self

    async def _start_writer(self):
        ours, theirs = socket.socketpair()
        try:
            # The parent's sys.path, so that every module a write function lives in imports there too.
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
            self._process = subprocess.Popen(
                [sys.executable, "-m", "storage.writer", str(self.path), str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
                start_new_session=True)  # a terminal's Ctrl-C goes to the server, which stops the writer
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._batches_since_start = 0
        try:
            _, self._connection = await asyncio.get_running_loop().create_connection(
                lambda: _WriterConnection(self._on_reply, self._on_writer_lost), sock=ours)
        except BaseException:
            ours.close()
            self._process.kill()
            raise

    def add_commit_listener(self, callback):
        """callback() after every transaction that committed a write (before its callers resume): the live
        events hub reads what was committed. It must be quick and must not raise."""
        self._commit_listeners.append(callback)

    @property
    def writer_pid(self):
        """The writer process's pid (None when closed)."""
        return self._process.pid if self._process is not None else None

    async def close(self):
        """Flush queued writes, stop the writer process, close the reader."""
        if self._process is not None:
            self._closing = True
            await self._idle.wait()
            if self._connection is not None:  # None: the writer died and could not be restarted
                self._connection.transport.write(encode_frame(None))
                self._connection.transport.close()
            process, self._process = self._process, None
            loop = asyncio.get_running_loop()
            try:
                await asyncio.wait_for(loop.run_in_executor(None, process.wait), 30)
            except asyncio.TimeoutError:
                log.error("the writer process did not stop; killing it")
                process.kill()
        if self._reader is not None:
            await self._reader.close()
            self._reader = None

    async def read(self, fn, *args, **kwargs):
        """Run ``fn(cx, *args)`` on the reader connection (one thread hop)."""
        return await self._reader._execute(fn, self._reader._conn, *args, **kwargs)

    async def write(self, fn, *args, **kwargs):
        """Queue ``fn(cx, *args)`` for the writer process; returns its result once committed."""
        if self._process is None or self._closing:
            raise RuntimeError("database is closed")
        if self._down is not None:
            raise self._down
        future = asyncio.get_running_loop().create_future()
        self._pending.append((future, (*function_reference(fn), args, kwargs)))
        self._idle.clear()
        if self._in_flight is None and not self._send_scheduled:
            # Sent at the end of this loop iteration: writes queued meanwhile share the transaction.
            self._send_scheduled = True
            asyncio.get_running_loop().call_soon(self._send_batch)
        return await future

    async def backup(self, target_path):
        target = sqlite3.connect(str(target_path))
        try:
            await self._reader._execute(self._reader._conn.backup, target)
        finally:
            target.close()

    def _send_batch(self):
        self._send_scheduled = False
        if self._in_flight is not None or self._connection is None:
            return  # the reply (or the restarted writer) sends what is pending
        futures, calls = [], []
        while self._pending and len(calls) < MAX_BATCH:
            future, call = self._pending.popleft()
            if not future.cancelled():
                futures.append(future)
                calls.append(call)
        if not calls:
            self._idle.set()
            return
        try:
            frame = encode_frame(calls)
        except Exception:  # some call's arguments cannot be pickled: fail those, send the rest
            frame = self._encode_picklable(futures, calls)
            if frame is None:
                return self._send_batch()
        self._in_flight = futures
        self._connection.transport.write(frame)

    @staticmethod
    def _encode_picklable(futures, calls):
        kept = []
        for future, call in zip(list(futures), calls):
            try:
                pickle.dumps(call, pickle.HIGHEST_PROTOCOL)
                kept.append(call)
            except Exception as exc:
                futures.remove(future)
                future.set_exception(TypeError(f"the arguments of {call[1]} cannot be sent to the writer: {exc}"))
        return encode_frame(kept) if kept else None

    def _on_reply(self, reply):
        self._batches_since_start += 1
        futures, self._in_flight = self._in_flight, None
        kind, value = reply
        if kind == "failed":  # COMMIT itself failed: nobody's write is durable.
            log.error("write transaction failed, %d writes rejected: %s", len(futures), value)
            _fail(futures, as_unavailable(value))
        else:
            if any(ok for ok, _ in value):  # a lone failed call was rolled back, not committed
                self.transactions_committed += 1
                for callback in self._commit_listeners:
                    callback()
            self.writes_committed += sum(1 for ok, _ in value if ok)
            for future, (ok, result) in zip(futures, value):
                if future.done():
                    continue
                if ok:
                    future.set_result(result)
                else:
                    unavailable = as_unavailable(result)
                    if unavailable is not result:
                        log.error("write rejected: %s", result)
                    future.set_exception(unavailable)
        self._send_batch()

    def _on_writer_lost(self):
        if self._closing and self._in_flight is None:
            return
        self._connection = None  # until the restarted writer is connected, writes only queue
        futures, self._in_flight = self._in_flight or [], None
        log.error("the writer process stopped unexpectedly (exit code %s); %d writes in flight failed",
                  self._process and self._process.poll(), len(futures))
        _fail(futures, StorageUnavailable("the storage writer stopped; the write may not be stored, retry it"))
        self._failed_starts = 0 if self._batches_since_start else self._failed_starts + 1
        asyncio.ensure_future(self._restart_writer())

    async def _restart_writer(self):
        """A writer that served is replaced at once (queued writes wait for it). Writers that keep dying
        before serving anything (the database cannot be opened, say) are retried after 0.5 s, doubling
        to 30 s, and meanwhile every write is refused with 503 at once rather than left waiting."""
        while True:
            if self._failed_starts >= 2:
                delay = min(30.0, 0.5 * 2 ** (self._failed_starts - 2))
                self._down = StorageUnavailable("the storage writer is restarting; nothing was written, retry later")
                self._fail_pending(self._down)
                log.error("the writer process keeps stopping; next start in %.1f s", delay)
                await asyncio.sleep(delay)
            if self._closing:
                self._down = None
                self._fail_pending(StorageUnavailable("the database is closing; nothing was written"))
                return
            try:
                await self._start_writer()
                break
            except Exception as exc:
                log.error("could not start the writer process: %s", exc)
                self._failed_starts += 1
        self._down = None
        self._send_batch()

    def _fail_pending(self, exc):
        _fail([future for future, _ in self._pending], exc)
        self._pending.clear()
        if self._in_flight is None:
            self._idle.set()


def _fail(futures, exc):
    """Answer every caller still waiting with exc."""
    for future in futures:
        if not future.done():
            future.set_exception(exc)


def _configure(cx):
    cx.row_factory = sqlite3.Row
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON", "busy_timeout=10000"):
        cx.execute(f"PRAGMA {pragma}")


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
