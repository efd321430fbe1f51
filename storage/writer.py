"""The single SQLite writer as a child process: runs batches of write functions, one transaction per
batch, and answers each call only after COMMIT.

Why a process and not a thread: the event loop and a writer thread share one GIL, so every statement
the writer ran (and every hand-off of the GIL around it) came out of the loop's one core. A child
process runs SQLite on the machine's other core (measurements in bench/README.md).

    python -m storage.writer DB_PATH FD TOKEN

FD is this process's end of a socketpair (Database in storage/db.py holds the other). Both ways a
frame is a 4-byte big-endian length and a pickle:
  parent -> child  (batch number, a list of calls, each (module, qualname, args, kwargs)), or None to stop;
  child -> parent  ("done", [(ok, result or exception), ...]) after COMMIT, one outcome per call, or
                   ("failed", exception) when the transaction as a whole failed (nothing committed).
Each committed transaction also records (TOKEN, batch number, the calls that rolled back) in
writer_batches, so that the parent can tell what a writer that died before answering had committed.

PARLEY_WRITER_PRELOAD (set by the parent): modules to import on a thread while it starts (preload()).

PARLEY_WRITER_FAULT=kill-after-commit:MODULE.FUNCTION[,...] (tests only; read once at start) makes the
writer kill itself with SIGKILL after committing a batch that calls one of those functions, before
its answer is sent: the fault the batch records exist for.
"""
from __future__ import annotations

import signal

if __name__ == "__main__":
    # First of all, before the imports below: the parent decides when to stop (it flushes queued writes
    # first), so a Ctrl-C or a service manager's SIGTERM to every process must not cut this one short.
    # It stops at EOF or at a None frame.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

import importlib
import json
import os
import pickle
import socket
import sqlite3
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from common.errors import DomainError
from storage.db import FRAME_HEADER, connect_sync, encode_frame, resolve
from storage.search import index_pending_batch
from storage.writer_supervisor import FAULT_VARIABLE, PRELOAD_VARIABLE

if TYPE_CHECKING:  # (annotations only: nothing more is imported before the writer serves)
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from pathlib import Path

    from storage.interface import Connection
    from storage.sqlite_db import SqliteConnection

_RECORD_BATCH = ("INSERT INTO writer_batches (writer, batch, failed, at) VALUES (?, ?, ?, ?)"
                 " ON CONFLICT (writer) DO UPDATE SET batch = excluded.batch, failed = excluded.failed,"
                 " at = excluded.at")


def run_batch(cx: SqliteConnection, calls: Sequence[Callable[[Connection], Any]], mark: tuple[str, int] | None = None) -> list[tuple[bool, Any]]:
    """One transaction for all calls; each call inside its own SAVEPOINT so a failure rolls back alone.
    A lone call needs no SAVEPOINT (two statements saved on the common, uncontended path). mark:
    (writer token, batch number), recorded in writer_batches inside the transaction with the indexes
    of the calls that rolled back. Returns [(ok, result or exception)]; raises when the transaction as
    a whole cannot commit."""
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
        if mark is not None:
            failed = [i for i, (ok, _) in enumerate(outcomes) if not ok]
            cx.execute(_RECORD_BATCH, (*mark, json.dumps(failed) if failed else None, int(time.time())))
        cx.execute("COMMIT")
    except BaseException:
        if cx.in_transaction:
            cx.execute("ROLLBACK")
        raise
    return outcomes


