"""Whether this process can serve (GET /healthz): the database answers and, on SQLite, its writer runs."""
from __future__ import annotations

import asyncio

from storage import health as store
from storage.interface import Store

PING_TIMEOUT = 2.0  # seconds: a balancer's check must not hang on a stuck database


async def unavailable_reason(db: Store, draining: bool) -> str | None:
    """None when this process can take requests; else why not, in a few words."""
    if draining:
        return "shutting down"
    if getattr(db, "writer_down", None):
        return "the storage writer is restarting"
    try:
        await asyncio.wait_for(store.ping(db), PING_TIMEOUT)
    except Exception:  # a timeout, a refused connection, a closed pool: all mean "not now"
        return "the database cannot be reached"
    return None
