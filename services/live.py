"""The live events hub: after commits it reads the new events in one query and pushes them to the open pages
(subscribers) of their account; a page that reconnects resumes from the last event id it saw.

Frames (JSON text) a page receives:
  {"type": "events", "events": [{"id": 41, "type": "message.created", "data": {...}, "at": "…Z"}, ...]}
  {"type": "ready"}                       after the missed events were replayed: live from here on
  {"type": "reload", "reason": "…"}       the page cannot be brought up to date by events: load it again
  {"type": "counts", "needsPerson": 2, "unread": 5}   the navigation's counts: after "ready", and again after
                                          every round with an event that may change them (nothing polls them)
  {"type": "presence", "contactId", "viewers": [...]}   services/presence.py
  {"type": "typing", "contactId", "who": "visitor", "expiresIn": 5}   a widget visitor types in a conversation
                                          the page views (services/typing.py; never stored)
A page that shows no live events (every page but the inbox's, a thread's and the campaigns') opens the socket
for the counts alone (counts_only): it gets "ready" and "counts" frames, no events and no replay.

Design (after Zulip's event queues, docs/subsystems/events-system.md): events are durable rows with a
monotonic id (storage/events.py), so a page's "queue" is simply everything after its last id, and it
survives a server restart; a position older than what is kept, or more missed events than are worth
replaying, is answered with reload (Zulip's BAD_EVENT_QUEUE_ID). The request path never waits for the
fan-out: a commit only sets a flag, and rounds run on the event loop at most every ``min_interval`` (longer
when pushing to many pages takes more than ``fan_out_share`` of the loop), so under load one round carries
many events in one frame per page. A page's unsent frames are bounded
(``max_pending_bytes``): a browser that does not keep up is told to reload rather than buffered for ever.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from common.ids import iso, utcnow
from services.users import allows
from storage import conversations as conversation_store
from storage import events as store
from storage import sessions as session_store
from storage.interface import Store

if TYPE_CHECKING:
    from tornado.ioloop import PeriodicCallback

log = logging.getLogger("parley.live")

# Close codes (4000-4999 are the application's): the page's script acts on them.
CLOSE_RELOAD = 4000        # the page must load again (a reload frame came first)
CLOSE_SIGNED_OUT = 4001    # the session ended
CLOSE_REPLACED = 4002      # the session or account opened more pages than it may keep live: the oldest close
CLOSE_GOING_AWAY = 1001    # server shutdown: reconnect and resume


# Each event goes only to pages whose user may open the page that shows it: the least role of that page (its
# handler's role; tests/test_roles.py checks they agree). Every other type belongs to the inbox's pages,
# which every role has.
EVENT_PAGE_ROLES = {store.CAMPAIGN_PROGRESS: "admin"}


# Events only GET /v1/events reads (the notification types, storage/outbox.py, and emptied ones): no page
# shows them, so none is sent them (a contact import would otherwise push a frame per contact).
STREAM_ONLY = frozenset({"contact.created", "contact.updated", "contact.tagged", "contact.merged", "conversation.handoff",
                         "subaccount.auto_recharge", "csat.submitted", store.ERASED_EVENT})


# Events that may change the navigation's counts (a handoff waits, a conversation is read or answered, a
# message arrives): a round with one of them sends the account's pages a counts frame.
COUNTED = frozenset({store.MESSAGE_CREATED, store.MESSAGES_CREATED, store.CONVERSATION_UPDATED,
                     store.CONVERSATION_ERASED, "conversation.handoff"})


# An event row as storage/events.py reads it: (id, account_id, type, data JSON text, created_at, seq).
EventRow = Sequence[Any]


def may_see(role: str, row: EventRow) -> bool:
    """Whether a page of a user with ``role`` receives the event row (its type is row[2])."""
    return row[2] not in STREAM_ONLY and allows(role, EVENT_PAGE_ROLES.get(row[2], "agent"))


def event_json(row: EventRow) -> str:
    """One event row (id, account_id, type, data JSON text, created_at, seq) as the JSON text pages receive:
    its id there is the account's own number (seq), which says nothing of other accounts' events; the stored
    data is spliced in as it is."""
    _, _, event_type, data, created_at, seq = row
    return f'{{"id":{seq},"type":{json.dumps(event_type)},"data":{data},"at":"{created_at}"}}'


class Frame:
    """One message to pages: its JSON text as bytes and, made once on first use and then sent to every page
    that negotiated permessage-deflate, the same deflated as a message of its own (no shared context, RFC
    7692 §7.2.1): one compression per round rather than one per page."""
    __slots__ = ("data", "_deflated")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._deflated: bytes | None = None

    def __len__(self) -> int:
        return len(self.data)

    @property
    def deflated(self) -> bytes:
        if self._deflated is None:
            compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            self._deflated = (compressor.compress(self.data) + compressor.flush(zlib.Z_SYNC_FLUSH))[:-4]
        return self._deflated


def events_frame(texts: Iterable[str]) -> Frame:
    return Frame(('{"type":"events","events":[' + ",".join(texts) + "]}").encode())


def reload_frame(reason: str) -> Frame:
    return Frame(json.dumps({"type": "reload", "reason": reason}).encode())


def counts_frame(counts: Mapping[str, int]) -> Frame:
    """counts: {"needsPerson", "unread"} (storage/conversations.py nav_counts)."""
    return Frame(json.dumps({"type": "counts", **counts}, separators=(",", ":")).encode())


_READY = Frame(b'{"type":"ready"}')
_opened = itertools.count()


class Transport(Protocol):
    """A page's socket as the hub uses it (handlers/live.py's _Transport)."""
    def write(self, frame: Frame) -> asyncio.Future[Any]: ...  # done once the frame left our buffer
    def close(self, code: int, reason: str) -> None: ...


class Subscriber:
    """One open page of an account. transport: write(Frame) -> a future done once the frame left our buffer
    (raises once the connection is closed), close(code, reason). session: what the sessions store knows the
    page's UI session by (services.sessions.session_hash). last_sent: the newest event id it was sent (or
    that its page had already seen). role: what the page's user may do in the account (may_see); user_role:
    their role as the sessions store has it (check_sessions closes the page when it changes); parent_session:
    the agency user's own session of a page that views a sub-account (session is then the view-as one).
    counts_only: the page shows no live events, only the navigation's counts."""

    def __init__(self, hub: Hub, account_id: str, user_id: str, transport: Transport, session: str | None = None,
                 role: str = "owner", user_role: str | None = None, parent_session: str | None = None,
                 counts_only: bool = False) -> None:
        self.hub, self.account_id, self.user_id, self.transport = hub, account_id, user_id, transport
        self.session, self.parent_session = session, parent_session
        self.role = role
        self.user_role = user_role or role
        self.counts_only = counts_only
        self.label: str | None = None  # who the page's user is, for presence (services/presence.py): name or email
        self.opened = next(_opened)  # the order pages joined in: the oldest close first beyond the limits
        self.last_sent = 0
        self.pending_bytes = 0
        self.closed = False

    def send(self, frame: Frame) -> None:
        """Queue a frame; a page whose unsent frames would pass the hub's bound is told to reload instead."""
        if self.closed:
            return
        if self.pending_bytes + len(frame) > self.hub.max_pending_bytes:
            self.reload("this page fell behind the live events")
            return
        self._write(frame)

    def _write(self, frame: Frame) -> None:
        try:
            future = self.transport.write(frame)
        except Exception:  # the connection closed under us
            self.closed = True
            self.hub.unsubscribe(self)
            return
        size = len(frame)
        self.pending_bytes += size

        def flushed(done: asyncio.Future[Any]) -> None:
            self.pending_bytes -= size
            if not done.cancelled():
                done.exception()  # retrieved: a write cut short by a closed connection is not an error here
        future.add_done_callback(flushed)

    def reload(self, reason: str) -> None:
        """Tell the page to load again, and close."""
        if self.closed:
            return
        self._write(reload_frame(reason))
        self.close(CLOSE_RELOAD, "reload")

    def close(self, code: int, reason: str) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.transport.close(code, reason)
            except Exception:
                pass
        self.hub.unsubscribe(self)


