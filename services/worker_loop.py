"""The one loop of Parley's background workers (delivery, campaigns, imports, retention): run a round, then
wait until notify() or the round's own deadline, until stop(). Tests call a worker's round directly."""
import asyncio
import logging

log = logging.getLogger("parley.workers")


class WorkerLoop:
    """Subclasses set `name` (for the log) and `poll_seconds`, and define `async def round()`, which returns
    the seconds until the next round (0: at once, after letting requests in; None: poll_seconds).
    cancel_on_stop: stop() cancels a round in progress (a cleanup that any later round redoes) instead of
    waiting for it to end."""

    name = "worker"
    poll_seconds = 1.0
    cancel_on_stop = False

    def __init__(self):
        self._wake = asyncio.Event()
        self._task = None
        self._stopping = False

    def notify(self):
        """Something for this worker was committed: start a round now."""
        self._wake.set()

    def start(self):
        if self._task is None:
            self._stopping = False
            self._task = asyncio.ensure_future(self._loop())

    async def stop(self):
        """No round after this one; returns once the loop has ended."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            if self.cancel_on_stop:
                self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def round(self):
        raise NotImplementedError

    async def _loop(self):
        while not self._stopping:
            self._wake.clear()
            try:
                wait = await self.round()
            except Exception:
                log.exception("%s: a round failed; the next one runs as usual", self.name)
                wait = None
            wait = self.poll_seconds if wait is None else wait
            if wait <= 0:
                await asyncio.sleep(0)  # let requests in between rounds
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except asyncio.TimeoutError:
                pass
