"""The Reports' fold (issue 22 §2): every --reports-interval-seconds, the messages and delivery attempts stored
since the last fold are added to the per-account per-day summaries (storage/report_fold.py), in bounded
batches on the writer's background lane; the inbound path itself does nothing for the Reports."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from common.ids import utcnow
from services.context import Services
from services.worker_loop import WorkerLoop
from storage import report_fold

log = logging.getLogger("parley.reports")

# A message's id is made before its write is queued, and the writer commits or gives a write up within
# writer_stall_seconds (15 s by default): messages made this long ago have all committed, so the fold can pass
# them for good. Rows younger than this are the tail that a report reads raw.
SETTLE = timedelta(seconds=60)
# A message the bot owes a decision is folded like the others; its outcome (counted by the day of the message) is
# added when it comes within this long (storage/report_fold.py, report_bot_pending).
BOT_WAIT = timedelta(hours=1)
BATCH = 2000  # messages (and attempts) per fold transaction


class ReportsWorker(WorkerLoop):
    name = "reports"
    cancel_on_stop = True  # a fold cut short is rolled back whole; the next one redoes it

    def __init__(self, services: Services, *, clock: Callable[[], datetime] = utcnow, batch: int = BATCH) -> None:
        super().__init__()
        self.db, self.clock, self.batch = services.db, clock, batch
        self.poll_seconds = services.settings.reports_interval_seconds

    async def round(self) -> float | None:
        await self.fold_all()
        return None

    async def fold_all(self, now: datetime | None = None) -> int:
        """Fold everything that is due; returns the rows folded."""
        now = now or self.clock()
        total = 0
        while True:
            folded = await self.db.write_background(report_fold.fold.sync, now - SETTLE, now - BOT_WAIT, self.batch)
            total += folded
            if folded < self.batch:
                return total
            await asyncio.sleep(0)  # let requests in between batches
