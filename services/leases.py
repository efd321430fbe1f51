"""Worker leases: several server processes on one database share the background jobs (campaigns, imports,
retention, snoozes, reports, bot recovery), one owner per job at a time. The owner renews its lease well
before it lapses; a process that dies stops renewing, and another takes the job over once the lease lapsed
(at most --worker-lease-seconds later). A clean stop gives the lease up at once. Portable (a row per job and
one conditional upsert), so a single process on SQLite runs the same path."""
from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from common.ids import iso, utcnow
from storage import leases as store
from storage.interface import Store

log = logging.getLogger("parley.workers")



def _pid_namespace() -> str:
    """Which processes this one can see by pid: this boot of the machine and this pid namespace (two containers
    with one hostname do not see each other's pids). Empty where /proc does not tell."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return hashlib.sha256(f"{boot}:{namespace}".encode()).hexdigest()[:8]


_NAMESPACE = _pid_namespace()
# This process, as lease and claim owners name it: readable in the database (host and pid) and unique (a restarted
# process with a recycled pid is still someone else); after "@", where its pid means something (dead_here()).
PROCESS_ID = (f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
              + (f"@{_NAMESPACE}" if _NAMESPACE else ""))


def dead_here(owner: str) -> bool:
    """Whether owner (another process's PROCESS_ID) ran on this machine, in this boot and pid namespace, and its
    pid is gone: what it held need not lapse first. False whenever that is not certain: another machine or
    namespace, an owner named before the namespace was, a pid in use (perhaps recycled: it lapses as before)."""
    head, _, namespace = owner.rpartition("@")
    host, _, rest = head.partition(":")
    pid = rest.partition(":")[0]
    if not _NAMESPACE or namespace != _NAMESPACE or host != socket.gethostname() or not pid.isdigit():
        return False
    try:  # this process's own pid is alive too
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


async def release_dead_owners(db: Store) -> list[str]:
    """At start: the leases and delivery claims of processes of this machine that died (a kill -9, a crash) are
    freed at once, so a restarted server resumes their jobs now instead of --worker-lease-seconds later. Returns
    the owners freed."""
    dead = [owner for owner in await store.owners(db) if dead_here(owner)]
    if dead:
        await store.release_owners(db, dead)
        log.info("leases and claims of processes that died on this machine freed: %s", ", ".join(dead))
    return dead


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
