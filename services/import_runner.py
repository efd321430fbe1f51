"""Running contact import jobs: one job's batches from the reader process to the writer, each batch
committed together with the job's position and counts (run_job); and the server's worker, which runs
queued jobs, resumes the ones a restart interrupted, marks import-contacts commands that died as
interrupted, and runs the imports' retention."""
from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from common.errors import Invalid, Unavailable
from services import csv_import
from services.context import Services
from services.csv_import import Batch
from services.contact_import import (BATCH_ROWS, RUNNING, delete_upload, reader_request, remove_file,
                                     report_path, run_blocking)
from services.import_reader import ReaderProcess
from services.worker_loop import WorkerLoop
from storage import contact_imports as store
from storage.interface import Row, Store

log = logging.getLogger("parley.imports")

SERVER = "server"          # the runner of jobs uploaded in the UI
# import-contacts runs its own writer process beside the server's: SQLite lets one write at a time and a
# waiting writer polls (busy_timeout), so the command leaves the database free this long after each batch.
CLI_PAUSE_SECONDS = 0.05
WRITE_ATTEMPTS = 5         # a batch whose write failed (writer restarting) is tried again, idempotently


def cli_runner() -> str:
    """The runner name of this import-contacts command: its host and process id."""
    return f"cli:{socket.gethostname()}:{os.getpid()}"


def runner_gone(runner: str) -> bool:
    """True when runner is an import-contacts command on this host whose process has ended."""
    kind, _, rest = runner.partition(":")
    host, _, pid = rest.rpartition(":")
    if kind != "cli" or host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


class ErrorReport:
    """A job's error report (CSV, 0600): cut back to the length committed with the job when a run starts
    (a crashed run may have written lines for a batch that never committed), and appended, flushed and
    fsynced before each batch's commit, so that the committed length is always on disk."""

    def __init__(self, path: Path, committed: int, header: bytes) -> None:
        self.path, self.length, self.header = path, committed, header
        self.fd: int | None = None

    async def open(self) -> None:
        await run_blocking(self._open)

    def _open(self) -> None:
        if self.length == 0:
            remove_file(self.path)
            return
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.ftruncate(self.fd, self.length)

    async def append(self, data: bytes) -> int:
        """Append a batch's lines; returns the report's length with them."""
        return await run_blocking(self._append, data) if data else self.length

    def _append(self, data: bytes) -> int:
        if self.fd is None:
            os.makedirs(self.path.parent, mode=0o700, exist_ok=True)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            data, self.length = self.header + data, 0
        fd = self.fd
        view = memoryview(data)
        offset = self.length
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written
        os.fsync(fd)
        self.length = offset
        return self.length

    async def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            await run_blocking(os.close, fd)


async def _write_batch(db: Store, job: Mapping[str, Any], batch: Batch, errors_bytes: int) -> dict[str, Any]:
    payload = {"start": batch["start"], "position": batch["position"], "row_number": batch["row_number"],
               "rows": [values for _, values in batch["rows"]], "failed": batch["failed"],
               "errors_bytes": errors_bytes}
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            return await store.apply_batch(db, job["account_id"], job["id"], payload, job["list_id"])
        except Unavailable:
            # Nothing, or this very batch, was committed: apply_batch tells which by the job's position.
            if attempt == WRITE_ATTEMPTS:
                raise
            await asyncio.sleep(attempt)
    raise AssertionError("not reached: the last attempt returns or raises")


