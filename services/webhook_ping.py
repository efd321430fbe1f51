"""Send test event (POST /v1/account/webhook-test, the button on Settings): a signed ping to the account's
Custom Channel Webhook URL now, outside the outbox (nothing is stored, nothing retried), through the same
post_signed as every delivery: the same SSRF guard, signature and timeout."""
import json
import time

from common.errors import Conflict
from common.ids import new_id, now_iso
from services.accounts import get_account, signing_secrets
from services.netguard import CheckedResolver
from services.webhook_client import KeepAliveClient
from services.webhook_post import post_signed

NO_URL = ("customChannelWebhookUrl is not set: save a Custom Channel Webhook URL first, then send the test "
          "event")


def ping_body(account_id, webhook_id):
    """The ping, shaped like a notification (docs/design.md#api-decisions): {event, id, occurredAt, accountId, data}."""
    return json.dumps({"event": "ping", "id": webhook_id, "occurredAt": now_iso(), "accountId": account_id,
                       "data": {"test": True}}).encode()


async def send_test_event(services, account_id):
    """{httpStatus, responseBody (the first 1 KB), durationMs, error}; Conflict when no URL is set."""
    account = await get_account(services.db, account_id)
    url = account["settings"].get("customChannelWebhookUrl")
    if not url:
        raise Conflict(NO_URL)
    settings = services.settings
    http = KeepAliveClient(CheckedResolver(allow_private=settings.allow_private_webhooks))
    started = time.monotonic()
    try:
        webhook_id = new_id("evt")
        outcome = await post_signed(http, url, secrets=signing_secrets(services.box, account),
                                    webhook_id=webhook_id, body=ping_body(account_id, webhook_id),
                                    timeout=settings.webhook_timeout_seconds,
                                    allow_private=settings.allow_private_webhooks)
    finally:
        http.close()
    return {"httpStatus": outcome.http_status, "responseBody": outcome.response,
            "durationMs": round((time.monotonic() - started) * 1000), "error": outcome.error}
