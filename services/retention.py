"""Retention: what is kept how long (docs/operations.md "Retention"), and the periodic cleanup that deletes the rest
in small batches through the writer, so that it never holds up a request for long.

RULES is the registry: one Rule per kind of row. A table joins with one entry, e.g. a log kept for
--retention-log-days:

    Rule("log entries", lambda s: timedelta(days=s.retention_log_days), retention_store.prune_older,
         ("log", "created_at"))

prune is a storage write function prune(cx, before, limit, *args) -> rows deleted (storage/retention.py
has prune_older for a rowid table with an indexed ISO time column). Media files are not rows: the
cleanup's last steps delete files of data/media that no message names (kept while one does), and
contact imports with their files (services.contact_import.cleanup: drafts, finished jobs, stray uploads).
"""
from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from settings import Settings

from common.ids import iso, utcnow
from services.worker_loop import WorkerLoop
from services import contact_import, media
from services.context import Services
from storage import delivery as delivery_store
from storage import csat as csat_store
from storage import events as events_store
from storage import idempotency as idempotency_store
from storage import messages as message_store
from storage import retention as store
from storage.interface import Store

log = logging.getLogger("parley.retention")


@dataclass(frozen=True)
class Rule:
    """Rows deleted once older than keep(settings) (a timedelta; None or zero keeps them for ever)."""
    name: str
    keep: Callable[[Settings], Optional[timedelta]]
    prune: Callable[..., Awaitable[int]]  # a storage write function: prune(db, before, limit, *args) -> rows deleted
    args: tuple[Any, ...] = ()


def _days(days: int) -> timedelta | None:
    return timedelta(days=days) if days else None


RULES = (
    Rule("delivered and finally failed webhooks, with their attempts",
         lambda s: _days(s.retention_webhook_days), delivery_store.prune_finished),
    Rule("Idempotency-Key answers", lambda s: idempotency_store.WINDOW, store.prune_older,
         ("idempotency_keys", "created_at")),
    Rule("batch records of writers that ended", lambda s: timedelta(days=7), store.prune_writer_batches),
    # Never an account's newest event (its numbers count on from it); a cursor or an inbox page offline for
    # longer is told so (GET /v1/events 410 CURSOR_EXPIRED; the page reloads).
    Rule("live events", lambda s: timedelta(days=s.event_retention_days), events_store.prune),
    # A day past the link's expiry: by then the ask is older than csat.ASK_GAP too, so no rule reads it.
    Rule("CSAT asks never answered", lambda s: timedelta(days=1), csat_store.prune_unanswered),
)

# Between two batches the cleanup yields this long, so its writes stay a small share of the writer's.
PAUSE_SECONDS = 0.02
_TRASH = ".trash-"


class RetentionWorker(WorkerLoop):
    """run_once(now) does one whole cleanup (tests drive it with their own clock); start()/stop() run it
    every settings.retention_interval_seconds as the server's background task."""

    name = "retention"
    cancel_on_stop = True  # a cleanup cut short is done by the next one

    def __init__(self, services: Services, *, clock: Callable[[], datetime] = utcnow, rules: Sequence[Rule] = RULES,
                 pause: float = PAUSE_SECONDS) -> None:
        super().__init__()
        self.services, self.settings, self.clock, self.rules, self.pause = (
            services, services.settings, clock, rules, pause)
        self.poll_seconds = self.settings.retention_interval_seconds  # also after a cleanup that failed

    async def round(self) -> float | None:
        deleted = await self.run_once()
        if any(deleted.values()):
            log.info("retention: deleted %s", ", ".join(f"{n} {name}" for name, n in deleted.items() if n))
        return None

    async def run_once(self, now: datetime | None = None) -> dict[str, int]:
        """Delete everything past its time; returns {rule name or "unreferenced media files": count}."""
        now = now or self.clock()
        batch = self.settings.retention_batch_size
        deleted: dict[str, int] = {}
        for rule in self.rules:
            keep = rule.keep(self.settings)
            deleted[rule.name] = 0
            if not keep:
                continue
            before = iso(now - keep)
            while True:
                count = await rule.prune(self.services.db, before, batch, *rule.args)
                deleted[rule.name] += count
                if count < batch:
                    break
                await asyncio.sleep(self.pause)
        deleted["unreferenced media files"] = await self.prune_media(now)
        imports = await contact_import.cleanup(self.services.db, self.settings.data_dir, now)
        deleted["import jobs"], deleted["import files"] = imports["jobs"], imports["files"]
        return deleted

    async def prune_media(self, now: datetime) -> int:
        """Delete files in data/media that no message names and that are older than
        --retention-orphan-media-hours (a file is stored just before its message commits, and a repeat
        of the same bytes touches it: a recent file may be about to be named)."""
        cutoff = (now - timedelta(hours=self.settings.retention_orphan_media_hours)).timestamp()
        directory = media.media_dir(self.settings)
        loop = asyncio.get_running_loop()
        names = await loop.run_in_executor(None, _old_files, directory, cutoff)
        removed = 0
        for start in range(0, len(names), self.settings.retention_batch_size):
            chunk = names[start:start + self.settings.retention_batch_size]
            named = await message_store.referenced_media(
                self.services.db, [media.STORED_PREFIX + n for n in chunk if not n.startswith(".")])
            for name in chunk:
                if media.STORED_PREFIX + name in named:
                    continue  # kept while a message names it
                removed += await self._remove_orphan(directory, name, cutoff)
        return removed

    async def _remove_orphan(self, directory: Path, name: str, cutoff: float) -> int:
        return await remove_unreferenced_media(self.services.db, directory, name, cutoff)


async def remove_unreferenced_media(db: Store, directory: Path, name: str, cutoff: float) -> int:
    """Delete one media file unless a message names it, safely against such a message committing meanwhile:
    the file is moved aside first (a new store of the same bytes then writes it afresh), and put back if a
    message names it now or it was touched since cutoff (unix seconds: a repeat of its bytes is about to name
    it). 1 when deleted, else 0; OSError when the file system refuses."""
    loop = asyncio.get_running_loop()
    if name.startswith("."):  # .incoming- or .trash- left by an interrupted write or cleanup
        return await loop.run_in_executor(None, _unlink, directory / name)
    if not await loop.run_in_executor(None, _move_aside, directory, name):
        return 0
    named = await message_store.referenced_media(db, [media.STORED_PREFIX + name])
    return await loop.run_in_executor(None, _drop_aside, directory, name, bool(named), cutoff)


def _old_files(directory: Path, cutoff: float) -> list[str]:
    """Names of the files in directory last modified before cutoff (unix seconds)."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    return sorted(e.name for e in entries if e.is_file() and e.stat().st_mtime < cutoff)


def _move_aside(directory: Path, name: str) -> bool:
    try:
        os.rename(directory / name, directory / (_TRASH + name))
        return True
    except FileNotFoundError:
        return False


def _drop_aside(directory: Path, name: str, named: bool, cutoff: float) -> int:
    """Delete the file moved aside (1), or put it back (0) when it is named or was touched meanwhile."""
    aside, path = directory / (_TRASH + name), directory / name
    if named or aside.stat().st_mtime >= cutoff:
        if path.exists():
            _unlink(aside)  # stored afresh meanwhile: the same bytes
        else:
            os.rename(aside, path)
        return 0
    return _unlink(aside)


def _unlink(path: Path) -> int:
    """1 when the file was deleted, 0 when it was gone already."""
    try:
        os.unlink(path)
        return 1
    except FileNotFoundError:
        return 0
