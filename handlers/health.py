"""GET /healthz: for a load balancer, no API key, outside /v1 (and the OpenAPI document)."""
from common.version import VERSION
from handlers.base import BaseHandler
from services import health


class HealthHandler(BaseHandler):
    """200 {"status": "ok", "version"} when this process can serve: the database answers and (SQLite) its writer runs.
    503 {"status": "unavailable", "reason"} otherwise, and while the process drains (after SIGTERM), so the
    balancer sends new requests elsewhere while the requests in flight finish."""

    in_openapi = False

    async def get(self):
        self.set_header("Cache-Control", "no-store")
        reason = await health.unavailable_reason(self.services.db, getattr(self.application, "draining", False))
        self.set_status(200 if reason is None else 503)
        self.finish({"status": "ok", "version": VERSION} if reason is None
                    else {"status": "unavailable", "reason": reason, "version": VERSION})

    head = get
