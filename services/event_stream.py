"""The public event stream, GET /v1/events (docs/api.md "Events"): an account's events in
commit order behind an opaque cursor, read from the live events' table (storage/events.py) and woken by the
same hub as the inbox's pages (services/live.py), so there is one mechanism for both.

Stored events are the live pages' (ids only, small, written in the change's transaction); this module maps
them to the public types and fills in their data when they are read:
  message.created      <- message.created, messages.created (a campaign's batch: one public event per message)
  message.updated      <- message.status, messages.status (a batch: one per message), message.updated
  conversation.updated <- conversation.updated
  contact.erased       <- conversation.erased ({contactId} only)
  the notification types (storage/outbox.py enqueue_notification_in_tx emits each with the notification's data)
A message's data is the message as GET /v1/messages/{id} shows it when the event is read (without attempts).

A cursor names an event and, for a batch, the item in it: (the account's event number, item index), with a
tag of the account, so that another account's cursor is malformed here rather than a position.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from common.errors import DomainError, Invalid, RateLimited
from common.jsontext import EncodedOnce
from services import messaging
from services.context import JSONObject, Services
from storage import events as store
from storage import messages as message_store
from storage.interface import Row

Position = tuple[int, int]  # (the account's event number, the item's index in it)
Item = store.MessageRef | Mapping[str, Any]  # storage/events.py public_items'

# Public type -> the stored types it is read from (store.PUBLIC_TYPES; a notification type is stored as itself).
SOURCES = {public: tuple(s for s, p in store.PUBLIC_TYPES.items() if p == public) or (public,) for public in (
    "message.created", "message.updated", "conversation.updated", "conversation.handoff", "contact.created",
    "contact.updated", "contact.tagged", "contact.erased", "contact.merged", "subaccount.auto_recharge",
    "message.failed", "conversation.sla_breached", "csat.submitted")}
PUBLIC_TYPE = {source: public for public, sources in SOURCES.items() for source in sources}
TYPES = tuple(SOURCES)
MAX_LIMIT, DEFAULT_LIMIT, MAX_WAIT = 500, 100, 30
_LAST_ITEM = 999_999  # a cursor through the whole of its event
_CURSOR = re.compile(r"[0-9]{1,18}\.[0-9]{1,6}\.[0-9a-f]{8}")


class CursorExpired(DomainError):
    status, code = 410, "CURSOR_EXPIRED"


def _tag(account_id: str) -> str:
    return hashlib.blake2b(account_id.encode(), digest_size=4).hexdigest()


def encode_cursor(account_id: str, seq: int, item: int) -> str:
    return base64.urlsafe_b64encode(f"{seq}.{item}.{_tag(account_id)}".encode()).decode().rstrip("=")


def decode_cursor(account_id: str, text: str) -> Position:
    """(seq, item) of a cursor this account was given; Invalid naming ``after`` otherwise (another account's
    cursor too: it says nothing of that account)."""
    try:
        plain = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
    except (ValueError, UnicodeError):
        plain = ""
    if not text.isascii() or not _CURSOR.fullmatch(plain) or plain.rsplit(".", 1)[1] != _tag(account_id):
        raise Invalid("after is not a cursor this API gave this account (use an event's id or nextCursor as "
                      "given)", field="after")
    seq, item, _ = plain.split(".")
    return int(seq), int(item)


def parse_query(account_id: str, after: str | None, types: str | None, limit: str | None,
                wait: str | None) -> tuple[Position | None, list[str], int, float]:
    """The query's values, each checked with a message naming it: (position or None, stored types, public
    types or None for all, limit, wait seconds)."""
    position = None if after is None else decode_cursor(account_id, after)
    wanted = None
    if types is not None:
        wanted = [t.strip() for t in types.split(",")]
        unknown = [t for t in wanted if t not in SOURCES]
        if unknown:
            raise Invalid(f"types: unknown event type {unknown[0]!r}; known: {', '.join(TYPES)}", field="types")
    count = int(_number("limit", limit, 1, MAX_LIMIT, DEFAULT_LIMIT, integer=True))  # an int already
    seconds = _number("wait", wait, 0, MAX_WAIT, 0, integer=False)
    sources = [s for t in (wanted or TYPES) for s in SOURCES[t]]
    return position, sources, count, seconds


def _number(name: str, text: str | None, low: int, high: int, default: int, integer: bool) -> float:
    if text is None:
        return default
    pattern = r"[0-9]{1,6}" if integer else r"[0-9]{1,6}(\.[0-9]{1,3})?"
    if not (text.isascii() and re.fullmatch(pattern, text) and low <= float(text) <= high):
        kind = "an integer" if integer else "a number of seconds"
        raise Invalid(f"{name} must be {kind} from {low} to {high}", field=name)
    return int(text) if integer else float(text)


async def page(services: Services, account_id: str, position: Position | None, sources: Sequence[str],
               limit: int) -> JSONObject:
    """One answer: {data, nextCursor}. position: (seq, item) seen through, or None for the oldest kept. Stored
    events with nothing to show (a message erased since) are passed over, reading on rather than answering an
    empty page while more events follow."""
    checked, newest = False, None
    while True:
        data, through, full, newest = await _read(services, account_id, position, sources, limit, checked)
        checked = True
        position = through or position
        if data or not full:
            break
    # Nothing of these types yet: from the account's newest (all before it were read, in commit order).
    return EncodedOnce(data=data, nextCursor=encode_cursor(account_id, *(position or (newest or 0, _LAST_ITEM))))


async def shared_page(services: Services, account_id: str, position: Position | None, sources: Sequence[str],
                      limit: int) -> JSONObject:
    """page() for a waiting long-poll, read once for every long-poll that asks the same at the same time: a commit
    wakes all of an account's waiters at once (1,000 integrations at one position read it once, not 1,000 times).
    A read is shared only among those that asked at the same hub position: one started before the round that
    woke a waiter may miss that round's events, and is not joined (the waiter was woken after clearing its
    event, so a commit that a shared read missed wakes it again)."""
    hub_position = services.hub.position
    if hub_position is None:
        return await page(services, account_id, position, sources, limit)
    key = (account_id, position, tuple(sources), limit, hub_position)
    reads = services.long_polls.reads
    read = reads.get(key)
    if read is None:
        read = reads[key] = asyncio.ensure_future(page(services, account_id, position, sources, limit))
        read.add_done_callback(lambda _: reads.pop(key, None))
    return await asyncio.shield(read)


async def _read(services: Services, account_id: str, position: Position | None, sources: Sequence[str], limit: int,
                checked: bool) -> tuple[list[JSONObject], Position | None, bool, int | None]:
    """(data, position through which the rows were read or None, whether more rows may follow, the account's
    newest event number)."""
    after_seq = 0 if position is None else position[0]
    # From the cursor's own event: a batch may have items after the cursor's.
    rows, oldest, newest = await store.account_page(services.db, account_id, max(after_seq - 1, 0), sources,
                                                    limit + 1)
    if not checked and position is not None and ((oldest is None and after_seq > 0) or (oldest is not None
                                                 and newest is not None and not oldest - 1 <= after_seq <= newest)):
        raise CursorExpired("after is older than the events kept (--event-retention-days) or not of this "
                            "database: read from the oldest kept (omit after) and resync what you keep",
                            field="after")
    # A stored event with no public ones (a batch stored before its messageIds were) is passed over whole.
    items = [(row, index, item) for row in rows for index, item in _indexed(row)
             if position is None or (row[5], index) > position]
    messages = await _messages(services, account_id, [item for _, _, item in items[:limit] if _is_message(item)])
    data: list[JSONObject] = []
    through: Position | None = None
    for row, index, item in items:
        if len(data) == limit:
            break
        through = (row[5], index)
        event = None if item is None else _public(services, row, item, messages)
        if event is not None:
            data.append({"id": encode_cursor(account_id, *through), "type": PUBLIC_TYPE[row[2]],
                         "createdAt": row[4], "data": event})
    return data, through, len(rows) > limit, newest


def _is_message(item: Item | None) -> TypeGuard[store.MessageRef]:
    return isinstance(item, store.MessageRef)


def _items(row: Sequence[Any]) -> list[Item]:
    return store.public_items(row[2], json.loads(row[3]))


def _indexed(row: Sequence[Any]) -> list[tuple[int, Item | None]]:
    """(index, item) of a stored event's public items; one (_LAST_ITEM, None) for an event without any."""
    return [*enumerate(_items(row))] or [(_LAST_ITEM, None)]


