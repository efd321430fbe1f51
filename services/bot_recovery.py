"""Answers inbound messages that the bot still owes a decision long after they were stored: their process
was killed before deciding (or its decision's write kept failing). With several processes on one database
the process that stored a message may be gone for good, so this runs all the time, in one process at a time
(its lease), not only at a start. The bot's decision is one conditional write (storage/bot_state.py), so a
message recovered while its own process still works on it is answered once all the same."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from common.ids import first_id_at, utcnow
from services.context import Services
from services.worker_loop import WorkerLoop


class BotRecovery(WorkerLoop):
    name = "bot-recovery"

    def __init__(self, services: Services, *, clock: Callable[[], datetime] = utcnow) -> None:
        super().__init__()
        self.services, self.clock = services, clock
        lease = services.settings.worker_lease_seconds
        # Older than this, a message's own process is surely done with it (or gone): several leases, so that a
        # process that lost its lease and its messages' turn are long over.
        self.age = timedelta(seconds=4 * lease)
        self.poll_seconds = lease

    async def round(self) -> float | None:
        await self.services.bot.recover(first_id_at("msg", self.clock() - self.age))
        return None
