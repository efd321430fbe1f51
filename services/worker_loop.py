"""The one loop of Parley's background workers (delivery, campaigns, imports, retention): run a round, then
wait until notify() or the round's own deadline, until stop(). Tests call a worker's round directly."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.leases import Lease

log = logging.getLogger("parley.workers")


class WorkerLoop:
    """Subclasses set `name` (for the log) and `poll_seconds`, and define `async def round()`, which returns
    the seconds until the next round (0: at once, after letting requests in; None: poll_seconds).
    cancel_on_stop: stop() cancels a round in progress (a cleanup that any later round redoes) instead of
    waiting for it to end."""

    name = "worker"
    poll_seconds = 1.0
    cancel_on_stop = False
    lease: Lease | None = None  # services/leases.py: rounds run only while this process holds it (several processes)

    def __init__(self) -> None:
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        # Rounds the loop has finished (failed ones included): what a caller can wait on to know the loop has
        # looked at the data at least once since a point, instead of guessing with a sleep.
        self.rounds_finished = 0

    def notify(self) -> None:
        """Something for this worker was committed: start a round now."""
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._stopping = False
            self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        """No round after this one; returns once the loop has ended."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            if self.cancel_on_stop:
                self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.lease is not None:
            await self.lease.release()

    async def round(self) -> float | None:
        raise NotImplementedError

    async def _loop(self) -> None:
        due = 0.0  # monotonic time of the next round
        while not self._stopping:
            woken = self._wake.is_set()
            self._wake.clear()
            try:
                if self.lease is not None and not await self.lease.hold():
                    # Another process runs this job; look again in time to take it over when its lease lapses
                    # (and then run a round at once).
                    due, wait = 0.0, self.lease.seconds / 3
                elif woken or time.monotonic() >= due:
                    try:
                        asked = await self.round()
                    finally:
                        self.rounds_finished += 1
                    wait = self.poll_seconds if asked is None else asked
                    due = time.monotonic() + wait
                else:  # woken only to renew the lease
                    wait = due - time.monotonic()
            except Exception:
                log.exception("%s: a round failed; the next one runs as usual", self.name)
                wait = self.poll_seconds
                due = time.monotonic() + wait
            if self.lease is not None:
                wait = min(wait, self.lease.seconds / 3)  # renewed long before it lapses, however long the poll
            if wait <= 0:
                await asyncio.sleep(0)  # let requests in between rounds
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except TimeoutError:
                pass