async def _messages(services: Services, account_id: str, ids: Sequence[str]) -> dict[str, Row]:
    if not ids:
        return {}
    return {m["id"]: m for m in await message_store.messages_by_ids(services.db, account_id, sorted(set(ids)))}


def _public(services: Services, row: Sequence[Any], item: Item,
            messages: Mapping[str, Row]) -> Mapping[str, Any] | None:
    """The public data of one item; None for a message gone since (erased): it is skipped."""
    if not isinstance(item, store.MessageRef):
        return item
    message = messages.get(str(item))
    return None if message is None else messaging.public_message(services, message)


class LongPolls:
    """Long-polls waiting at once, bounded per API key, per account and in all on this process (429 with
    Retry-After beyond): a client cannot hold this process's connections with waits, nor can all clients
    together take the connections the API needs (``total``: a share of --max-connections)."""

    def __init__(self, per_key: int, per_account: int, total: int | None = None) -> None:
        self.per_key, self.per_account, self.total = per_key, per_account, total
        self._keys: dict[str, int] = {}
        self._accounts: dict[str, int] = {}
        self.waiting = 0
        # shared_page(): the reads in flight, by (account, position, sources, limit, hub position)
        self.reads: dict[tuple[Any, ...], asyncio.Future[JSONObject]] = {}

    def claim(self, key: str, account_id: str) -> None:
        if self.total is not None and self.waiting >= self.total:
            raise RateLimited(f"wait: this server already has {self.total} long-polls waiting "
                              "(--events-long-polls-share of --max-connections); retry after 5 s, or ask without "
                              "wait", headers={"Retry-After": "5"}, field="wait")
        if self._keys.get(key, 0) >= self.per_key:
            raise RateLimited(f"wait: this API key already has {self.per_key} long-polls waiting "
                              "(--events-long-polls-per-key); retry after 1 s", headers={"Retry-After": "1"},
                              field="wait")
        if self._accounts.get(account_id, 0) >= self.per_account:
            raise RateLimited(f"wait: this account already has {self.per_account} long-polls waiting "
                              "(--events-long-polls-per-account); retry after 1 s", headers={"Retry-After": "1"},
                              field="wait")
        self._keys[key] = self._keys.get(key, 0) + 1
        self._accounts[account_id] = self._accounts.get(account_id, 0) + 1
        self.waiting += 1

    def release(self, key: str, account_id: str) -> None:
        self.waiting -= 1
        for counts, name in ((self._keys, key), (self._accounts, account_id)):
            counts[name] -= 1
            if not counts[name]:
                del counts[name]


