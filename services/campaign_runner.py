"""The campaign runner, a background task on the IOLoop: starts scheduled campaigns when their time comes
(the snapshot), and hands each running campaign's recipients to the outbox in batches at its rate.

Pacing: a token bucket per campaign, filled at ratePerMinute / 60 per second and holding at most one
second's worth (at least one message): a message is created only when a token is there, and the delivery
worker sends it once it exists, so in any window of T seconds a campaign hands over at most
1 s × rate + T × rate messages. A campaign is also never more than a minute of its rate (at least
storage.campaigns.BACKLOG_MIN messages) ahead of its deliveries. The bucket lives in memory: after a restart or a resume
a campaign starts again with one token.

Exactly once: a batch is one write transaction (storage.campaigns.hand_over, storage.outbound.queue_campaign_messages_in_tx for its
recipients, the recipients' rows and the campaign's counts and cursor), so a restart resumes after the
last committed batch and a contact never gets a second message (storage/campaigns.py record_batch_in_tx).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from common.ids import now_iso
from services.context import Services
from services.worker_loop import WorkerLoop
from storage import campaign_actions
from storage import campaigns as store

log = logging.getLogger("parley.campaigns")

BATCH_MAX = 500        # recipients per write transaction at most
BATCH_MIN = 20
# A batch shares the single writer with every request's write: its size adapts so that one batch keeps the
# writer about this long (every write queued behind it waits that much), however fast the disk and CPU are.
BATCH_SECONDS = 0.05
PIPELINE = 2           # batches of a campaign queued at once (one runs, the next waits its turn)


class Bucket:
    """Tokens for one campaign: rate per minute, capacity one second's worth (at least 1)."""

    def __init__(self, rate_per_minute: int, now: float) -> None:
        self.rate, self.tokens, self.at = rate_per_minute / 60.0, 1.0, now

    def capacity(self) -> float:
        return max(1.0, self.rate)

    def available(self, now: float) -> int:
        self.tokens = min(self.capacity(), self.tokens + (now - self.at) * self.rate)
        self.at = now
        return int(self.tokens)

    def seconds_until_next(self) -> float:
        return max(0.0, (1.0 - self.tokens) / self.rate)


class CampaignRunner(WorkerLoop):
    """step() does one round (tests drive it); start()/stop() run it as the server's background task,
    woken by notify() when a campaign is created or resumed, and polling every poll_seconds."""

    name = "campaigns"

    def __init__(self, services: Services, *, clock: Callable[[], float] = time.monotonic, poll_seconds: float = 1.0,
                 batch_size: int | None = None) -> None:
        super().__init__()
        self.services = services
        self.clock = clock
        self.poll_seconds = poll_seconds
        self._buckets: dict[str, Bucket] = {}
        # The batch keeps the single writer (SQLite) about BATCH_SECONDS; where writes run side by side
        # (PostgreSQL) it holds no other write up, and full batches save round trips. Tests fix the size.
        one_writer = getattr(services.db, "one_writer", True)
        self.adaptive = batch_size is None and one_writer
        self.batch_size: float = batch_size or (BATCH_MAX // 5 if one_writer else BATCH_MAX)

    async def round(self) -> float | None:
        """One step(); stop() waits for the batch in progress (a batch is one transaction: it commits whole
        or not at all)."""
        return await self.step()

    async def step(self) -> float:
        """Start the campaigns whose time has come and give each running one a batch if its bucket allows.
        Returns the seconds until there is something to do (0: at once)."""
        db = self.services.db
        wait = self.poll_seconds
        running: set[str] = set()
        campaign: Mapping[str, Any] | None  # a due campaign's row, then (a scheduled one) as it started
        for campaign in await store.due_campaigns(db, now_iso()):
            if campaign["status"] == "scheduled":
                campaign = await store.start(db, campaign["id"], now_iso())
                if campaign is None or campaign["status"] != "running":
                    continue
                log.info("campaign %s started: %d recipients", campaign["id"], campaign["total"])
            running.add(campaign["id"])
            now = self.clock()
            bucket = self._buckets.get(campaign["id"])
            if bucket is None:
                bucket = self._buckets[campaign["id"]] = Bucket(campaign["rate_per_minute"], now)
            size = int(self.batch_size)
            allowed = min(bucket.available(now), size * PIPELINE)
            if allowed == 0:
                wait = min(wait, bucket.seconds_until_next())
                continue
            # The batches are queued together: while one runs, the next waits in the writer's queue (behind
            # the other writes, see Database.write_background), so the writer never idles between them.
            sizes = [min(size, allowed - start) for start in range(0, allowed, size)]
            results = await asyncio.gather(*(db.write_background(store.hand_over, campaign["id"], n, now_iso())
                                             for n in sizes))
            for n, result in zip(sizes, results):
                if self.adaptive:
                    self._adapt(n, result["seconds"])
                bucket.tokens -= result["queued"]
            if any(result["queued"] for result in results) and self.services.delivery is not None:
                self.services.delivery.notify()
            if result["status"] == "running" and not result["backlogged"]:
                wait = min(wait, bucket.seconds_until_next())
        for campaign_id in set(self._buckets) - running:  # paused, completed or cancelled: start afresh later
            del self._buckets[campaign_id]
        return min(wait, await self.finish_actions())

    async def finish_actions(self) -> float:
        """A batch of each campaign's cancel or retry-failed that its request left unfinished (storage/
        campaign_actions.py), on the writer's background lane. Returns 0 while batches are left, else the
        poll interval."""
        wait: float = self.poll_seconds
        for pending in await campaign_actions.pending_actions(self.services.db):
            result = await self.services.db.write_background(campaign_actions.continue_action.sync, pending["id"],
                                                             campaign_actions.BATCH, now_iso())
            if pending["pending_action"] == "retry" and result["rows"] and self.services.delivery is not None:
                self.services.delivery.notify()
            if not result["done"]:
                wait = 0
        return wait


    def _adapt(self, size: int, seconds: float) -> None:
        """Grow the batch while a full one keeps the writer less than BATCH_SECONDS, shrink it when longer."""
        if seconds > BATCH_SECONDS:
            self.batch_size = max(BATCH_MIN, self.batch_size * 0.7)
        elif size >= int(self.batch_size) and seconds < BATCH_SECONDS / 2:
            self.batch_size = min(BATCH_MAX, self.batch_size * 1.2)
