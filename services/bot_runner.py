"""The bot's runner: answers each stored inbound message off the request path (services/bot.py decides),
with bounded concurrency overall and per account, one contact's messages one after another; recovers what a
previous run left undecided; owns the AI provider's HTTP client."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from tornado.simple_httpclient import SimpleAsyncHTTPClient

from services import bot, bot_provider, tls_profile
from services.context import Services
from services.netguard import CheckedResolver
from storage import bot_outcome, bot_state

log = logging.getLogger("parley.bot")

# Messages waiting for the bot at most (each holds its message and context in memory); more are recorded
# `busy` rather than letting memory grow without bound while a slow AI provider falls behind.
MAX_WAITING = 10_000
# After a restart, the messages the bot still owes a decision (bot_pending: the server stopped first, or a
# decision's write kept failing) are answered, the oldest RECOVER_LIMIT of them: chosen by state, not by age.
RECOVER_LIMIT = 1000


@contextlib.asynccontextmanager
async def _held(table: dict[Any, list[Any]], key: Hashable,
                make: Callable[[], AbstractAsyncContextManager[Any]]) -> AsyncIterator[None]:
    """table[key] (made by make() when first needed) held while the body runs; removed from the table when
    nobody holds it or waits for it, so the table never grows with every account or contact seen."""
    entry = table.setdefault(key, [make(), 0])
    entry[1] += 1
    try:
        async with entry[0]:
            yield
    finally:
        entry[1] -= 1
        if not entry[1]:
            del table[key]


class BotRunner:
    """Runs on_inbound_message for each submitted message, at most `concurrency` at once (the rest wait
    their turn in memory), off the request path; owns the AI provider's HTTP client (SSRF-guarded)."""

    def __init__(self, services: Services, concurrency: int | None = None, per_account: int | None = None) -> None:
        self.services = services
        self.concurrency = concurrency or services.settings.bot_concurrency
        self.per_account = per_account or services.settings.bot_concurrency_per_account
        self._slots = asyncio.Semaphore(self.concurrency)
        self._account_slots: dict[str, list[Any]] = {}  # account id -> [Semaphore(per_account), holders and waiters]
        self._contact_turns: dict[tuple[str, str], list[Any]] = {}  # (account, contact) -> [Lock, holders and waiters]
        self._tasks: set[asyncio.Future[Any]] = set()
        self._http: SimpleAsyncHTTPClient | None = None
        self._stopping = False

    def submit(self, message: Mapping[str, Any]) -> None:
        """Answer this stored inbound message soon (call on the event loop, after the 200)."""
        if self._stopping:
            log.warning("bot: shutting down, message %s is left to the next start", message["id"])
            return
        if len(self._tasks) >= MAX_WAITING:
            outcome = {"outcome": "busy", "detail": f"{len(self._tasks)} messages were waiting for the bot",
                       "replyId": None}
            log.warning("bot: %d messages waiting; message %s is not answered", len(self._tasks), message["id"])
            task: asyncio.Future[Any] = asyncio.ensure_future(self.services.db.write(
                bot_outcome.record_outcome_in_tx, message["account_id"], message["contact_id"], message["id"], outcome, None))
        else:
            task = asyncio.ensure_future(self._answer(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @contextlib.asynccontextmanager
    async def slot(self, account_id: str) -> AsyncIterator[None]:
        """One of the account's per_account slots, then one of the concurrency slots overall: an account
        waits for its own share first, so that its backlog (a slow AI provider) never holds every slot and
        the other accounts' messages go on. Answers and dry runs (POST /v1/bot/test) alike."""
        async with _held(self._account_slots, account_id, lambda: asyncio.Semaphore(self.per_account)), self._slots:
            yield

    def contact_queue(self, account_id: str, contact_id: str) -> int:
        """How many of the contact's messages are being decided or waiting their turn (at most one decided)."""
        entry = self._contact_turns.get((account_id, contact_id))
        return entry[1] if entry else 0

    async def _answer(self, message: Mapping[str, Any]) -> None:
        # One contact's messages are decided one after another, in the order they came: a message right
        # after one that hands off must see the pause, not be answered beside it.
        turn = (message["account_id"], message["contact_id"])
        async with _held(self._contact_turns, turn, asyncio.Lock), self.slot(message["account_id"]):
            try:
                # Read now, not when the message came in: a pause, an opt-out or a new balance since counts.
                context = await self.services.db.read(bot_state.context_in_tx, message["account_id"],
                                                      message["contact_id"], message["campaign_id"], message["id"])
                if context is None:  # the bot is off for it (now): it owes the message nothing
                    await bot_state.release(self.services.db, message["account_id"], message["id"])
                else:
                    await bot.on_inbound_message(self.services, message, context)
            except Exception:
                log.exception("bot failed on message %s of account %s", message["id"], message["account_id"])

    async def recover(self, before_id: str) -> int:
        """Submit the messages stored before before_id (before this process took requests) that the bot still
        owes a decision, e.g. because the server was killed: the oldest RECOVER_LIMIT. Returns how many."""
        try:
            pending = await bot_state.undecided_inbound(self.services.db, before_id, RECOVER_LIMIT)
        except Exception:
            log.exception("bot: looking for messages left undecided by the previous run failed")
            return 0
        for message in pending:
            self.submit(message)
        if pending:
            log.info("bot: answering %d message(s) left undecided by the previous run", len(pending))
        return len(pending)

    def http(self) -> SimpleAsyncHTTPClient:
        """The AI provider's client: connects only to addresses netguard checked; max_clients matches the
        concurrency so that no call waits in Tornado's queue (its wait would count against the timeout)."""
        if self._http is None:
            self._http = SimpleAsyncHTTPClient(
                force_instance=True, max_clients=self.concurrency, max_body_size=bot_provider.MAX_ANSWER_BYTES,
                resolver=CheckedResolver(allow_private=self.services.settings.allow_private_webhooks),
                defaults={"ssl_options": tls_profile.client_context(self.services.settings.tls_profile)})
        return self._http

    async def idle(self) -> None:
        """Wait until every submitted message is answered (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def stop(self, grace: float | None = None) -> None:
        """Take no more messages; give those in progress `grace` seconds, then cancel them."""
        self._stopping = True
        if self._tasks:
            grace = self.services.settings.shutdown_grace_seconds if grace is None else grace
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace or None)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._http is not None:
            self._http.close()
            self._http = None
