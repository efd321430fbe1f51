"""Send test event (POST /v1/account/webhook-test, the button on Settings): a signed ping to the account's
Custom Channel Webhook URL now, outside the outbox (nothing is stored, nothing retried), through the same
post_signed as every delivery: the same SSRF guard, signature, timeout and TLS profile. A test holds one of the
account's outbound slots while it runs (storage/webhook_tests.py): with the account's deliveries in flight, at
most delivery_concurrency_per_account at once across every process; beyond that, RateLimited with Retry-After."""
from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from common.errors import Conflict, RateLimited
from common.ids import iso, new_id, now_iso, utcnow
from services.accounts import get_account, signing_secrets
from services.context import JSONObject, Services
from services.netguard import CheckedResolver
from services.webhook_client import KeepAliveClient
from services.webhook_post import post_signed
from storage import webhook_tests as slot_store

if TYPE_CHECKING:
    from services.secretbox import SecretBox
    from settings import Settings

NO_URL = ("customChannelWebhookUrl is not set: save a Custom Channel Webhook URL first, then send the test "
          "event")
# A slot outlives the request's timeout by this much, so that one left by a process that died lapses soon.
SLOT_SPARE_SECONDS = 5


def ping_body(account_id: str, webhook_id: str) -> bytes:
    """The ping, shaped like a notification (docs/design.md#api-decisions): {event, id, occurredAt, accountId, data}."""
    return json.dumps({"event": "ping", "id": webhook_id, "occurredAt": now_iso(), "accountId": account_id,
                       "data": {"test": True}}).encode()


async def send_test_event(services: Services, account_id: str) -> JSONObject:
    """{httpStatus, responseBody (the first 1 KB), durationMs, error}; Conflict when no URL is set, RateLimited
    when the account's outbound slots are all in use."""
    account = await get_account(services.db, account_id)
    url = account["settings"].get("customChannelWebhookUrl")
    if not url:
        raise Conflict(NO_URL)
    settings = services.settings
    slot_id, now = new_id("wht"), utcnow()
    until = now + timedelta(seconds=settings.webhook_timeout_seconds + SLOT_SPARE_SECONDS)
    limit = settings.delivery_concurrency_per_account
    if not await slot_store.take_slot(services.db, account_id, slot_id, iso(now), iso(until), limit):
        retry_after = str(max(1, math.ceil(settings.webhook_timeout_seconds)))
        raise RateLimited(f"{limit} test events or deliveries of this account are in flight; retry after "
                          f"{retry_after} s", headers={"Retry-After": retry_after})
    try:
        return await _ping(settings, services.box, account, url)
    finally:
        await slot_store.release_slot(services.db, slot_id)


async def _ping(settings: Settings, box: SecretBox, account: Mapping[str, Any], url: str) -> JSONObject:
    http = KeepAliveClient(CheckedResolver(allow_private=settings.allow_private_webhooks),
                           tls_profile=settings.tls_profile)
    started = time.monotonic()
    try:
        webhook_id = new_id("evt")
        outcome = await post_signed(http, url, secrets=signing_secrets(box, account),
                                    webhook_id=webhook_id, body=ping_body(account["id"], webhook_id),
                                    timeout=settings.webhook_timeout_seconds,
                                    allow_private=settings.allow_private_webhooks)
    finally:
        http.close()
    return {"httpStatus": outcome.http_status, "responseBody": outcome.response,
            "durationMs": round((time.monotonic() - started) * 1000), "error": outcome.error}
