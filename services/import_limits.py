"""What one account's contact imports may hold at once in this server process, so that one account never
stalls another (issue 18): preview readers (one per account, --import-preview-readers in all) and drafts
(--import-drafts-per-account, uploads still arriving counted)."""
from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from common.errors import Conflict, RateLimited, Unavailable

if TYPE_CHECKING:
    from settings import Settings

RETRY_AFTER = {"Retry-After": "2"}  # seconds: a preview takes well under a second


class ImportLimits:
    def __init__(self, settings: Settings) -> None:
        self.max_readers = settings.import_preview_readers
        self.max_drafts = settings.import_drafts_per_account
        self.previewing: set[str] = set()       # accounts whose preview reader runs now
        self.uploading: collections.Counter[str] = collections.Counter()  # account -> its uploads still arriving
        # One upload of an account starts at a time: its drafts are counted in the database (an await), and
        # two uploads counting at once would both find room for one.
        self.starting: collections.defaultdict[str, asyncio.Lock] = collections.defaultdict(asyncio.Lock)

    @contextlib.contextmanager
    def preview_reader(self, account_id: str) -> Iterator[None]:
        """Held while the account's preview reader runs. A view that finds no room is refused at once,
        not queued: a queue would keep page views (and their connections) waiting behind each other."""
        if account_id in self.previewing:
            raise RateLimited("another preview of this account's imports is being read; reload the page in a "
                              "moment", headers=RETRY_AFTER)
        if len(self.previewing) >= self.max_readers:
            raise Unavailable("the server is reading too many import previews at once; reload the page in a "
                              "moment", headers=RETRY_AFTER)
        self.previewing.add(account_id)
        try:
            yield
        finally:
            self.previewing.discard(account_id)

    async def start_upload(self, account_id: str, count_drafts: Callable[[], Awaitable[int]]) -> None:
        """Count an upload that begins for an account; Conflict at the cap. count_drafts(): the account's
        stored drafts (awaited under the account's lock). end_upload() when it has ended (as a draft, or refused)."""
        async with self.starting[account_id]:
            self._count_upload(account_id, await count_drafts())

    def _count_upload(self, account_id: str, drafts: int) -> None:
        if drafts + self.uploading[account_id] >= self.max_drafts:
            raise Conflict(f"this account already has {self.max_drafts} imports waiting to be started (or "
                           "being uploaded): start or discard one of them first", code="TOO_MANY_DRAFTS")
        self.uploading[account_id] += 1

    def end_upload(self, account_id: str) -> None:
        self.uploading[account_id] -= 1
        if self.uploading[account_id] <= 0:
            del self.uploading[account_id]