class _Waiter:
    """A long-poll's wake-up (Hub.watch), with what an event must mention to wake it (None: any event). Lighter
    than an asyncio.Event waited on with asyncio.wait_for (a deque, a task and a coroutine per waiter): a thousand
    long-polls wait at once (bench/scenarios/event_stream.py), so what each holds while it waits counts."""
    __slots__ = ("mention", "_set", "_future")

    def __init__(self, mention: str | None = None) -> None:
        self.mention, self._set = mention, False
        self._future: asyncio.Future[bool] | None = None

    def set(self) -> None:
        self._set = True
        future = self._future
        if future is not None and not future.done():
            future.set_result(True)

    def is_set(self) -> bool:
        return self._set

    def clear(self) -> None:
        self._set = False

    async def wait(self, timeout: float) -> bool:
        """True once set (at once if it is), False if timeout seconds pass first."""
        if self._set:
            return True
        loop = asyncio.get_running_loop()
        future = self._future = loop.create_future()
        timer = loop.call_later(timeout, _time_out, future)
        try:
            return await future
        finally:
            timer.cancel()
            self._future = None


def _time_out(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)


class Hub:
    """Fans committed events out to the subscribers of their account. notify() is the database's commit
    listener; start()/stop() run it as one of the server's background tasks."""

    def __init__(self, db: Store, *, min_interval: float = 0.02, fan_out_share: float = 0.25, round_limit: int = 2000,
                 catch_up_limit: int = 1000, max_pending_bytes: int = 512 * 1024, poll_seconds: float = 2.0,
                 session_check_seconds: float = 60.0, max_per_session: int = 8, max_per_account: int = 50) -> None:
        self.db = db
        self.max_per_session = max_per_session    # pages live at once per UI session; more close the oldest
        self.max_per_account = max_per_account    # and per account, across its sessions
        self.min_interval = min_interval          # seconds between two rounds under load
        self.fan_out_share = fan_out_share        # at most this share of the event loop goes to pushing frames
        self.round_limit = round_limit            # events read per round
        self.catch_up_limit = catch_up_limit      # missed events replayed to a page; more: reload
        self.max_pending_bytes = max_pending_bytes
        self.poll_seconds = poll_seconds          # backstop for events committed by another process
        self.session_check_seconds = session_check_seconds  # backstop for sessions ended elsewhere
        # the newest event read (an id on SQLite, a snapshot on PostgreSQL: storage/events.py); None while nobody
        # listens
        self.position: int | str | None = None
        self.rounds = 0
        self._subscribers: dict[str, set[Subscriber]] = {}  # account id -> its pages
        self._waiters: dict[str, set[_Waiter]] = {}  # account id -> long-polls (GET /v1/events)
        self.stopping = False                     # the server is shutting down: long-polls answer at once
        self._lock = asyncio.Lock()               # a round and a subscription's catch-up never interleave
        self._wanted = False
        self._task: asyncio.Task[None] | None = None
        self._last_round = 0.0
        self._push_seconds = 0.0                  # the event loop's CPU time the last round's pushing took
        self._poller: PeriodicCallback | None = None
        self._session_checker: PeriodicCallback | None = None
        from services.presence import Presence  # it builds its frames with this module's Frame
        self.presence = Presence()               # who views which thread, told to the others there

    def connected_users(self) -> set[str]:
        """The ids of the users with a live page open on this process (automatic assignment's presence)."""
        return {s.user_id for group in self._subscribers.values() for s in group if not s.closed}

    @property
    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    # ---- life cycle -------------------------------------------------------------------------------

    def start(self) -> None:
        from tornado.ioloop import PeriodicCallback
        self.stopping = False
        if self._poller is None:
            self._poller = PeriodicCallback(self.notify, self.poll_seconds * 1000)
            self._poller.start()
        if self._session_checker is None:
            self._session_checker = PeriodicCallback(self.check_sessions, self.session_check_seconds * 1000)
            self._session_checker.start()

    async def stop(self) -> None:
        """Close every page's socket as "going away": their scripts reconnect and resume after a restart; wake
        every long-poll, which answers what it has."""
        self.stopping = True
        for group in self._waiters.values():
            for woken in group:
                woken.set()
        for timer in (self._poller, self._session_checker):
            if timer is not None:
                timer.stop()
        self._poller = self._session_checker = None
        for subscriber in [s for group in self._subscribers.values() for s in group]:
            subscriber.close(CLOSE_GOING_AWAY, "server restarting")
        if self._task is not None:  # nobody is left to receive its round
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # ---- subscriptions ----------------------------------------------------------------------------

    async def subscribe(self, account_id: str, user_id: str, after: int, transport: Transport,
                        session: str | None = None, *, role: str = "owner", user_role: str | None = None,
                        parent_session: str | None = None, counts_only: bool = False) -> Subscriber | None:
        """A page of the account that has seen events up to ``after`` (its render's position) opens: replay
        what it missed (that its role may see), then keep it live; then the navigation's counts as they are
        now. role, user_role, parent_session, counts_only: the Subscriber's (counts_only: no replay, and after
        is ignored). Returns the Subscriber, or None when the page was told to reload."""
        subscriber = Subscriber(self, account_id, user_id, transport, session, role=role, user_role=user_role,
                                parent_session=parent_session, counts_only=counts_only)
        async with self._lock:  # no round runs while the replay is read and the page joins
            if not self._listening or self.position is None:  # (the position is kept while anyone listens)
                self.position = await store.position(self.db)
            if subscriber.counts_only:
                return await self._join(subscriber, session)
            rows, resumable, seq_at_position = await store.catch_up(self.db, account_id, after, self.position,
                                                                    self.catch_up_limit, sorted(STREAM_ONLY))
            if not resumable:
                subscriber.reload("the page is older than the live events kept")
                return None
            if len(rows) > self.catch_up_limit:
                subscriber.reload("the page missed too many live events")
                return None
            rows = [r for r in rows if may_see(subscriber.role, r)]
            if rows:
                subscriber.send(events_frame([event_json(r) for r in rows]))
            subscriber.last_sent = max(after, seq_at_position)
            return await self._join(subscriber, session)

    async def _join(self, subscriber: Subscriber, session: str | None) -> Subscriber | None:
        """The page is up to date with the events: ready, the counts (read after the events, so they count
        at least those), and live from here on. Called with the lock held."""
        subscriber.send(_READY)
        counts = await conversation_store.nav_counts(self.db, [subscriber.account_id])
        subscriber.send(counts_frame(counts[subscriber.account_id]))
        if subscriber.closed:
            return None
        self._subscribers.setdefault(subscriber.account_id, set()).add(subscriber)
        self._close_beyond_limits(subscriber.account_id, session)
        if self._wanted:  # a commit while the page joined (or before: a round that finds nothing)
            self.notify()
        return subscriber

    def _close_beyond_limits(self, account_id: str, session: str | None) -> None:
        """A page just joined: close the oldest pages of its session, then of its account, beyond the limits.
        Pages that show only the counts go first: a person with many tabs open keeps the inbox live."""
        group = self._subscribers.get(account_id, set())
        if session is not None:
            same = sorted((s for s in group if s.session == session), key=lambda s: (not s.counts_only, s.opened))
            for old in same[:max(0, len(same) - self.max_per_session)]:
                old.close(CLOSE_REPLACED, "too many live pages for this session")
        ordered = sorted(group, key=lambda s: s.opened)
        for old in ordered[:max(0, len(ordered) - self.max_per_account)]:
            old.close(CLOSE_REPLACED, "too many live pages for this account")

    @property
    def _listening(self) -> bool:
        """Whether rounds run (pages or long-polls wait): the position is then current."""
        return bool(self._subscribers or self._waiters)

    async def watch(self, account_id: str, mention: str | None = None) -> _Waiter:
        """A long-poll of the account starts waiting: returns a _Waiter set when a round reads an event
        of the account committed after this call (with mention, only an event whose data's JSON text contains
        it: a chat visitor waits for its own contact's, not for every message of the account), or the hub
        stops. The caller reads the table after this call, not before, so that nothing committed between its
        read and the wait goes unnoticed; and calls unwatch() when done."""
        woken = _Waiter(mention)
        async with self._lock:
            if not self._listening:
                self.position = await store.position(self.db)
            self._waiters.setdefault(account_id, set()).add(woken)
        if self.stopping:
            woken.set()
        return woken

    def unwatch(self, account_id: str, woken: _Waiter) -> None:
        group = self._waiters.get(account_id)
        if group is not None:
            group.discard(woken)
            if not group:
                del self._waiters[account_id]

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.presence.leave(subscriber)
        group = self._subscribers.get(subscriber.account_id)
        if group is not None:
            group.discard(subscriber)
            if not group:
                del self._subscribers[subscriber.account_id]

    def disconnect(self, account_id: str | None, *, session: str | None = None, keep_session: str | None = None,
                   user: str | None = None) -> None:
        """Close the account's pages (account_id None: every account's) whose UI session was ended here: the
        one ``session`` (sign-out; the sub-accounts viewed from it too), or every one but ``keep_session`` (a
        new API key or password ends the account's other sessions); with ``user``, only that user's pages (a
        deactivated user, a one-time link used, a role changed). Their scripts reload and find the session
        gone, or the pages their role has now. Sessions ended elsewhere (the rotate-key command, expiry) and
        roles changed elsewhere are found by check_sessions."""
        groups = self._subscribers.values() if account_id is None else [self._subscribers.get(account_id, ())]
        for subscriber in [s for group in groups for s in group]:
            if ((session is None or session in (subscriber.session, subscriber.parent_session))
                    and subscriber.session != keep_session and (user is None or subscriber.user_id == user)):
                subscriber.close(CLOSE_SIGNED_OUT, "signed out")

    async def check_sessions(self, now: datetime | None = None) -> int:
        """Close the pages whose session is no longer live (ended by another process, or expired) or whose
        user's role changed (their events are chosen by it). Returns how many were closed."""
        subscribers = [s for group in self._subscribers.values() for s in group]
        if not subscribers:
            return 0
        live = await session_store.live_sessions(self.db, sorted({s.session for s in subscribers if s.session}),
                                                 iso(now or utcnow()))
        ended = [s for s in subscribers if s.session is not None and live.get(s.session) != s.user_role]
        for subscriber in ended:
            subscriber.close(CLOSE_SIGNED_OUT, "signed out")
        return len(ended)

    # ---- fan-out ----------------------------------------------------------------------------------

    def notify(self) -> None:
        """Something committed (or the backstop poll): run a round soon. Cheap when nobody listens."""
        # Kept while nobody listens: a page that is joining (its ready frame sent, not yet among the subscribers)
        # runs the round once it joins, or what committed meanwhile would wait for the backstop poll.
        self._wanted = True
        if not self._listening:
            return
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._wanted and self._listening:
                # Under load, many pages make a round costly: rounds then come less often (and carry more
                # events each), so that pushing never takes more than fan_out_share of the loop from requests.
                interval = max(self.min_interval, self._push_seconds / self.fan_out_share)
                delay = self._last_round + interval - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)  # commits meanwhile join this round
                self._wanted = False
                self._last_round = loop.time()
                try:
                    if await self._round():
                        self._wanted = True  # a full round: more are waiting
                except Exception:
                    log.exception("live events: a fan-out round failed")
                    await asyncio.sleep(1)
        finally:
            self._task = None

    async def _round(self) -> bool:
        """Read every event after our position in one query and push each account's to its subscribers.
        True when the read was full (another round follows at once)."""
        async with self._lock:
            if not self._listening or self.position is None:  # (the position is kept while anyone listens)
                return False
            rows, self.position = await store.read_after(self.db, self.position, self.round_limit)
            if not rows:
                return False
            for account_id in {row[1] for row in rows} & self._waiters.keys():
                texts = [row[3] for row in rows if row[1] == account_id]
                for woken in self._waiters[account_id]:
                    if woken.mention is None or any(woken.mention in text for text in texts):
                        woken.set()
            self.rounds += 1
            started = time.thread_time()  # the loop's CPU time: time the OS gave to others does not count
            by_account: dict[str, list[EventRow]] = {}
            for row in rows:
                if row[1] in self._subscribers:
                    by_account.setdefault(row[1], []).append(row)
            for account_id, account_rows in by_account.items():
                subscribers = [s for s in self._subscribers.get(account_id, ()) if not s.counts_only]
                for role in {s.role for s in subscribers}:
                    self._push([r for r in account_rows if may_see(role, r)], account_rows[-1][5],
                               [s for s in subscribers if s.role == role])
            self._push_seconds = time.thread_time() - started
            counted = sorted(a for a, account_rows in by_account.items() if any(r[2] in COUNTED for r in account_rows))
            if counted:
                # After the events: a page's counts never lag the events it was sent. One query for every account.
                for account_id, counts in (await conversation_store.nav_counts(self.db, counted)).items():
                    frame = counts_frame(counts)
                    for subscriber in list(self._subscribers.get(account_id, ())):
                        subscriber.send(frame)
            return len(rows) == self.round_limit

    @staticmethod
    def _push(rows: Sequence[EventRow], last: int, subscribers: Iterable[Subscriber]) -> None:
        """One frame for every subscriber that lacks all of rows (the usual case); a subscriber that saw some
        of them already (it joined with a newer position) gets only the rest. rows: what these subscribers'
        role may see of the account's events up to number ``last`` (they are then up to date through it)."""
        shared: Frame | None = None
        for subscriber in subscribers:
            if subscriber.last_sent >= last:
                continue
            if not rows or subscriber.last_sent >= rows[-1][5]:
                subscriber.last_sent = last  # nothing it may see among them
                continue
            first = rows[0][5]  # the account's numbers (seq)
            if subscriber.last_sent < first:
                if shared is None:
                    shared = events_frame([event_json(r) for r in rows])
                subscriber.send(shared)
            else:
                subscriber.send(events_frame([event_json(r) for r in rows if r[5] > subscriber.last_sent]))
            subscriber.last_sent = last
