"""Idempotency-Key (docs/design.md#api-decisions), one mechanism for every mutating endpoint: the key, a fingerprint of the
request and the result of the write it protects are stored in that write's own transaction, so a
retry within 24 h gets the first result back instead of writing again -- across writer crashes too.

How a key reaches the write: the request opens a Claim (services/idempotency.py does, for the handler
decorator @idempotent) and sets it in the idempotency_claim context variable; Database.write hands the
request's first write to Claim.run, which sends run_claimed(claim, fn, args) to the writer in place of
fn(args). The service then shapes its answer from the result as it always does, so an endpoint is
covered when (1) its request makes one write transaction, (2) its answer is a function of the request
and that write's result (ids and secrets made before the write travel in its result: a replay does
not get the values a new attempt made), (3) a failure raises inside the write (it then rolls back,
key included: failures are not remembered), and (4) the result is JSON data (it is stored as JSON; the
first caller gets the same JSON back, so first answer and replay are equal).
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from common.errors import IdempotencyKeyReused
from common.ids import iso, utcnow
from storage.db import StoredResultLost, fetch_one, function_reference, resolve
from storage.interface import Connection, Row, Store

WINDOW = timedelta(hours=24)
REUSED = ("this Idempotency-Key was already used with other parameters in the last 24 hours; "
          "use a new key for a new request")


class Claim:
    """One request's Idempotency-Key: whose (account_id), the key, and fingerprint, an async callable
    giving the hex digest of what the request asks (called at the write, when the body is parsed).
    After run(), replayed says whether the answer is a stored one."""

    def __init__(self, account_id: str, key: str, fingerprint: Callable[[], Awaitable[str]], now: datetime | None = None) -> None:
        self.account_id, self.key, self.now = account_id, key, now
        self._fingerprint = fingerprint
        self.open = True  # until the request's first write takes it, or the request ends
        self.replayed = False

    async def run(self, db: Store, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Run the write fn(*args) under this key: stored with its result, or the stored result."""
        self.open = False
        now = self.now or utcnow()
        claim = {"account_id": self.account_id, "key": self.key, "fingerprint": await self._fingerprint(),
                 "now": iso(now), "not_before": iso(now - WINDOW)}
        try:
            self.replayed, result = await db.write(run_claimed, claim, *function_reference(fn), args, kwargs)
        except StoredResultLost:
            # The transaction committed but its answer was lost: the key's row holds the result.
            row = await db.read(remembered, claim["account_id"], claim["key"], claim["not_before"])
            if row is None or row["request_hash"] != claim["fingerprint"]:
                raise
            self.replayed, result = row["created_at"] != claim["now"], json.loads(row["result"])
        except Exception:
            # A concurrent request with this key committed first (ours rolled back): its answer is ours. Whether
            # our insert of the key lost (ClaimTaken) or, on PostgreSQL, the write itself failed on what that
            # request stored (a unique index it waited on, a check that saw the row).
            row = await db.read(remembered, claim["account_id"], claim["key"], claim["not_before"])
            if row is None:
                raise
            if row["request_hash"] != claim["fingerprint"]:
                raise IdempotencyKeyReused(REUSED) from None
            self.replayed, result = True, json.loads(row["result"])
        return result


class ClaimTaken(Exception):
    """The key was stored by a concurrent request between our check and our insert (several writers, as on
    PostgreSQL): this write rolls back and the stored answer is given instead."""


def remembered(cx: Connection, account_id: str, key: str, not_before: str) -> Row | None:
    """The live row of a key {request_hash, result, created_at}, or None (never stored, or older than 24 h)."""
    return fetch_one(cx, "SELECT request_hash, result, created_at FROM idempotency_keys"
                         " WHERE account_id = ? AND key = ? AND created_at >= ?", (account_id, key, not_before))


def run_claimed(cx: Connection, claim: Mapping[str, Any], module: str, qualname: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[bool, Any]:
    """In the writer: the stored result of a live key (IdempotencyKeyReused when the request differs),
    or run the write and store its result under the key, in this transaction. Returns (replayed, result)."""
    row = remembered(cx, claim["account_id"], claim["key"], claim["not_before"])
    if row is not None:
        if row["request_hash"] != claim["fingerprint"]:
            raise IdempotencyKeyReused(REUSED)
        return True, json.loads(row["result"])
    text = json.dumps(resolve(module, qualname)(cx, *args, **kwargs), separators=(",", ":"))
    stored = cx.execute("INSERT INTO idempotency_keys (account_id, key, request_hash, result, created_at)"
                        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id, key) DO UPDATE SET request_hash ="
                        " excluded.request_hash, result = excluded.result, created_at = excluded.created_at"
                        " WHERE idempotency_keys.created_at < ?",  # only an expired key is taken over
                        (claim["account_id"], claim["key"], claim["fingerprint"], text, claim["now"], claim["not_before"]))
    if not stored.rowcount:
        raise ClaimTaken(claim["key"])
    return False, json.loads(text)
