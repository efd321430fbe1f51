"""Standard Webhooks signatures: webhook-signature = "v1,<base64 HMAC-SHA256 of id.timestamp.body>"."""
from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable

from services.keys import SECRET_PREFIX


def secret_key(secret: str) -> bytes:
    """The HMAC key of a whsec_… secret: the base64 after the prefix, decoded."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def sign(secrets: Iterable[str], webhook_id: str, timestamp: float, body: str | bytes) -> str:
    """The webhook-signature header value: one "v1,<sig>" per secret, space-separated, so that during a
    rotation overlap a receiver holding either the old or the new secret can verify."""
    if isinstance(body, str):
        body = body.encode()
    content = f"{webhook_id}.{int(timestamp)}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(secret_key(s), content, hashlib.sha256).digest()).decode()
        for s in secrets)


def headers(secrets: Iterable[str], webhook_id: str, timestamp: float, body: str | bytes) -> dict[str, str]:
    """The three Standard Webhooks headers for one delivery attempt."""
    return {"webhook-id": webhook_id, "webhook-timestamp": str(int(timestamp)),
            "webhook-signature": sign(secrets, webhook_id, timestamp, body)}
