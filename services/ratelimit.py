"""Per-key request limits with GCRA: one float per key, O(1) memory and time. RateLimiter keeps it in memory
(one process); SharedRateLimiter keeps them in PostgreSQL, so that several processes on one database enforce
one limit, not one each (API keys, sign-in attempts, password changes, the webhook test)."""
from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from storage import ratelimit as store

if TYPE_CHECKING:
    from storage.postgres_db import PostgresDatabase

log = logging.getLogger("parley.ratelimit")
# The prune tasks in flight: the event loop keeps only a weak reference to a task, so one nobody holds may be
# collected before it finishes.
_pruning = set()


class RateLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic, window: float = 60.0) -> None:
        self.clock = clock
        self.window = window
        self._tat: dict[str, float] = {}  # key -> theoretical arrival time of the next request

    def hit(self, key: str, limit: int) -> tuple[bool, dict[str, str]]:
        """Count one request. Returns (allowed, headers) with the IETF draft and X-RateLimit-* headers."""
        now = self.clock()
        interval = self.window / limit
        tat = max(self._tat.get(key, now), now)
        new_tat = tat + interval
        allowed = new_tat - now <= self.window + 1e-9
        if allowed:
            self._tat[key] = new_tat
        return allowed, self.headers(limit, allowed, new_tat if allowed else tat, now)

    async def hit_shared(self, key: str, limit: int) -> tuple[bool, dict[str, str]]:
        """hit() for a limit every process enforces together (SharedRateLimiter shares it across processes)."""
        return self.hit(key, limit)

    def headers(self, limit: int, allowed: bool, tat: float, now: float) -> dict[str, str]:
        """The answer's headers; tat: after the request when allowed, else as it stands (not before now)."""
        interval = self.window / limit
        if allowed:
            remaining = int((now + self.window - tat) // interval + 1e-9)
            reset = tat - now
            retry_after = 0
        else:
            remaining = 0
            retry_after = max(1, math.ceil(tat + interval - self.window - now))
            reset = tat - now
        reset = max(0, math.ceil(reset))
        headers = {
            "RateLimit-Policy": f'"default";q={limit};w={int(self.window)}',
            "RateLimit": f'"default";r={remaining};t={retry_after if not allowed else reset}',
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": str(reset),
        }
        if not allowed:
            headers["Retry-After"] = str(retry_after)
        return headers

    def prune(self) -> int:
        """Forget keys whose budget is full again; they behave exactly as unseen keys."""
        now = self.clock()
        stale = [key for key, tat in self._tat.items() if tat <= now]
        for key in stale:
            del self._tat[key]
        return len(stale)

    def __len__(self) -> int:
        return len(self._tat)


class SharedRateLimiter(RateLimiter):
    """hit_shared()'s limits in PostgreSQL (storage/ratelimit.py): one atomic statement per request, on the
    key's row, with the database's clock. What it costs: one pooled connection and one round trip per limited
    request (no transaction of its own, no commit listener). Keys are stored hashed: sign-in keys hold an
    email and an address, which the table need not keep. When the database cannot be reached, the request is
    counted in memory (the database's failure answers the request's own storage work anyway)."""

    def __init__(self, db: PostgresDatabase, window: float = 60.0) -> None:
        super().__init__(window=window)
        self.db = db

    async def hit_shared(self, key: str, limit: int) -> tuple[bool, dict[str, str]]:
        interval = self.window / limit
        try:
            allowed, tat, now = await self.db.statement(store.hit, hashlib.sha256(key.encode()).hexdigest(),
                                                        interval, self.window)
        except Exception as exc:
            log.warning("shared rate limit unavailable (%s): counted in this process", exc)
            return self.hit(key, limit)
        return allowed, self.headers(limit, allowed, tat, now)

    def prune(self) -> int:
        """Also the shared rows of keys whose budget is full again (a flood of made-up keys leaves one each)."""
        task = asyncio.ensure_future(self.prune_shared())
        _pruning.add(task)
        task.add_done_callback(_pruning.discard)
        return super().prune()

    async def prune_shared(self) -> int:
        try:
            return await self.db.statement(store.prune)
        except Exception as exc:
            log.warning("shared rate limit: pruning failed (%s); the next one tries again", exc)
            return 0
