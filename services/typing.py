"""Typing indicators both ways on the website chat widget (issue 38): while a visitor types, the account's pages
showing their conversation (services/presence.py: the thread pages that said they view it) get
{"type": "typing", "contactId", "who": "visitor", "expiresIn": 5}; while an agent types in a thread's reply box,
the visitor's chat frame (its /widget/{id}/live socket) gets {"type": "typing", "expiresIn": 5} (never which agent).

Ephemeral: kept in memory, never stored, never in the event stream, never replayed. Throttled: a typist (a visitor,
or a user on one conversation) is relayed at most once per THROTTLE_SECONDS (the pages send one per 2 s while
typing); the receiver hides the line EXPIRES_SECONDS after the last signal, so no "stopped typing" is needed.
Several processes (PostgreSQL): each signal is also sent as the payload of a NOTIFY on CHANNEL
(storage/pg_listen.py's signals) and every other process delivers it to its own sockets. Tenancy: a signal names
its account; pages of other accounts are never among its receivers, and an agent's signal names the contact's
visitors as the agent's own account maps them."""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine, Hashable
from typing import Any

from services.live import Frame, Hub, Subscriber
from storage import widgets as widget_store
from storage.interface import Store

log = logging.getLogger("parley.typing")

CHANNEL = "parley_typing"
THROTTLE_SECONDS = 1.8  # "at most one signal per ~2 s" (a little under 2: the pages' timers and the network jitter)
EXPIRES_SECONDS = 5
MAX_TYPISTS = 10000  # throttle entries kept before the stale ones are dropped
# A signal: {"k": "visitor", "a": account id, "c": contact id} or {"k": "agent", "a": account id, "f": [fromIds]}
Signal = dict[str, Any]
Send = Callable[[dict[str, Any]], object]  # a chat frame's: sends it a JSON object


class Typing:
    """The relay of one process. hub: the live hub (its presence says which pages show a conversation); db: to
    map a visitor to their contact and a contact to its visitors; elsewhere: None, or a callable(payload text)
    that sends a signal to the other processes (PostgreSQL)."""

    def __init__(self, hub: Hub, db: Store, clock: Callable[[], float] = time.monotonic) -> None:
        self.hub, self.db, self.clock = hub, db, clock
        self.elsewhere: Callable[[str], object] | None = None
        self._last: dict[Hashable, float] = {}  # typist -> when its last signal was relayed
        # account id -> visitor's fromId -> the send(dict) of their open chat frames
        self._visitors: dict[str, dict[str, set[Send]]] = {}
        self._tasks: set[asyncio.Future[None]] = set()  # signals being relayed (each may read the database first)

    def allowed(self, typist: Hashable) -> bool:
        """Whether this typist's signal is relayed now (at most one per THROTTLE_SECONDS)."""
        now = self.clock()
        last = self._last.get(typist)
        if last is not None and now < last + THROTTLE_SECONDS:
            return False
        if len(self._last) >= MAX_TYPISTS:
            self._last = {k: t for k, t in self._last.items() if now - t < THROTTLE_SECONDS}
        self._last[typist] = now
        return True

    # ---- the visitors' chat frames ------------------------------------------------------------------

    def join(self, account_id: str, from_id: str, send: Send) -> None:
        """A visitor's chat frame is live: send(dict) gets the agents' typing on their conversation."""
        self._visitors.setdefault(account_id, {}).setdefault(from_id, set()).add(send)

    def leave(self, account_id: str, from_id: str, send: Send) -> None:
        visitors = self._visitors.get(account_id, {})
        sends: set[Send] = visitors.get(from_id, set())
        sends.discard(send)
        if not sends:
            visitors.pop(from_id, None)
            if not visitors:
                self._visitors.pop(account_id, None)

    # ---- signals -------------------------------------------------------------------------------

    def visitor_typing(self, account_id: str, from_id: str) -> asyncio.Future[None] | None:
        """The visitor with this fromId types: the account's pages on their conversation are told (none before
        their first message: there is no conversation yet). Returns the relaying task, or None when throttled."""
        if self.allowed(("visitor", account_id, from_id)):
            return self._spawn(self._visitor_signal(account_id, from_id))
        return None

    def agent_typing(self, subscriber: Subscriber, contact_id: str) -> asyncio.Future[None] | None:
        """A user of the subscriber's account types a reply to contact_id: that contact's visitors are told (a
        contact of another account, or one that never wrote from the widget, has none). Returns the relaying
        task, or None when throttled."""
        if self.allowed(("user", subscriber.account_id, subscriber.user_id, contact_id)):
            return self._spawn(self._agent_signal(subscriber.account_id, contact_id))
        return None

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _visitor_signal(self, account_id: str, from_id: str) -> None:
        try:
            contact_id = await widget_store.visitor_contact_id(self.db, account_id, from_id)
        except Exception:
            log.exception("typing: the visitor's contact could not be read")
            return
        if contact_id is not None:
            self._publish({"k": "visitor", "a": account_id, "c": contact_id})

    async def _agent_signal(self, account_id: str, contact_id: str) -> None:
        try:
            from_ids = await widget_store.web_from_ids(self.db, account_id, contact_id)
        except Exception:
            log.exception("typing: the contact's visitors could not be read")
            return
        if from_ids:
            self._publish({"k": "agent", "a": account_id, "f": from_ids})

    def _publish(self, signal: Signal) -> None:
        self.deliver(signal)
        if self.elsewhere is not None:
            self.elsewhere(json.dumps(signal, separators=(",", ":")))

    def received(self, payload: str) -> None:
        """A signal from another process (storage/pg_listen.py): delivered to this process's sockets."""
        try:
            signal = json.loads(payload)
            if isinstance(signal, dict):
                self.deliver(signal)
        except (ValueError, TypeError, KeyError):
            log.warning("typing: a signal from another process could not be read")

    def deliver(self, signal: Signal) -> None:
        """To this process's sockets: a visitor's typing to the account's pages on that conversation, an
        agent's to the visitors' chat frames."""
        account_id = signal["a"]
        if signal["k"] == "visitor":
            viewers = self.hub.presence.viewers(account_id, signal["c"])
            if viewers:
                frame = Frame(json.dumps({"type": "typing", "contactId": signal["c"], "who": "visitor",
                                          "expiresIn": EXPIRES_SECONDS}).encode())
                for subscriber in viewers:
                    subscriber.send(frame)
        elif signal["k"] == "agent":
            visitors = self._visitors.get(account_id, {})
            for from_id in signal["f"]:
                for send in list(visitors.get(from_id, ())):
                    send({"type": "typing", "expiresIn": EXPIRES_SECONDS})
