"""Handler bases: request ids and error envelopes (BaseHandler), API auth and bodies (ApiHandler),
the custom channel's own error shape (CustomChannelHandler)."""
import json
import logging
import re
import uuid
from http import HTTPStatus

import pydantic
import tornado.web

from services.errors import DomainError, Forbidden, Invalid, PayloadTooLarge, RateLimited
from services.keys import hash_api_key

log = logging.getLogger("parley.http")
access_log = logging.getLogger("parley.access")

CODES = {400: "VALIDATION_ERROR", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
         405: "METHOD_NOT_ALLOWED", 409: "CONFLICT", 413: "PAYLOAD_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE",
         422: "IDEMPOTENCY_KEY_REUSED", 429: "RATE_LIMITED", 500: "INTERNAL", 503: "UNAVAILABLE"}
BODY_METHODS = ("POST", "PUT", "PATCH")
_SECRET_QUERY = re.compile(r"(?i)(apiKey=)[^&]*")


def log_request(handler):
    """Access log line with the API key masked."""
    status = handler.get_status()
    level = access_log.info if status < 400 else access_log.warning if status < 500 else access_log.error
    request = handler.request
    uri = _SECRET_QUERY.sub(r"\1***", request.uri)
    level("%d %s %s (%s) %.1fms rid=%s", status, request.method, uri, request.remote_ip,
          1000.0 * request.request_time(), getattr(handler, "request_id", "-"))


