"""PostgreSQL LISTEN/NOTIFY between the server processes of one database: wake-ups only, never data (the
tables stay the truth, so a lost notification costs a delay, never an event).

- parley_events: a process committed something (live events among it). The others' live hubs run a round at
  once instead of at their next poll. Sent here, after commits, at most one NOTIFY in flight per process
  (a burst of commits is one NOTIFY), never on a request's own transaction.
- parley_keys: an API key changed (sent inside the key's transaction, storage/accounts.py): the others empty
  their key caches.
- signals (parley_typing, services/typing.py): the one exception to "never data": something ephemeral that no
  table holds (a typing indicator), as the payload "<owner>:<text>", sent at once by signal(), never coalesced,
  and simply lost when a connection is down (it expires in seconds anyway).

Two connections of their own beside the pool: one LISTENs, one sends. A lost connection is opened again
(after 1 s, doubling to 30 s); after a reconnect every handler runs once, since notifications may have been
missed meanwhile."""
from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import psycopg


log = logging.getLogger("parley.db")

EVENTS_CHANNEL = "parley_events"


class PgListener:
    def __init__(self, url: str, handlers: Mapping[str, Callable[[], None]], signals: Mapping[str, Callable[[str], None]] | None = None) -> None:
        """handlers: {channel: callback()} run on the event loop for each notification from another process;
        signals: {channel: callback(payload text)} for the ephemeral signals of another process (signal())."""
        self.url, self.handlers, self.signals = url, handlers, signals or {}
        self._connecting = asyncio.Lock()  # the sender connection is opened once for wake-ups and signals
        self._signal_tasks: set[asyncio.Task[None]] = set()
        self.owner = os.urandom(8).hex()  # our notifications carry it: we skip our own
        self._listen_task: asyncio.Task[None] | None = None
        self._sender: psycopg.AsyncConnection[Any] | None = None
        self._dirty = False
        self._sending: asyncio.Task[None] | None = None
        self._stopping = False
        self.connected = asyncio.Event()
        self.received = 0

    def start(self) -> None:
        self._listen_task = asyncio.ensure_future(self._listen())

    async def stop(self) -> None:
        self._stopping = True
        for task in (self._listen_task, self._sending, *self._signal_tasks):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._sender is not None:
            await self._sender.close()
            self._sender = None

    # ---- sending -------------------------------------------------------------------------------

    def committed(self) -> None:
        """A commit listener (storage's add_commit_listener): tell the other processes, coalesced."""
        self._dirty = True
        if self._sending is None and not self._stopping:
            self._sending = asyncio.ensure_future(self._send())

    async def _send(self) -> None:
        try:
            while self._dirty and not self._stopping:
                self._dirty = False
                try:
                    await (await self._connected_sender()).execute("SELECT pg_notify(%s, %s)",
                                                                   (EVENTS_CHANNEL, self.owner))
                except (psycopg.Error, OSError) as exc:
                    log.warning("live events: could not notify the other processes (%s); they poll", exc)
                    self._sender = None
                    return
        finally:
            self._sending = None

    async def _connected_sender(self) -> psycopg.AsyncConnection[Any]:
        async with self._connecting:
            if self._sender is None or self._sender.closed:
                self._sender = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
            return self._sender

    def signal(self, channel: str, payload: str) -> None:
        """Send ephemeral text (at most a few KB: NOTIFY's limit is 8000 bytes) to the other processes' signals
        handler of channel; not waited for, lost if the connection is down."""
        if self._stopping:
            return
        task = asyncio.ensure_future(self._signal(channel, f"{self.owner}:{payload}"))
        self._signal_tasks.add(task)
        task.add_done_callback(self._signal_tasks.discard)

    async def _signal(self, channel: str, payload: str) -> None:
        try:
            await (await self._connected_sender()).execute("SELECT pg_notify(%s, %s)", (channel, payload))
        except (psycopg.Error, OSError) as exc:
            log.warning("could not send a %s signal to the other processes (%s)", channel, exc)
            self._sender = None

    # ---- listening -----------------------------------------------------------------------------

    async def _listen(self) -> None:
        delay = 1.0
        while not self._stopping:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as cx:
                    for channel in (*self.handlers, *self.signals):
                        await cx.execute(f"LISTEN {channel}")
                    if self.connected.is_set():  # a reconnect: what was sent meanwhile is unknown
                        self._run_all()
                    self.connected.set()
                    delay = 1.0
                    async for note in cx.notifies():
                        if note.channel in self.signals:
                            owner, _, text = note.payload.partition(":")
                            if owner != self.owner:
                                self._run_signal(note.channel, text)
                        elif note.payload != self.owner:  # our own commits woke our hub already
                            self.received += 1
                            self._run(note.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("notifications from other processes: connection lost (%s); again in %g s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)

    def _run(self, channel: str) -> None:
        callback = self.handlers.get(channel)
        if callback is not None:
            try:
                callback()
            except Exception:
                log.exception("notification %s: its handler failed", channel)

    def _run_signal(self, channel: str, text: str) -> None:
        try:
            self.signals[channel](text)
        except Exception:
            log.exception("signal %s: its handler failed", channel)

    def _run_all(self) -> None:
        for channel in self.handlers:
            self._run(channel)
