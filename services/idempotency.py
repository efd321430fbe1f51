"""Idempotency-Key for the requests of one account (docs/design.md#api-decisions): the key checked, the request's
fingerprint, and the claim that makes the request's write exactly-once (storage/idempotency.py)."""
from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any

from common.errors import Invalid
from storage.db import idempotency_claim
from storage.idempotency import Claim

HEADER = "Idempotency-Key"
MAX_KEY = 255
# What a key may be (the OpenAPI document says the same): printable ASCII, no space at either end.
KEY_PATTERN = r"^[!-~](?:[ -~]{0,253}[!-~])?$"


def check_key(key: str) -> str:
    """The key as given; Invalid (naming the header) unless 1-255 printable ASCII characters."""
    if not 1 <= len(key) <= MAX_KEY or not all(" " <= ch <= "~" for ch in key) or key != key.strip():
        raise Invalid(f"{HEADER} must be 1 to {MAX_KEY} printable ASCII characters without spaces at either end")
    return key


def fingerprint(params: Any) -> str:
    """The hex SHA-256 of a request's parameters (JSON data) in a canonical spelling."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@contextlib.contextmanager
def claim(account_id: str, key: str, request_fingerprint: Callable[[], Awaitable[str]], now: datetime | None = None) -> Iterator[Claim]:
    """Inside this block the first write is exactly-once under (account_id, key): stored with its
    result, or, for a retry within 24 h with the same fingerprint, answered with the first result
    (claim.replayed is then True); IdempotencyKeyReused (422) when the fingerprint differs.
    request_fingerprint: async callable giving the fingerprint, called at the write (the body is parsed
    by then). now: the clock, for tests."""
    request_claim = Claim(account_id, check_key(key), request_fingerprint, now)
    token = idempotency_claim.set(request_claim)
    try:
        yield request_claim
    finally:
        request_claim.open = False  # tasks the request started copied the context: they must not use it
        idempotency_claim.reset(token)


@contextlib.contextmanager
def covering(account_id: str, key: str | None, request_fingerprint: Callable[[], Awaitable[str]], now: datetime | None = None) -> Iterator[Claim | None]:
    """The claim a service call runs under, for services that callers outside an API request also use
    with a key (the agency UI's grant form, tests with a clock): the request's own claim when @idempotent
    opened one, else a new claim for ``key``, else (no key) None."""
    current = idempotency_claim.get()
    if current is not None and current.open:
        yield current
    elif key is None:
        yield None
    else:
        with claim(account_id, key, request_fingerprint, now) as new:
            yield new


def claim_pending() -> bool:
    """True while the request being served has an Idempotency-Key its write has not used yet (a service
    that would answer a repeat without writing lets the write answer it instead)."""
    current = idempotency_claim.get()
    return current is not None and current.open