def validation_message(error: pydantic.ValidationError):
    """One sentence naming the field of pydantic's first error."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"] if part != "__root__")
    message = first["msg"]
    if first["type"] == "missing":
        return f"{field} is required"
    message = message.removeprefix("Value error, ")
    if first["type"] == "value_error" and message.startswith(field):
        return message
    return f"{field}: {message}" if field else message


class BaseHandler(tornado.web.RequestHandler):
    """Request id, HSTS, JSON error envelope, in-flight accounting for graceful shutdown."""

    def initialize(self):
        self.application.inflight += 1
        self._counted = True

    def on_finish(self):
        if self._counted:
            self._counted = False
            self.application.inflight -= 1

    def on_connection_close(self):
        self.on_finish()

    def set_default_headers(self):
        # Tornado calls this before initialize(), and again when an error clears the response.
        if not hasattr(self, "request_id"):
            self.request_id = uuid.uuid4().hex[:16]
        self.set_header("X-Request-Id", self.request_id)
        self.set_header("Strict-Transport-Security", "max-age=31536000")
        self.set_header("X-Content-Type-Options", "nosniff")

    def check_xsrf_cookie(self):
        """API requests authenticate with a key, not a cookie, so XSRF cannot apply; UiHandler checks."""

    def compute_etag(self):
        return None

    @property
    def services(self):
        return self.application.services

    def respond(self, obj, status=200):
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(obj, separators=(",", ":")))

    def error_body(self, code, message):
        return {"error": {"code": code, "message": message}}

    def log_exception(self, typ, value, tb):
        if isinstance(value, DomainError):
            return  # an expected answer, not a fault; the access log has the status
        if isinstance(value, tornado.web.HTTPError):
            if value.log_message:
                log.warning("%d %s rid=%s: %s", value.status_code, self._request_summary(),
                            self.request_id, value.log_message % value.args)
            return
        log.error("unhandled error rid=%s %s", self.request_id, self._request_summary(),
                  exc_info=(typ, value, tb))

    def _request_summary(self):
        return "%s %s" % (self.request.method, _SECRET_QUERY.sub(r"\1***", self.request.uri))

    def write_error(self, status_code, **kwargs):
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, DomainError):
            status_code, code, message = exc.status, exc.code, exc.message
            for name, value in exc.headers.items():
                self.set_header(name, value)
        elif isinstance(exc, tornado.web.HTTPError) and status_code < 500:
            code = CODES.get(status_code, "ERROR")
            message = exc.log_message % exc.args if exc.log_message else HTTPStatus(status_code).phrase
        elif status_code == 405:
            code, message = "METHOD_NOT_ALLOWED", "method not allowed"
        else:
            status_code, code = (503, "UNAVAILABLE") if status_code == 503 else (500, "INTERNAL")
            message = f"internal error; the request id is {self.request_id}"
        self.clear_header("Content-Type")
        self.set_status(status_code)
        self.respond(self.error_body(code, message), status_code)


class NotFoundHandler(BaseHandler):
    """Every unknown path: 404 in the JSON error shape, whatever the method."""

    def prepare(self):
        raise tornado.web.HTTPError(404, "no such path: %s", self.request.path)


class ApiHandler(BaseHandler):
    """Authenticated JSON API endpoint: method check, size limit, rate limit, API key, JSON body."""

    key_in_header_only = False  # /v1/subaccounts/credits: x-api-key only, per spec §5.3
    requires_auth = True

    def implemented_methods(self):
        base = tornado.web.RequestHandler
        return [m for m in self.SUPPORTED_METHODS
                if getattr(type(self), m.lower()) is not getattr(base, m.lower())]

    def write_error(self, status_code, **kwargs):
        if status_code == 405:  # set here: send_error() clears the headers set before it
            self.set_header("Allow", ", ".join(self.implemented_methods()))
        super().write_error(status_code, **kwargs)

    def max_body_bytes(self):
        return self.application.settings_obj.max_body_bytes

    async def prepare(self):
        # Cheap refusals first: nothing here touches storage.
        allowed = self.implemented_methods()
        if self.request.method not in allowed:
            raise tornado.web.HTTPError(405, "%s is not allowed here; use %s", self.request.method,
                                        " or ".join(allowed))
        if self.application.settings_obj.behind_proxy and self.request.protocol != "https":
            raise Forbidden("HTTPS is required", code="HTTPS_REQUIRED")
        if len(self.request.body) > self.max_body_bytes():
            raise PayloadTooLarge(f"request body is larger than {self.max_body_bytes()} bytes")
        self.principal = await self.authenticate() if self.requires_auth else None

    def api_key(self):
        key = self.request.headers.get("x-api-key")
        if key or self.key_in_header_only:
            return key
        return self.get_query_argument("apiKey", None)

    async def authenticate(self):
        key = self.api_key()
        registry, limiter = self.services.keys, self.services.limiter
        if key:
            # Rate limiting is counted per presented key before any storage work; a cached account
            # override applies, an unknown key gets the default budget.
            key_hash = hash_api_key(key)
            cached = registry.cached(key_hash)
            limit = (cached and cached.rate_limit_per_minute) or self.application.settings_obj.rate_limit
            allowed, headers = limiter.hit(key_hash, limit)
            for name, value in headers.items():
                self.set_header(name, value)
            if not allowed:
                raise RateLimited(f"rate limit of {limit} requests per minute exceeded; retry after "
                                  f"{headers['Retry-After']} s", headers=headers)
        return await registry.authenticate(key)

    def json_body(self, model):
        """Parse the body as JSON into a pydantic model; 415 for another content type, 400 naming the field."""
        content_type = self.request.headers.get("Content-Type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise UnsupportedMediaType("Content-Type must be application/json")
        try:
            data = json.loads(self.request.body or b"null")
        except (ValueError, UnicodeDecodeError):
            raise Invalid("request body is not valid JSON") from None
        if not isinstance(data, dict):
            raise Invalid("request body must be a JSON object")
        try:
            return model.model_validate(data)
        except pydantic.ValidationError as exc:
            raise Invalid(validation_message(exc)) from None


class UnsupportedMediaType(DomainError):
    status, code = 415, "UNSUPPORTED_MEDIA_TYPE"


class CustomChannelHandler(ApiHandler):
    """The custom-channel endpoints answer every error as {"error": "text"} (spec §7)."""

    def error_body(self, code, message):
        return {"error": message}
