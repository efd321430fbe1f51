"""The server's side of the SQLite writer process (storage/writer.py): the frames on its socket, starting it,
the watchdog that replaces a stalled one, and settling the batch a lost writer was running (writer_batches
says whether it committed) before the next writer starts. storage/sqlite_db.py's Database builds on it."""
from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TYPE_CHECKING, cast

from storage.interface import Connection, StorageUnavailable, StoredResultLost, WriteOutcomeUnknown

log = logging.getLogger("parley.db")

# After the writer process is lost: how long to wait for it to be gone, and for its batch record.
SETTLE_SECONDS = 5.0

NOT_WRITTEN = "the storage writer stopped before this write was committed; nothing was written, retry it"
STORED = ("the write is stored, but its answer was lost when the storage writer stopped; "
          "a retry with the same Idempotency-Key returns it")
UNKNOWN = "the write may or may not be stored; retry with the same Idempotency-Key"
CLOSING = "the database is closing; nothing was written"

FRAME_HEADER = struct.Struct("!I")  # each frame to and from the writer process: length, then a pickle
# A write as it crosses to the writer process: (module, qualname, args, kwargs) of its function.
Call = tuple[str, str, Sequence[Any], Mapping[str, Any]]
# A write waiting to be sent: the future its caller awaits, and the call.
Queued = tuple[asyncio.Future[Any], Call]


def encode_frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
    return FRAME_HEADER.pack(len(data)) + data


class _Batch:
    """One transaction's worth of writes sent to the writer process: its number (recorded inside the
    transaction, see writer_batches), the callers' futures and their calls in call order, whether it came
    from write_background, and its watchdog timer."""
    __slots__ = ("number", "futures", "calls", "background", "watchdog", "limit")
    watchdog: asyncio.TimerHandle | None

    def __init__(self, number: int, futures: list[asyncio.Future[Any]], calls: list[tuple[str, str, Sequence[Any], Mapping[str, Any]]], background: bool, limit: float) -> None:
        self.number, self.futures, self.calls, self.background = number, futures, calls, background
        self.limit, self.watchdog = limit, None


