"""Worker leases: several server processes on one database share the background jobs (campaigns, imports,
retention, snoozes, reports, bot recovery), one owner per job at a time. The owner renews its lease well
before it lapses; a process that dies stops renewing, and another takes the job over once the lease lapsed
(at most --worker-lease-seconds later). A clean stop gives the lease up at once. Portable (a row per job and
one conditional upsert), so a single process on SQLite runs the same path."""
from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from common.ids import iso, utcnow
from storage import leases as store
from storage.interface import Store

log = logging.getLogger("parley.workers")

# This process, as lease and claim owners name it: readable in the database (host and pid) and unique
# (a restarted process with a recycled pid is still someone else).
PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


class Lease:
    """One job's lease for this process. hold() takes or renews it (a write only when a third of the lease
    is gone) and says whether this process may run the job now."""

    def __init__(self, db: Store, name: str, seconds: float, owner: str = PROCESS_ID, clock: Callable[[], datetime] = utcnow) -> None:
        self.db, self.name, self.seconds, self.owner, self.clock = db, name, seconds, owner, clock
        self._held_until = 0.0  # monotonic: how long we surely hold it (from before the write was sent)
        self._renew_at = 0.0
        self._retry_at = 0.0  # not ours: the next try (a notify() of the job does not write each time)

    @property
    def held(self) -> bool:
        return time.monotonic() < self._held_until

    async def hold(self) -> bool:
        started = time.monotonic()
        if started < self._renew_at:
            return True
        if started < self._retry_at:
            return False
        now = self.clock()
        try:
            ours = await store.take(self.db, self.name, self.owner, iso(now),
                                    iso(now + timedelta(seconds=self.seconds)))
        except Exception:
            log.exception("lease %s: could not be taken or renewed", self.name)
            ours = False
        was_held = self.held
        if ours:
            self._held_until = started + self.seconds
            self._renew_at = started + self.seconds / 3
            if not was_held:
                log.info("lease %s: this process (%s) runs it now", self.name, self.owner)
        else:
            self._held_until = self._renew_at = 0.0
            self._retry_at = started + self.seconds / 10
            if was_held:
                log.warning("lease %s: lost to another process", self.name)
        return ours

    async def release(self) -> None:
        if self._held_until:
            self._held_until = self._renew_at = 0.0
            try:
                await store.release(self.db, self.name, self.owner)
            except Exception:
                log.warning("lease %s: not given up (it lapses by itself)", self.name)
