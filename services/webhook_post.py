"""One signed webhook POST and what came of it: the outbox worker's attempts and the "Send test event"
ping both send through post_signed, so they share the SSRF guard (the client's CheckedResolver connects
only to checked addresses), the Standard Webhooks signature, the timeout and the error texts."""
from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from common.ids import utcnow
from services import netguard, signing

if TYPE_CHECKING:
    from services.webhook_client import KeepAliveClient

RESPONSE_EXCERPT_BYTES = 1024
USER_AGENT = "Parley-Webhooks/1"


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, (when - (now or utcnow())).total_seconds())


class Outcome:
    """What one attempt produced: ok, or an error that is retryable or final."""

    def __init__(self, *, http_status: int | None = None, error: str | None = None, response: str | None = None, retryable: bool = False, retry_after: float | None = None) -> None:
        self.http_status, self.error, self.response = http_status, error, response
        self.retryable, self.retry_after = retryable, retry_after

    @property
    def ok(self) -> bool:
        return self.error is None


async def post_signed(http: KeepAliveClient, url: str, *, secrets: Iterable[str], webhook_id: str, body: bytes, timeout: float, allow_private: bool) -> Outcome:
    """POST body (bytes) to url with the webhook-* headers signed by secrets; an Outcome, never an
    exception for what the network or the receiver did. http: a KeepAliveClient on a CheckedResolver.
    Errors name the host at most, never an address it resolved to."""
    refusal = netguard.scheme_refusal(urlsplit(url), allow_private)
    if refusal:
        return Outcome(error=f"webhook URL refused: it {refusal}")
    # The timestamp is the real sending time: receivers compare it with their own clock.
    headers = signing.headers(secrets, webhook_id, time.time(), body)
    headers.update({"Content-Type": "application/json", "User-Agent": USER_AGENT})
    excerpt = bytearray()

    def keep_excerpt(chunk: bytes) -> None:  # stream the answer: keep 1 KB, never buffer a huge body
        if len(excerpt) < RESPONSE_EXCERPT_BYTES:
            excerpt.extend(chunk[:RESPONSE_EXCERPT_BYTES - len(excerpt)])

    try:
        response = await http.post(url, headers, body, timeout=timeout, on_chunk=keep_excerpt)
    except netguard.BlockedAddress as exc:
        return Outcome(error=f"webhook URL refused: {exc}")
    except TimeoutError:
        return Outcome(error=f"timeout: no answer within {timeout:g} s", retryable=True)
    except Exception as exc:  # refused, reset, DNS failure, TLS failure: worth another try
        return Outcome(error=f"connection error: {netguard.describe_connection_error(exc)}", retryable=True)
    text = bytes(excerpt).decode("utf-8", "replace")
    code = response.code
    if 200 <= code < 300:
        return Outcome(http_status=code, response=text)
    error = f"HTTP {code} {response.reason or ''}".rstrip()
    if 300 <= code < 400:
        error += f" (redirect to {response.headers.get('Location', '?')} not followed)"
    retryable = code >= 500 or code in (408, 429)
    return Outcome(http_status=code, error=error, response=text, retryable=retryable,
                   retry_after=parse_retry_after(response.headers.get("Retry-After")) if retryable else None)
