"""GET /healthz: for a load balancer, no API key, outside /v1 (and the OpenAPI document)."""
import asyncio

from handlers.base import BaseHandler
from storage import health

PING_TIMEOUT = 2.0  # seconds: a balancer's check must not hang on a stuck database


class HealthHandler(BaseHandler):
    """200 {"status": "ok"} when this process can serve: the database answers and (SQLite) its writer runs.
    503 {"status": "unavailable", "reason"} otherwise, and while the process drains (after SIGTERM), so the
    balancer sends new requests elsewhere while the requests in flight finish."""

    in_openapi = False

    async def get(self):
        self.set_header("Cache-Control", "no-store")
        reason = None
        if getattr(self.application, "draining", False):
            reason = "shutting down"
        elif getattr(self.services.db, "writer_down", None):
            reason = "the storage writer is restarting"
        else:
            try:
                await asyncio.wait_for(health.ping(self.services.db), PING_TIMEOUT)
            except Exception:  # a timeout, a refused connection, a closed pool: all mean "not now"
                reason = "the database cannot be reached"
        self.set_status(200 if reason is None else 503)
        self.finish({"status": "ok"} if reason is None else {"status": "unavailable", "reason": reason})

    head = get