async def run_job(services: Services, job: Row, runner: str, *, should_stop: Callable[[], bool] = lambda: False,
                  on_progress: Callable[[Row], object] | None = None, pause: float = 0.0,
                  batch_rows: int = BATCH_ROWS) -> Row | None:
    """Run (or resume) a queued or running job to its end from its committed position; returns the job as
    it is then. Stops early, the job still running (to be resumed), when should_stop() turns true; stops
    when the job is cancelled meanwhile. on_progress(job) after every batch; pause: seconds to leave the
    database to others between batches (the CLI's writer shares it with the server's); batch_rows: rows per
    transaction."""
    db, data_dir = services.db, services.settings.data_dir
    started = await store.start_run(db, job["account_id"], job["id"], runner)
    if started is None:
        return await store.get_import(db, job["account_id"], job["id"])
    job = started
    report = ErrorReport(report_path(data_dir, job["id"]), job["errors_bytes"], csv_import.report_header(job["header"]))
    reader = None
    try:
        await report.open()
        reader = await ReaderProcess.start(**reader_request(data_dir, job, batch_rows))
        async for batch in reader.batches():
            if should_stop():
                return job
            result = await _write_batch(db, job, batch, await report.append(batch["report"]))
            job = result["job"]
            if not result["applied"]:
                break  # cancelled (or taken over) meanwhile
            if on_progress:
                on_progress(job)
            if pause:
                await asyncio.sleep(pause)
        else:  # (finish gives None only for another account's job: this one started above)
            job = cast(Row, await store.finish(db, job["account_id"], job["id"], "completed"))
    except Invalid as exc:  # the reader cannot go on: a line too long, the file gone
        job = cast(Row, await store.finish(db, job["account_id"], job["id"], "failed", exc.message))
    except Unavailable as exc:
        log.error("import %s: storage unavailable, the job stays running and resumes later: %s", job["id"], exc)
        return job
    finally:
        if reader is not None:
            await reader.close()
        await report.close()
    if job["status"] in store.FINISHED:
        await delete_upload(data_dir, job)
    if on_progress:
        on_progress(job)
    return job


class ImportWorker(WorkerLoop):
    """The server's background task: runs queued UI jobs (at most `concurrency` at once), resumes the ones a
    restart interrupted, marks jobs of import-contacts commands that died as interrupted (polling every
    poll_seconds, and at once after notify()). Old jobs and their files go with the retention cleanup
    (services/retention.py)."""

    name = "imports"

    def __init__(self, services: Services, *, concurrency: int = 2, poll_seconds: float = 5.0) -> None:
        super().__init__()
        self.services, self.concurrency = services, concurrency
        self.poll_seconds = poll_seconds
        self._jobs: dict[str, asyncio.Future[None]] = {}  # job id -> task

    async def stop(self) -> None:
        """Each running job stops after its current batch and stays running, to be resumed by the next start."""
        await super().stop()
        await asyncio.gather(*self._jobs.values(), return_exceptions=True)

    async def round(self) -> float | None:
        await self.step()
        return None

    def _lease_lost(self) -> bool:
        """Running as the server's loop, this process no longer holds the imports' lease (another process took
        the job over): a job stops after its batch, and the new owner resumes it. (Tests drive step() alone.)"""
        return self.lease is not None and self._task is not None and not self.lease.held

    async def step(self) -> None:
        """Start the active server jobs not running here yet; mark dead commands' jobs interrupted."""
        db = self.services.db
        for job in await store.active_imports(db):
            if job["runner"] == SERVER:
                if job["id"] not in self._jobs and len(self._jobs) < self.concurrency and not self._stopping:
                    self._jobs[job["id"]] = asyncio.ensure_future(self._run_one(job))
            elif runner_gone(job["runner"]):
                await store.finish(db, job["account_id"], job["id"], "interrupted",
                                   f"the import-contacts command stopped before the end, after row {job['row_number']};"
                                   " run it again on the same file: rows already imported count as matched",
                                   from_statuses=RUNNING)

    async def drain(self) -> None:
        """Run every queued job to its end (tests; the server's loop does this by itself)."""
        while True:
            await self.step()
            if not self._jobs:
                return
            await asyncio.gather(*self._jobs.values(), return_exceptions=True)

    async def _run_one(self, job: Row) -> None:
        try:
            await run_job(self.services, job, SERVER, should_stop=lambda: self._stopping or self._lease_lost())
        except Exception:
            log.exception("import %s failed", job["id"])
            try:  # not resumed in a loop: an operator looks at the log, a user at the message
                await store.finish(self.services.db, job["account_id"], job["id"], "failed",
                                   "the import stopped on an internal error (the server log has it)")
            except Exception:
                log.exception("import %s: could not mark it failed", job["id"])
        finally:
            del self._jobs[job["id"]]
            self._wake.set()  # the next queued job may start