async def read(services: Services, account_id: str, key: str, *, after: str | None = None, types: str | None = None,
               limit: str | None = None, wait: str | None = None) -> JSONObject:
    """GET /v1/events. key: what the API key is counted by (its hash). Every parameter is checked before
    anything is read; with wait, answers as soon as an event of these types commits, or with data: [] and
    nextCursor = after once wait seconds passed (at once when the server is shutting down)."""
    position, sources, count, seconds = parse_query(account_id, after, types, limit, wait)
    hub = services.hub
    read_at = hub.position
    # A long-poll may share its first read too (a read without wait sees every commit made before it asked).
    result = await (shared_page if seconds > 0 else page)(services, account_id, position, sources, count)
    if result["data"] or seconds <= 0 or hub.stopping:
        return result
    services.long_polls.claim(key, account_id)
    try:
        deadline = time.monotonic() + seconds
        woken = await hub.watch(account_id)
        try:
            if read_at is None or hub.position != read_at:
                # Read again now that the hub watches: what a round read between the first read and the watch
                # woke nobody here. With no round between them, the next round wakes this watch for whatever
                # the first read did not see (it is after the hub's position), so that read stands.
                result = await shared_page(services, account_id, position, sources, count)
            while not result["data"] and not hub.stopping:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not await woken.wait(remaining):
                    break
                woken.clear()
                result = await shared_page(services, account_id, position, sources, count)
        finally:
            hub.unwatch(account_id, woken)
    finally:
        services.long_polls.release(key, account_id)
    return result


async def head(services: Services, account_id: str) -> str:
    """A cursor at the account's newest event: reading after it gives only what commits from now on (a client
    that has just read the current state, e.g. the widget's history, follows on from here)."""
    _, _, newest = await store.account_page(services.db, account_id, 2 ** 62, ["message.created"], 1)
    return encode_cursor(account_id, newest or 0, _LAST_ITEM)
