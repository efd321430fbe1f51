"""Erasing a contact (GDPR art. 17; docs/guide.md "Contact page and erasure"): the rows in one transaction
(storage/erasure.py says which), then what cannot roll back: the media files no message names any more, the
storage's old row versions purged (Database.purge_deleted: SQLite's WAL emptied; PostgreSQL's tables rewritten, in
the background), and the person's records cut out of contact import error reports (services/erasure_imports.py)."""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from common.errors import Invalid
from services import media
from services.contact_fields import normalize_email, normalize_phone
from services.context import JSONObject, Services
from services.erasure_imports import scrub_import_reports
from services.retention import remove_unreferenced_media
from storage import contacts as contact_store
from storage import erasure as store

log = logging.getLogger("parley.erasure")

# After a failed file removal or a busy checkpoint: the next tries, in seconds from the previous one. What is
# still left then is the retention cleanup's (unreferenced media files, --retention-orphan-media-hours).
RETRY_SECONDS = (1, 10, 60)
# PostgreSQL's rewrite of a table that stayed busy (its lock not had in time): tried for longer, ~21 minutes.
REWRITE_RETRY_SECONDS = (1, 10, 60, 300, 900)
_retries: set[asyncio.Future[Any]] = set()  # running retry tasks (one only weakly referenced could be collected)


async def erase_contact(services: Services, account_id: str, contact_id: str,
                        by: Mapping[str, Any] | None) -> JSONObject:
    """Erase the account's contact, audited as by (services.audit: the API key or the signed-in user): {erased:
    true, id, removed: {what: rows}}; CONTACT_NOT_FOUND for an id that is not the account's (another account's
    included: nothing tells the two apart)."""
    started = time.time()
    # Read before the write: the write's result is remembered under an Idempotency-Key, the file names need not be.
    media_urls = await store.media_of_contact(services.db, account_id, contact_id)
    contact = await contact_store.get_contact(services.db, account_id, contact_id)  # its email and phone
    result = await store.erase_contact(services.db, account_id, contact_id, by)
    names = [url[len(media.STORED_PREFIX):] for url in media_urls]
    await _finish(services, names, started, first=True)
    if contact is not None:  # None: a replay under the same Idempotency-Key (scrubbed the first time)
        try:
            await scrub_import_reports(services.db, services.settings.data_dir, account_id, contact)
        except (OSError, ValueError) as exc:  # ValueError: a report that is not UTF-8 CSV (never written so)
            log.error("erasure: contact import reports not scrubbed of %s: %s", contact_id, exc)
    return {"erased": True, **result}


def check_confirmation(contact: Mapping[str, Any], typed: str | None) -> None:
    """The UI's confirm step: typed must be the contact's phone (in any form that normalizes to it) or email
    (any case); Invalid (field confirm) otherwise."""
    typed = (typed or "").strip()
    given = None
    try:
        if "@" in typed:
            given = normalize_email(typed, field="confirm")
        elif typed:
            given = normalize_phone(typed, field="confirm")
    except Invalid:
        pass
    if given is None or given not in (contact.get("phone"), contact.get("email")):
        raise Invalid("type the contact's phone or email exactly to confirm the erasure", field="confirm")


async def _finish(services: Services, names: Sequence[str], started: float, *, first: bool) -> bool:
    """Remove the media files and empty the WAL; True when both are done. On the first call, what failed is
    tried again in the background (RETRY_SECONDS)."""
    directory = media.media_dir(services.settings)
    left: list[str] = []
    for name in names:
        try:
            await remove_unreferenced_media(services.db, directory, name, started)
        except OSError as exc:
            log.warning("erasure: media file %s not removed yet: %s", name, exc)
            left.append(name)
    if services.db.purges_in_background:
        if first:
            _schedule_rewrite(services)
        emptied = True
    else:
        try:
            emptied = await services.db.purge_deleted(store.ERASED_TABLES)
        except Exception as exc:  # locked, I/O: tried again
            log.warning("erasure: WAL checkpoint failed: %s", exc)
            emptied = False
    if not emptied:
        log.warning("erasure: the WAL could not be emptied yet (a connection is busy)")
    if first and (left or not emptied):
        task = asyncio.ensure_future(_retry(services, left, started))
        _retries.add(task)
        task.add_done_callback(_retries.discard)
    return not left and emptied


# PostgreSQL's purge rewrites the tables (VACUUM FULL: each locked while it is copied), so it runs after the
# answer, one at a time per process, and erasures committed while one waits to start share it.
_rewrite_waiting: set[asyncio.AbstractEventLoop] = set()  # loops with a rewrite scheduled, not started yet
_rewrite_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}  # one rewrite at a time
_rewrites: set[asyncio.Future[Any]] = set()  # their tasks, which the server's close waits for (stop_rewrites)


def _schedule_rewrite(services: Services) -> None:
    loop = asyncio.get_running_loop()
    if loop in _rewrite_waiting:
        return  # the waiting rewrite starts after this erasure's commit: it covers it
    _rewrite_waiting.add(loop)
    task = asyncio.ensure_future(_rewrite(services, loop))
    for tasks in (_retries, _rewrites):
        tasks.add(task)
        task.add_done_callback(tasks.discard)


async def _rewrite(services: Services, loop: asyncio.AbstractEventLoop) -> None:
    lock = _rewrite_locks.setdefault(loop, asyncio.Lock())
    async with lock:
        _rewrite_waiting.discard(loop)  # an erasure committed from now on needs a rewrite of its own
        left = list(store.ERASED_TABLES)
        for delay in (0, *REWRITE_RETRY_SECONDS):
            await asyncio.sleep(delay)
            for table in list(left):  # one at a time: a table that is busy now does not hold the others back
                try:
                    await services.db.purge_deleted([table])
                    left.remove(table)
                except Exception as exc:  # its lock not had in time, the database away: tried again
                    log.warning("erasure: table %s not rewritten yet: %s", table, exc)
            if not left:
                return
        log.error("erasure: tables %s still hold erased rows' old bytes; the next erasure rewrites them",
                  ", ".join(left))


async def stop_rewrites(timeout: float = 30.0) -> None:
    """Before the database closes: let a running or waiting rewrite end (for at most timeout seconds; then it
    is cancelled, and the next erasure's rewrite does its work)."""
    loop = asyncio.get_running_loop()
    pending = [task for task in _rewrites if task.get_loop() is loop and not task.done()]
    if pending:
        _, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
            log.error("erasure: closing: a table rewrite was cancelled; the next erasure rewrites the tables")


async def settled() -> None:
    """Once every erasure's cleanup (media files, the WAL, PostgreSQL's rewrite) has ended, done or given up: a caller that
    must see what an erasure leaves after its cleanup (the tests that search the file for the person)."""
    loop = asyncio.get_running_loop()  # a task of another (a closed) loop is none of this caller's
    while pending := [task for task in _retries if task.get_loop() is loop and not task.done()]:
        await asyncio.gather(*pending, return_exceptions=True)


async def _retry(services: Services, names: Sequence[str], started: float) -> None:
    for delay in RETRY_SECONDS:
        await asyncio.sleep(delay)
        if await _finish(services, names, started, first=False):
            log.info("erasure: finished on a retry")
            return
    log.error("erasure: media files %s or the WAL still hold erased data; the retention cleanup removes "
              "unreferenced files, the next erasure checkpoints again", ", ".join(names) or "(none)")