def _bound(module: str, qualname: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Callable[[Connection], Any]:
    def call(cx: Connection) -> Any:
        return resolve(module, qualname)(cx, *args, **kwargs)
    return call


def portable(exc: BaseException) -> BaseException:
    """An exception the parent can unpickle. Faults (not a DomainError, not SQLite's) carry this
    process's traceback as a note, so the parent's log shows where they happened."""
    if not isinstance(exc, (DomainError, sqlite3.Error)):
        exc.add_note("in the writer process:\n" + "".join(traceback.format_exception(exc)).rstrip())
    try:
        pickle.loads(pickle.dumps(exc, pickle.HIGHEST_PROTOCOL))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def answer(outcomes: list[tuple[bool, Any]]) -> bytes:
    """The reply frame for a committed batch; a result that cannot be pickled becomes that call's error
    (its write did commit: the function should return plain data)."""
    outcomes = [(ok, value if ok else portable(value)) for ok, value in outcomes]
    try:
        return encode_frame(("done", outcomes))
    except Exception:
        checked = []
        for ok, value in outcomes:
            try:
                pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
                checked.append((ok, value))
            except Exception as exc:
                checked.append((False, RuntimeError(f"committed, but the result could not be returned: {exc}")))
        return encode_frame(("done", checked))


def fault_targets(spec: str | None) -> set[str] | None:
    """The functions named by PARLEY_WRITER_FAULT=kill-after-commit:MODULE.FUNCTION,... (tests only)."""
    kind, _, names = (spec or "").partition(":")
    if kind != "kill-after-commit":
        return None
    return {name.strip() for name in names.split(",") if name.strip()}


# SQLite's own checkpoint runs inside the COMMIT that takes the WAL past 1,000 pages: under inbound load every
# ~25th batch took 10-16 ms instead of ~4, and every write queued behind it waited (issue 23's p99). A thread of
# this process checkpoints on a connection of its own instead, beside the writer: a PASSIVE checkpoint never
# blocks the writer, and SQLite releases the GIL while it copies pages.
CHECKPOINT_INTERVAL = 0.1  # seconds between PASSIVE checkpoints
# The WAL starts over from its beginning only at a write transaction's BEGIN that finds every frame copied. Under
# steady load the writer has always committed more by the time a checkpoint beside it ends, so past this many
# frames (16 MiB of pages) the writer copies the few left itself between two batches: its next BEGIN resets the
# WAL. Not a blocking TRUNCATE: that would wait for the longest read in progress, holding every write up.
WAL_RESET_FRAMES = 4096
# A WAL that grew while a long read kept it from starting over is cut back to this size after it does.
WAL_KEEP_BYTES = 64 * 1024 * 1024


class Checkpointer(threading.Thread):
    """Keeps the writer's WAL short from beside it; stop() waits for the checkpoint in progress. wal_long is set
    when the WAL holds WAL_RESET_FRAMES or more: the writer then catches up (catch_up) between two batches."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(name="parley-checkpoint", daemon=True)
        self.path, self._stopping, self.wal_long = str(path), threading.Event(), threading.Event()

    def run(self) -> None:
        cx = connect_sync(self.path)
        try:
            while not self._stopping.wait(CHECKPOINT_INTERVAL):
                self.checkpoint(cx)
        finally:
            cx.close()

    def checkpoint(self, cx: SqliteConnection) -> None:
        try:
            _, frames, _ = cx.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error:
            return  # busy or locked this time: the next one copies what this one did not
        if frames >= WAL_RESET_FRAMES:
            self.wal_long.set()

    def catch_up(self, writer_cx: SqliteConnection) -> None:
        """On the writer's connection, between two batches, when the WAL is long: copy what is left (the
        Checkpointer copied the rest), so that the next write transaction starts the WAL over."""
        if self.wal_long.is_set():
            self.wal_long.clear()
            writer_cx.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def stop(self) -> None:
        self._stopping.set()
        self.join()


def serve(path: str, sock: socket.socket, token: str, kill_after_commit: set[str] | None = None) -> None:
    cx = connect_sync(path)
    cx.execute("PRAGMA wal_autocheckpoint=0")  # the Checkpointer's work, not the COMMIT's
    cx.execute(f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}")
    checkpointer = Checkpointer(path)
    checkpointer.start()
    stream = sock.makefile("rb")
    try:
        while True:
            header = stream.read(FRAME_HEADER.size)
            if len(header) < FRAME_HEADER.size:
                return  # the parent is gone: nothing is in flight, so nothing is lost
            frame = pickle.loads(stream.read(FRAME_HEADER.unpack(header)[0]))
            if frame is None:
                return
            number, calls = frame
            try:
                reply = answer(run_batch(cx, [_bound(*call) for call in calls], (token, number)))
            except Exception as exc:  # nothing of the batch committed
                reply = encode_frame(("failed", portable(exc)))
            else:
                if kill_after_commit and any(f"{m}.{q}" in kill_after_commit for m, q, *_ in calls):
                    os.kill(os.getpid(), signal.SIGKILL)
            try:
                sock.sendall(reply)
            except OSError:
                return  # the parent died after the COMMIT: like a kill -9 after it, the write stands
            checkpointer.catch_up(cx)  # after the answer: its callers do not wait for it
            _index_search(cx)
    finally:
        checkpointer.stop()
        cx.close()


def _index_search(cx: SqliteConnection) -> None:
    """The search index's pending messages, between two batches (storage/search.py index_pending_batch). A failure
    (the disk full, say) leaves them pending, still found by a search; the next batch tries again."""
    try:
        index_pending_batch(cx)
    except sqlite3.Error:
        pass


def preload(modules: Iterable[str]) -> None:
    """Import the modules write functions live in (PARLEY_WRITER_PRELOAD, storage/writer_supervisor.py) on a
    thread, beside the first batches: a batch that needs one still being imported waits for that import only."""
    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # a write that needs it reports the error itself
                pass
    threading.Thread(target=run, name="parley-preload", daemon=True).start()


def main(argv: Sequence[str]) -> int:
    path, fd, token = argv
    preload([name for name in os.environ.get(PRELOAD_VARIABLE, "").split(",") if name])
    serve(path, socket.socket(fileno=int(fd)), token, fault_targets(os.environ.get(FAULT_VARIABLE)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
