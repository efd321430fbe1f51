"""The outbox worker: signs and POSTs due webhooks (replies and notifications), records every attempt,
retries on the Standard Webhooks schedule, with bounded concurrency overall and per account.

Outcomes (docs/design.md#api-decisions "Reply delivery"):
- 2xx: the outbox row is 'sent', its message 'Sent' (message error cleared; the attempts keep history).
- 5xx, 408, 429, timeouts, connection and DNS errors: the message is 'Failed' with the error stored, and
  the row stays 'pending' with a retry at 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h after attempts 1..7
  (+0..10 % jitter; a longer Retry-After wins, capped at 24 h). After the 8th attempt it is final.
- 3xx (redirects are never followed), other 4xx, a URL refused by the SSRF guard, and no URL
  configured: final at once ('failed'); retry_now() sends it again after the client fixed things.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from services.leases import PROCESS_ID
from services.netguard import CheckedResolver
from services.webhook_post import Outcome, post_signed
from services import mail_out, messaging
from services.accounts import signing_secrets
from services.context import JSONObject
from services.webhook_client import KeepAliveClient
from services.worker_loop import WorkerLoop
from common import email_channel
from common.ids import iso, utcnow
from storage import accounts as account_store
from storage import delivery as store
from storage import messages as message_store
from storage.events import MESSAGE_TYPES
from storage.interface import Row

if TYPE_CHECKING:
    from services.context import Services

log = logging.getLogger("parley.delivery")

# Delay before retry n (after attempt n failed), per Standard Webhooks; 8 attempts in all.
RETRY_SCHEDULE = (5, 300, 1800, 7200, 18000, 36000, 36000)
JITTER = 0.10
MAX_RETRY_AFTER = 24 * 3600
# When an attempt's outcome could not be written (disk full, I/O error), the row stays due; it is held
# back this long so the receiver is not sent the same webhook at every poll while the database fails.
UNRECORDED_HOLD = timedelta(seconds=30)
NO_URL = "no webhook URL configured"
ACCOUNT_TTL = 1.0  # seconds an account read for a delivery round is reused
# What record_attempt writes of one attempt (storage/delivery.py): (row, attempt, status, next_attempt_at, error).
_Outcome = tuple[Mapping[str, Any], Mapping[str, Any], str, str | None, Mapping[str, Any] | None]
# An email reply's payload names its channel so (json.dumps); other replies are not parsed to find out.
_EMAIL_REPLY = f'"channel": "{email_channel.CHANNEL}"'


def webhook_url(row: Mapping[str, Any], account: Mapping[str, Any]) -> str | None:
    settings = account["settings"]
    if row["kind"] == "reply":
        return settings.get("customChannelWebhookUrl")
    return (settings.get("notificationUrls") or {}).get(row["event_type"])


class DeliveryWorker(WorkerLoop):
    """run_due(now) does one step (tests drive it with their own clock); start()/stop() run it as the
    server's background task, woken by notify() after a writer commits an outbox row and polling
    every poll_seconds as a backstop."""

    name = "delivery"

    def __init__(self, services: Services, *, clock: Callable[[], datetime] = utcnow,
                 http_client: KeepAliveClient | None = None, rng: random.Random | None = None,
                 concurrency: int | None = None, per_account: int | None = None, poll_seconds: float = 1.0) -> None:
        super().__init__()
        self.services = services
        self.settings = services.settings
        self.clock = clock
        self.rng = rng or random.Random()
        self.concurrency = concurrency or self.settings.delivery_concurrency
        self.per_account = per_account or self.settings.delivery_concurrency_per_account
        self.poll_seconds = poll_seconds
        self._http = http_client
        self._own_http = http_client is None
        self._in_flight: dict[int, str] = {}  # outbox id -> account id: sending, or its outcome being written
        self._sending: set[int] = set()  # outbox ids whose request holds a concurrency slot
        self._accounts: dict[str, tuple[float, Row | None]] = {}  # account id -> (monotonic time read, account row)
        # (account id, secrets as stored, previous one live) -> signing secrets
        self._secrets: dict[tuple[str, str, str | None, bool], list[str]] = {}
        self._outcomes: list[tuple[_Outcome, asyncio.Future[None]]] = []  # attempts to record in the next write
        self._load: Counter[str] = Counter()  # account id -> attempts in flight
        self._campaign_load: Counter[str] = Counter()  # account id -> campaign attempts in flight (see campaign_slots)
        self._tasks: set[asyncio.Task[str]] = set()
        self._held: dict[int, datetime] = {}  # outbox id -> not before (an unrecorded attempt)
        self.owner = PROCESS_ID       # what this process's claims on outbox rows are recorded as

    @property
    def campaign_slots(self) -> int:
        """Per account, campaign deliveries leave one slot free (when there is more than one), so that the
        account's bot and inbox replies go out promptly during a long campaign."""
        return max(1, self.per_account - 1)

    @property
    def timeout(self) -> float:
        return self.settings.webhook_timeout_seconds

    @property
    def claim_seconds(self) -> float:
        """How long one attempt may take: a webhook's, or a mail's (connect, TLS, login, send: each step timed)."""
        return max(self.timeout, 4 * self.settings.mail_timeout_seconds)

    def _client(self) -> KeepAliveClient:
        if self._http is None:
            self._http = KeepAliveClient(CheckedResolver(allow_private=self.settings.allow_private_webhooks),
                                         tls_profile=self.settings.tls_profile)
        return self._http

    # ---- server loop ------------------------------------------------------------------------

    async def stop(self, grace: float | None = None) -> None:
        """Stop dispatching; give attempts in flight ``grace`` seconds, then cancel them (an attempt
        cut short is not recorded and is sent again after the restart, with the same webhook-id)."""
        await super().stop()
        if self._tasks:
            grace = self.settings.shutdown_grace_seconds if grace is None else grace
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)  # 0: cancel at once
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._own_http and self._http is not None:
            self._http.close()
            self._http = None

    async def round(self) -> None:
        await self._dispatch(self.clock())

    # ---- one step ---------------------------------------------------------------------------

    async def run_due(self, now: datetime | None = None) -> int:
        """Start every due attempt the concurrency bounds allow and wait for them; returns how many."""
        tasks = await self._dispatch(now or self.clock())
        await asyncio.gather(*tasks, return_exceptions=True)  # failures are logged by _finished
        return len(tasks)

    async def _dispatch(self, now: datetime) -> list[asyncio.Task[str]]:
        free = self.concurrency - len(self._sending)
        if free <= 0:
            return []
        saturated = [a for a, n in self._load.items() if n >= self.per_account]
        self._held = {i: until for i, until in self._held.items() if until > now}
        rows = await store.due_rows(self.services.db, iso(now), per_account=self.per_account,
                                    limit=free + self.concurrency,
                                    exclude_ids=[*self._in_flight, *self._held], exclude_accounts=saturated,
                                    owner=self.owner)
        accounts = {account_id: await self._account(account_id) for account_id in {row["account_id"] for row in rows}}
        chosen: list[Row] = []
        for row in rows:  # re-checked after the await: another dispatch may have started some
            if len(self._sending) >= self.concurrency:
                break
            if row["id"] in self._in_flight or self._load[row["account_id"]] >= self.per_account:
                continue
            if row["campaign_id"] and self._campaign_load[row["account_id"]] >= self.campaign_slots:
                continue
            self._reserve(row)
            chosen.append(row)
        claimed = await self._claim(chosen, now)
        tasks: list[asyncio.Task[str]] = []
        for row in chosen:
            if row["id"] in claimed:
                tasks.append(self._launch(row, now, accounts[row["account_id"]]))
            else:  # another process is delivering it
                self._release(row)
                self._in_flight.pop(row["id"], None)
        return tasks

    async def _claim(self, rows: Sequence[Row], now: datetime) -> set[int]:
        """Claim the rows for this process (several processes share the outbox): their lease lasts one attempt
        and the writing of its outcome, with room to spare; a process that dies leaves them to the others
        once it lapses. Returns the ids claimed."""
        if not rows:
            return set()
        until = now + timedelta(seconds=self.claim_seconds + self.settings.worker_lease_seconds)
        try:
            return set(await store.claim(self.services.db, [row["id"] for row in rows], self.owner, iso(now),
                                         iso(until)))
        except Exception:
            log.exception("delivery: claiming %d due row(s) failed; the next round tries again", len(rows))
            return set()

    def _reserve(self, row: Mapping[str, Any]) -> None:
        self._in_flight[row["id"]] = row["account_id"]
        self._sending.add(row["id"])
        self._load[row["account_id"]] += 1
        if row["campaign_id"]:
            self._campaign_load[row["account_id"]] += 1

    def _launch(self, row: Row, now: datetime, account: Row | None) -> asyncio.Task[str]:
        task = asyncio.ensure_future(self._attempt(row, now, account))
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._finished(row, now, t))
        return task

    def _release(self, row: Mapping[str, Any]) -> None:
        """The request is over: its concurrency slot is free (the row stays in flight until recorded)."""
        if row["id"] not in self._sending:
            return
        self._sending.discard(row["id"])
        self._load[row["account_id"]] -= 1
        if self._load[row["account_id"]] <= 0:
            del self._load[row["account_id"]]
        if row["campaign_id"]:
            self._campaign_load[row["account_id"]] -= 1
            if self._campaign_load[row["account_id"]] <= 0:
                del self._campaign_load[row["account_id"]]
        self._wake.set()  # a slot is free

    def _finished(self, row: Mapping[str, Any], now: datetime, task: asyncio.Task[str]) -> None:
        self._tasks.discard(task)
        self._release(row)
        self._in_flight.pop(row["id"], None)
        if not task.cancelled() and task.exception() is not None:
            log.error("delivery: recording attempt for outbox %s failed: %s", row["id"], task.exception())
            self._held[row["id"]] = now + UNRECORDED_HOLD
        else:
            self._wake.set()  # a slot is free

    async def _attempt(self, row: Row, now: datetime, account: Row | None) -> str:
        started = time.monotonic()
        try:
            outcome = await self._send(row, account, now) if account else Outcome(error="account not found")
        except Exception as exc:
            log.exception("delivery: attempt for outbox %s raised", row["id"])
            outcome = Outcome(error=f"internal error: {exc!r}", retryable=True)
        elapsed = time.monotonic() - started
        at = iso(now)
        attempt = {"at": at, "http_status": outcome.http_status, "error": outcome.error,
                   "response_excerpt": outcome.response, "duration_ms": round(elapsed * 1000)}
        number = row["attempts"] + 1
        next_attempt_at: str | None = None
        error: JSONObject | None = None
        if outcome.ok:
            status = "sent"
        else:
            if outcome.retryable and number <= len(RETRY_SCHEDULE):
                delay = RETRY_SCHEDULE[number - 1] * (1 + self.rng.uniform(0, JITTER))
                if outcome.retry_after is not None:
                    delay = max(delay, min(outcome.retry_after, MAX_RETRY_AFTER))
                status = "pending"
                next_attempt_at = iso(now + timedelta(seconds=elapsed + delay))
            else:
                status = "failed"
            error = {"at": at, "httpStatus": outcome.http_status, "error": outcome.error,
                     "response": outcome.response, "nextAttemptAt": next_attempt_at}
            log.info("delivery: %s %s attempt %d failed (%s)%s", row["kind"], row["webhook_id"], number,
                     outcome.error, f", retry at {next_attempt_at}" if next_attempt_at else ", final")
        self._release(row)
        await self._record(row, attempt, status, next_attempt_at, error)
        return status

    def _record(self, *outcome: *_Outcome) -> asyncio.Future[None]:
        """Write an attempt's outcome; the outcomes of the attempts that end in the same loop iteration share
        one write (store.record_attempts). Resolves once committed; raises what the write of this one raised."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._outcomes:
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self._write_outcomes()))
        self._outcomes.append((outcome, future))
        return future

    async def _write_outcomes(self) -> None:
        batch, self._outcomes = self._outcomes, []
        try:
            results = await store.record_attempts(self.services.db, [outcome for outcome, _ in batch])
        except Exception as exc:
            results = [exc] * len(batch)
        for (_, future), result in zip(batch, results):
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(None)

    async def _send(self, row: Row, account: Row, now: datetime) -> Outcome:
        if row["kind"] == "mail":  # Parley's own mail, by the account's SMTP server
            return await mail_out.deliver(self.services, account, row)
        if row["kind"] == "reply" and _EMAIL_REPLY in row["payload"]:
            payload = json.loads(row["payload"])
            if payload["channel"] == email_channel.CHANNEL:  # the email channel's reply, by the account's SMTP server
                return await mail_out.deliver_reply(self.services, account, payload)
        url = webhook_url(row, account)
        if not url:
            return Outcome(error=NO_URL)
        body = row["payload"]
        if row["kind"] == "notification" and row["event_type"] in MESSAGE_TYPES:
            body = await self._message_notification(row)
            if body is None:
                return Outcome(error="the message was erased before its notification was sent")
        return await post_signed(self._client(), url, secrets=self._signing_secrets(account, now),
                                 webhook_id=row["webhook_id"], body=body.encode(), timeout=self.timeout,
                                 allow_private=self.settings.allow_private_webhooks)

    async def _message_notification(self, row: Mapping[str, Any]) -> str | None:
        """A message.created or message.updated notification's body: its data, queued as {"messageId"}, is
        the message as GET /v1/messages/{id} shows it now (as GET /v1/events fills it in when read); None
        when the message is gone (erased)."""
        payload = json.loads(row["payload"])
        found = await message_store.messages_by_ids(self.services.db, row["account_id"], [payload["data"]["messageId"]])
        if not found:
            return None
        return json.dumps({**payload, "data": messaging.public_message(self.services, found[0])})

    async def _account(self, account_id: str) -> Row | None:
        """The account, read at most once per ACCOUNT_TTL (not per attempt): a changed webhook URL or secret
        applies to attempts that start after that."""
        cached = self._accounts.get(account_id)
        if cached is None or time.monotonic() - cached[0] > ACCOUNT_TTL:
            if len(self._accounts) > 10_000:
                self._accounts.clear()
            cached = self._accounts[account_id] = (time.monotonic(),
                                                   await account_store.get_account(self.services.db, account_id))
        return cached[1]

    def _signing_secrets(self, account: Mapping[str, Any], now: datetime) -> list[str]:
        """signing_secrets(), decrypted once per secret rather than per attempt."""
        previous_live = bool(account["previous_webhook_secret"] and account["previous_secret_expires_at"]
                             and account["previous_secret_expires_at"] > iso(now))
        key = (account["id"], account["webhook_secret"], account["previous_webhook_secret"], previous_live)
        secrets = self._secrets.get(key)
        if secrets is None:
            if len(self._secrets) > 10_000:
                self._secrets.clear()
            secrets = self._secrets[key] = signing_secrets(self.services.box, account, now)
        return secrets

    # ---- manual retry -----------------------------------------------------------------------

    async def retry_now(self, account_id: str, message_id: str) -> JSONObject:
        """Send a Failed message's reply again now (the inbox's Retry, POST /v1/messages/{id}/retry): the
        message is Pending until the attempt. One more attempt; if it fails with a retryable error the
        schedule continues from where the attempts count stands. NotFound for another account's or an
        unknown (or inbound) message, Conflict unless it is Failed: raised inside the write (so an
        Idempotency-Key does not remember them). Asked while an attempt is in flight, the retry still
        happens: record_attempt keeps it (see there)."""
        before = await store.schedule_retry_now(self.services.db, account_id, message_id, iso(self.clock()))
        self.notify()
        return {"messageId": message_id, "status": "queued", "attempts": before["attempts"]}