async def _exited(process: subprocess.Popen[bytes] | WriterThread, timeout: float) -> bool:
    """True once the process has exited (reaped), False if it still runs after timeout seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while process.poll() is None:
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


def _batch_record(cx: Connection, writer: str) -> tuple[int, list[int]]:
    row = cx.execute("SELECT batch, failed FROM writer_batches WHERE writer = ?", (writer,)).fetchone()
    return (row[0], json.loads(row[1]) if row[1] else []) if row else (0, [])


class _WriterConnection(asyncio.Protocol):
    """The parent's end of the socket to the writer process: reads reply frames as they arrive (never
    blocking the loop) and hands each to the Database."""

    transport: asyncio.Transport  # from connection_made on (a socket's transport)

    def __init__(self, on_reply: Callable[[Any], None], on_lost: Callable[[_WriterConnection], None]) -> None:
        self.on_reply, self.on_lost = on_reply, on_lost
        self.buffer = bytearray()
        self.transport = None  # type: ignore[assignment]  # until connection_made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.buffer:
            # The common case: the read holds whole frames, unpickled where they are (no copy into the buffer).
            start, view = 0, memoryview(data)
            while len(data) - start >= FRAME_HEADER.size:
                end = start + FRAME_HEADER.size + FRAME_HEADER.unpack_from(data, start)[0]
                if end > len(data):
                    break
                reply = pickle.loads(view[start + FRAME_HEADER.size:end])
                start = end
                self.on_reply(reply)
            data = view[start:]
        self.buffer += data
        while len(self.buffer) >= FRAME_HEADER.size:
            size = FRAME_HEADER.size + FRAME_HEADER.unpack_from(self.buffer)[0]
            if len(self.buffer) < size:
                return
            reply = pickle.loads(bytes(self.buffer[FRAME_HEADER.size:size]))
            del self.buffer[:size]
            self.on_reply(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_lost(self)


def _fail(futures: Iterable[asyncio.Future[Any]], exc: BaseException) -> None:
    """Answer every caller still waiting with exc."""
    for future in futures:
        if not future.done():
            future.set_exception(exc)


# The modules the writer imports while it starts, before a write needs them (storage/writer.py preload).
PRELOAD_VARIABLE = "PARLEY_WRITER_PRELOAD"
FAULT_VARIABLE = "PARLEY_WRITER_FAULT"  # storage/writer.py: a writer that kills itself is a process


def write_modules() -> set[str]:
    """Where write functions live: this process's storage modules, and the pure common ones they use (storage owns
    every function the writer runs; services pass values, and no services module is ever imported in the writer).
    Imported on a write's first use, they held up the writer's first batch (the inbound write's modules: ~0.5 s)
    and every write queued behind it, at each start of a writer (the first, and one replacing a lost writer)."""
    return {name for name in sys.modules if name.split(".")[0] in ("storage", "common")}


class WriterThread:
    """The writer's own loop (storage/writer.py serve()) on a thread of this process instead of a child process:
    the same frames, group commit, batch records and answers, without the process boundary. For the tests
    whose subject is not that boundary (tests/conftest.py's services fixture): a writer process costs a Python
    start and its storage and common modules' imports (~0.1 s of CPU, was ~0.7 s while services were preloaded),
    once per test. It offers what the supervision uses of
    subprocess.Popen: poll() and kill() (which can only cut the socket: a thread cannot be killed), and no
    pid, since there is no process to signal. The server never uses it."""
    pid = None

    def __init__(self, path: str | Path, sock: socket.socket, token: str) -> None:
        from storage import writer  # it imports this module
        self._sock = sock

        def run() -> None:
            try:
                writer.serve(str(path), sock, token)
            finally:
                sock.close()
        self._thread = threading.Thread(target=run, name="parley-writer", daemon=True)
        self._thread.start()

    def poll(self) -> int | None:
        return None if self._thread.is_alive() else 0

    def kill(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class WriterSupervision:
    """What Database (storage/sqlite_db.py) does about its writer process: start it, replace it when it stalls
    or dies, and tell the callers of a lost writer's batch what became of their writes. It uses the Database's
    state (_process, _connection, _flights, _pending, _background, ...) and its read(), _on_reply, _send_batch."""

    writer_in_thread = False  # WriterThread instead of a process: tests only (tests/conftest.py)

    # The Database's state and methods this works with (storage/sqlite_db.py sets and defines them).
    path: Path
    token: str
    _process: subprocess.Popen[bytes] | WriterThread | None
    _connection: _WriterConnection | None
    _pending: collections.deque[Queued]
    _background: collections.deque[Queued]
    _flights: collections.deque[_Batch]
    _closing: bool
    _idle: asyncio.Event
    _batches_since_start: int
    _failed_starts: int
    _down: StorageUnavailable | None
    _recovery: asyncio.Task[None] | None
    if TYPE_CHECKING:
        async def read(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...
        def _on_reply(self, reply: tuple[str, Any]) -> None: ...
        def _send_batch(self) -> None: ...
        def _committed(self) -> None: ...

    async def _start_writer(self) -> None:
        theirs: socket.socket | None
        ours, theirs = socket.socketpair()
        try:
            if self.writer_in_thread and not os.environ.get(FAULT_VARIABLE):
                self._process, theirs = WriterThread(self.path, theirs, self.token), None  # the thread owns it
            else:
                # The parent's sys.path, so that every module a write function lives in imports there too.
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
                       PRELOAD_VARIABLE: ",".join(sorted(write_modules()))}
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "storage.writer", str(self.path), str(theirs.fileno()), self.token],
                    pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
                    start_new_session=True)  # a terminal's Ctrl-C goes to the server, which stops the writer
        except BaseException:
            ours.close()
            raise
        finally:
            if theirs is not None:
                theirs.close()
        self._batches_since_start = 0
        try:
            _, self._connection = await asyncio.get_running_loop().create_connection(
                lambda: _WriterConnection(self._on_reply, self._on_writer_lost), sock=ours)
        except BaseException:
            ours.close()
            self._process.kill()
            raise

    @property
    def writer_down(self) -> StorageUnavailable | None:
        """Why writes are refused while the writer is being restarted, or None (the health check)."""
        return self._down

    @property
    def writer_pid(self) -> int | None:
        """The writer process's pid (None when closed)."""
        return self._process.pid if self._process is not None else None

    @property
    def _in_flight(self) -> _Batch | None:
        """The batch the writer process is running (the oldest sent), or None."""
        return self._flights[0] if self._flights else None

    def _watch(self, batch: _Batch) -> None:
        """The watchdog for the batch the writer has started on (the oldest sent)."""
        batch.watchdog = asyncio.get_running_loop().call_later(batch.limit, self._stalled, batch)

    def _stalled(self, batch: _Batch) -> None:
        """The watchdog: the writer has run one batch for stall_seconds (a stuck disk, a lock held by
        another process, a stopped process). Replace it; its batches are settled like a lost writer's."""
        if self._in_flight is batch and self._connection is not None:
            log.error("the writer process has been running one batch of %d writes for %g s; replacing it",
                      len(batch.futures), batch.limit)
            self._replace_writer()

    def _replace_writer(self) -> None:
        # Only while a writer runs and is connected: _process and _connection are set.
        self._process.kill()  # type: ignore[union-attr]  # SIGKILL also ends a stopped (SIGSTOP) process
        # Let go of it now, even if the process cannot die yet (blocked in the kernel): its batches are
        # settled and the next writer started; its late connection_lost is then ignored.
        connection = cast(_WriterConnection, self._connection)
        connection.transport.close()
        self._on_writer_lost(connection, replaced=True)

    def _on_writer_lost(self, connection: _WriterConnection, replaced: bool = False) -> None:
        if connection is not self._connection or (self._closing and not self._flights):
            return
        self._connection = None  # until the restarted writer is connected, writes only queue
        batches, self._flights = list(self._flights), collections.deque()
        for batch in batches:
            if batch.watchdog is not None:
                batch.watchdog.cancel()
        process = self._process
        log.error("the writer process stopped unexpectedly (exit code %s); %d writes were in flight",
                  process and process.poll(), sum(len(batch.futures) for batch in batches))
        self._failed_starts = 0 if self._batches_since_start else self._failed_starts + 1
        self._recovery = asyncio.ensure_future(self._recover(batches, process, replaced))

    async def _recover(self, batches: list[_Batch], process: subprocess.Popen[bytes] | WriterThread | None, replaced: bool) -> None:
        """Settle the lost writer's batches (before any new batch can overwrite its record), then start
        the next writer."""
        if batches:
            await self._settle(batches, process, replaced)
        await self._restart_writer()

    async def _settle(self, batches: list[_Batch], process: subprocess.Popen[bytes] | WriterThread | None, replaced: bool) -> None:
        """Tell each caller of the batches sent to the lost writer what became of its write: once the process
        is gone, its record in writer_batches says which batch it committed last and which of that batch's
        calls rolled back. The writer reads a batch only once it has sent the answer to the one before, and
        every answer it sent is read before its loss is seen: so the batches after the first unanswered one
        were never read, and their writes go to the next writer. Unless the server cut the connection itself
        (replaced, the watchdog), which may drop an answer on its way: then only a batch that did not commit
        proves that the next one was never read."""
        record = None
        if await _exited(process, SETTLE_SECONDS):  # type: ignore[arg-type]  # a lost writer was started
            try:
                record = await asyncio.wait_for(self.read(_batch_record, self.token), SETTLE_SECONDS)
            except Exception as exc:
                log.error("could not read what the lost writer committed: %r", exc)
        else:
            log.error("the lost writer process (pid %s) is still running; its batches' outcome is unknown",
                      process.pid)  # type: ignore[union-attr]
        started, unread = True, []
        for batch in batches:
            if not started:  # never read by the lost writer
                unread.append(batch)
                continue
            self._settle_batch(batch, record)
            started = replaced and (record is None or record[0] >= batch.number)
        for batch in reversed(unread):  # sent again, first, to the next writer: nothing of them was written
            queue = self._background if batch.background else self._pending
            queue.extendleft(reversed([(f, c) for f, c in zip(batch.futures, batch.calls) if not f.done()]))

    def _settle_batch(self, batch: _Batch, record: tuple[int, list[int]] | None) -> None:
        # A batch committed before the last one recorded, yet unanswered, cannot happen (see _settle); if it
        # did, which of its calls rolled back is not known: unknown, never "stored" for a call that was not.
        known = record is not None and record[0] <= batch.number
        committed = record is not None and record[0] >= batch.number
        failed = set(record[1]) if committed and record[0] == batch.number else set()  # type: ignore[index]
        log.error("the lost writer's batch of %d writes %s", len(batch.futures),
                  "is unknown" if not known else "was committed" if committed else "was not committed")
        if known and committed and len(failed) < len(batch.futures):  # some call's write is stored: like a reply
            self._committed()
        for index, future in enumerate(batch.futures):
            if future.done():
                continue
            if not known:
                future.set_exception(WriteOutcomeUnknown(UNKNOWN))
            elif committed and index not in failed:
                future.set_exception(StoredResultLost(STORED))
            else:
                future.set_exception(StorageUnavailable(NOT_WRITTEN))

    async def _restart_writer(self) -> None:
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
                self._fail_pending(StorageUnavailable(CLOSING))
                return
            try:
                await self._start_writer()
                break
            except Exception as exc:
                log.error("could not start the writer process: %s", exc)
                self._failed_starts += 1
        self._down = None
        self._send_batch()

    def _fail_pending(self, exc: BaseException) -> None:
        _fail([future for queue in (self._pending, self._background) for future, _ in queue], exc)
        self._pending.clear()
        self._background.clear()
        if not self._flights:
            self._idle.set()
