"""Handler bases: request ids and error envelopes (BaseHandler), API auth and bodies (ApiHandler),
the custom channel's own error shape (CustomChannelHandler), the admin UI's session, XSRF and pages
(UiHandler)."""
import asyncio
import functools
import html
import json
import logging
import os
import time
from http import HTTPStatus

import pydantic
import tornado.web
from tornado import httputil

from common.errors import DomainError, Forbidden, Invalid, RateLimited, Unauthorized
from common.ids import kept_text
from common.jsontext import EncodedOnce, compact_json
from common.redact import masked_uri
from common.validation import (lone_surrogate_path, may_hold_lone_surrogate, may_hold_nul, nul_path, nul_refused,
                               validation_message)
from handlers.bodies import BODY_METHODS, StreamedBody
from services import audit, idempotency
from services.keys import hash_api_key

log = logging.getLogger("parley.http")
access_log = logging.getLogger("parley.access")

CODES = {400: "VALIDATION_ERROR", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
         405: "METHOD_NOT_ALLOWED", 409: "CONFLICT", 413: "PAYLOAD_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE",
         422: "IDEMPOTENCY_KEY_REUSED", 429: "RATE_LIMITED", 431: "HEADERS_TOO_LARGE", 500: "INTERNAL",
         503: "UNAVAILABLE"}
# Server: the product without a version (Tornado's default names its version, a scanner's first lookup).
SECURITY_HEADERS = {"Strict-Transport-Security": "max-age=31536000", "X-Content-Type-Options": "nosniff",
                    "Server": "Parley"}
_HASH_INLINE_BYTES = 256 * 1024  # larger bodies are fingerprinted off the event loop
_JSON_CONTENT_TYPE = {"Content-Type": "application/json; charset=UTF-8"}
_date_text = kept_text(httputil.format_timestamp)


def http_date():
    """The Date header's value, formatted once a second rather than once a response."""
    return _date_text(int(time.time()))


def log_request(handler):
    """Access log line with the API key masked."""
    status = handler.get_status()
    level = logging.INFO if status < 400 else logging.WARNING if status < 500 else logging.ERROR
    if level == logging.INFO and getattr(handler, "live_fragment", False) and handler.request.method == "GET":
        level = logging.DEBUG  # a live page's fetch after an event: a line per event would bury the log
    if not access_log.isEnabledFor(level):
        return  # e.g. --log-level warning: no masking or formatting for a line nobody reads
    request = handler.request
    uri = masked_uri(request.uri)
    access_log.log(level, "%d %s %s (%s) %.1fms rid=%s", status, request.method, uri, request.remote_ip,
                   1000.0 * request.request_time(), getattr(handler, "request_id", "-"))


def _refuse_duplicate_keys(pairs):
    """json.loads' object hook: {"a": 1, "a": 2} would silently keep the last value."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise Invalid(f"request body has the key {key!r} more than once")
            seen.add(key)
    return obj


_decoder = json.JSONDecoder(object_pairs_hook=_refuse_duplicate_keys)


def parse_json(raw):
    """A request body as JSON, or Invalid: not JSON, a key twice in one object, nested too deeply."""
    try:
        text = raw or "null"
        if isinstance(text, (bytes, bytearray)):  # as json.loads does, without a new decoder per call
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        data = _decoder.decode(text)
    except RecursionError:
        raise Invalid("request body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise Invalid("request body is not valid JSON") from None
    where = lone_surrogate_path(data) if may_hold_lone_surrogate(text) else None
    if where is not None:
        raise Invalid(f"{where or 'request body'} is not valid Unicode text (a lone surrogate \\uD800-\\uDFFF)")
    where = nul_path(data) if may_hold_nul(text) else None
    if where is not None:
        raise nul_refused(where or "request body")
    return data


@tornado.web.stream_request_body
class BaseHandler(StreamedBody, tornado.web.RequestHandler):
    """Request id, HSTS, JSON error envelope, in-flight accounting for graceful shutdown; bodies streamed
    (handlers/bodies.py): prepare() refuses before any byte is read, max_body_bytes() bounds each route."""

    def initialize(self):
        self.application.inflight += 1
        self._counted = True

    def on_finish(self):
        if self._counted:
            self._counted = False
            self.application.inflight -= 1
        super().on_finish()

    def max_body_bytes(self):
        return self.application.settings_obj.max_body_bytes

    def body_limit(self):
        return self.max_body_bytes() if self.request.method in BODY_METHODS else None

    def on_connection_close(self):
        self.on_finish()

    def clear(self):
        """Tornado's clear() (before initialize(), and again when an error answer starts over) with our headers:
        the Date formatted once a second and the fixed headers set as they are, not checked again per request
        (its clear() and set_header() were ~5 % of an inbound request's event-loop time)."""
        if not hasattr(self, "request_id"):
            self.request_id = os.urandom(8).hex()
        self._headers = httputil.HTTPHeaders({"Content-Type": "text/html; charset=UTF-8", "Date": http_date(),
                                              "X-Request-Id": self.request_id, **SECURITY_HEADERS})
        self.set_default_headers()
        self._write_buffer = []
        self._status_code = 200
        self._reason = httputil.responses[200]

    def decode_argument(self, value, name=None):
        """A path part or query argument as text; U+0000 in it is refused here, on every route: PostgreSQL's
        text cannot hold it (a lookup with it was a 500), and no id, name or search has one."""
        text = super().decode_argument(value, name)
        if "\x00" in text:
            if name is None:  # a path part: no resource is named with U+0000
                raise tornado.web.HTTPError(404, "no such path: %s", masked_uri(self.request.path))
            raise nul_refused(name, field=name)
        return text

    def check_xsrf_cookie(self):
        """API requests authenticate with a key, not a cookie, so XSRF cannot apply; UiHandler checks."""

    def compute_etag(self):
        return None

    @property
    def services(self):
        return self.application.services

    idempotency = None  # the request's Idempotency-Key claim (@idempotent), when it sent one

    @property
    def replayed(self):
        """True when this answer is the stored one of an earlier request with the same Idempotency-Key:
        the handler then skips what follows a first write (e.g. handing a new message to the bot)."""
        return self.idempotency is not None and self.idempotency.replayed

    def set_own_headers(self, headers):
        """Headers whose names and values Parley makes itself (plain text): set as they are, without
        set_header()'s check per value (Tornado's write_headers still refuses a CR or LF in any header)."""
        self._headers.update(headers)

    def respond(self, obj, status=200):
        if self.replayed:
            self.set_header("Idempotent-Replayed", "true")
        self.set_status(status)
        self.set_own_headers(_JSON_CONTENT_TYPE)
        self.finish(obj.text() if isinstance(obj, EncodedOnce) else compact_json(obj))

    @classmethod
    def error_body(cls, code, message):
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
        return f"{self.request.method} {masked_uri(self.request.uri)}"

    def describe_error(self, status_code, exc):
        """(status, code, message) of an error answer, for every page kind; applies a DomainError's
        headers. Faults (5xx) say only the request id: the traceback stays in the log."""
        if isinstance(exc, DomainError):
            for name, value in exc.headers.items():
                self.set_header(name, value)
            return exc.status, exc.code, exc.message
        if isinstance(exc, tornado.web.HTTPError) and status_code < 500:
            message = exc.log_message % exc.args if exc.log_message else HTTPStatus(status_code).phrase
            return status_code, CODES.get(status_code, "ERROR"), message
        status_code, code = (503, "UNAVAILABLE") if status_code == 503 else (500, "INTERNAL")
        return status_code, code, f"internal error; the request id is {self.request_id}"

    def write_error(self, status_code, **kwargs):
        exc = kwargs.get("exc_info", (None, None, None))[1]
        status_code, code, message = self.describe_error(status_code, exc)
        body = self.error_body(code, message)
        if getattr(exc, "existing_id", None) and isinstance(body.get("error"), dict):
            body["error"]["existingId"] = exc.existing_id  # the spec's shape, plus the id for programs
        self.clear_header("Content-Type")
        self.set_status(status_code)
        self.respond(body, status_code)


class NotFoundHandler(BaseHandler):
    """Every unknown path: 404 in the JSON error shape, whatever the method."""

    def prepare(self):
        raise tornado.web.HTTPError(404, "no such path: %s", masked_uri(self.request.path))


class StaticHandler(BaseHandler, tornado.web.StaticFileHandler):
    """A file under static/ (or, subclassed, media/): Tornado's file serving (ranges, ETags,
    If-None-Match) with our headers (HSTS, nosniff, X-Request-Id) and error answers."""

    def initialize(self, path, default_filename=None):
        BaseHandler.initialize(self)
        tornado.web.StaticFileHandler.initialize(self, path, default_filename)

    compute_etag = tornado.web.StaticFileHandler.compute_etag  # BaseHandler's answers None


@functools.cache  # per handler class: asked on every request
def _implemented_methods(handler_class):
    base = tornado.web.RequestHandler
    return [m for m in handler_class.SUPPORTED_METHODS
            if getattr(handler_class, m.lower()) is not getattr(base, m.lower())]


def idempotent(method):
    """For an API handler's mutating method: an Idempotency-Key header (docs/design.md#api-decisions) makes the request's
    write exactly-once for the calling account: a retry within 24 h with the same key and parameters
    (request_fingerprint) is answered from the first write's result, with Idempotent-Replayed: true;
    other parameters are 422 IDEMPOTENCY_KEY_REUSED; a malformed key is 400. The OpenAPI document shows
    the header on every method that has this. What the method must keep to: storage/idempotency.py."""
    @functools.wraps(method)
    async def run(self, *args, **kwargs):
        key = self.request.headers.get(idempotency.HEADER)
        if key is None:
            return await method(self, *args, **kwargs)
        with idempotency.claim(self.principal.account_id, key, self.request_fingerprint) as self.idempotency:
            return await method(self, *args, **kwargs)
    run.idempotent = True
    return run


class ApiHandler(BaseHandler):
    """Authenticated JSON API endpoint: method check, size limit, rate limit, API key, JSON body."""

    key_in_header_only = False  # /v1/subaccounts/credits: x-api-key only, per docs/api.md#basics
    requires_auth = True
    parsed_body = None  # what json_body() parsed (Idempotency-Key fingerprints use it)
    rate_limit_headers = None  # the authenticated request's rate-limit headers (authenticate())

    def implemented_methods(self):
        return _implemented_methods(type(self))

    def write_error(self, status_code, **kwargs):
        # Set here: send_error() clears the headers set before it.
        if status_code == 405:
            self.set_header("Allow", ", ".join(self.implemented_methods()))
        if self.rate_limit_headers is not None:  # a client backing off reads them on errors too
            self.set_own_headers(self.rate_limit_headers)
        super().write_error(status_code, **kwargs)

    async def prepare(self):
        # Cheap refusals first: nothing here touches storage, and no byte of the body has been read.
        allowed = self.implemented_methods()
        if self.request.method not in allowed:
            raise tornado.web.HTTPError(405, "%s is not allowed here; use %s", self.request.method,
                                        " or ".join(allowed))
        if self.application.settings_obj.behind_proxy and self.request.protocol != "https":
            raise Forbidden("HTTPS is required", code="HTTPS_REQUIRED")
        self.refuse_oversized_body()
        self.principal = await self.authenticate() if self.requires_auth else None
        self.reserve_body()

    @property
    def actor(self):
        """Who a change is by, for the audit list: the account's API key."""
        return audit.API_KEY

    def api_key(self):
        """The x-api-key header, else Authorization: Bearer, else (but on header-only routes) ?apiKey=."""
        key = self.request.headers.get("x-api-key") or bearer_token(self.request.headers.get("Authorization"))
        if key or self.key_in_header_only:
            return key
        return self.get_query_argument("apiKey", None)

    def missing_key_message(self):
        if not self.key_in_header_only:
            return ("missing API key: pass it in the x-api-key header or as Authorization: Bearer "
                    "(or the apiKey query parameter)")
        if self.get_query_argument("apiKey", None) is not None:
            return ("missing API key: this endpoint takes the key only in the x-api-key header (or as "
                    "Authorization: Bearer), not ?apiKey=")
        return "missing API key: pass it in the x-api-key header or as Authorization: Bearer"

    async def authenticate(self):
        key = self.api_key()
        if not key:
            raise Unauthorized(self.missing_key_message())
        registry = self.services.keys
        key_hash = hash_api_key(key)
        # Counted per presented key before any storage work; a cached account's override applies,
        # an unknown key gets the default budget.
        cached = registry.cached(key_hash)
        limit = (cached and cached.rate_limit_per_minute) or self.application.settings_obj.rate_limit
        allowed, headers = await self.services.limiter.hit_shared(key_hash, limit)
        if not allowed and cached is None:
            # The cache was emptied (a key or a limit changed, `parley set-rate-limit`): the account's own
            # limit decides, not the default's spent budget (a refused hit was not counted, so count it anew).
            cached = await self._principal_or_none(registry, key_hash)
            if cached is not None and cached.rate_limit_per_minute and cached.rate_limit_per_minute != limit:
                limit = cached.rate_limit_per_minute
                allowed, headers = await self.services.limiter.hit_shared(key_hash, limit)
        self.set_own_headers(headers)
        if not allowed:
            raise RateLimited(f"rate limit of {limit} requests per minute exceeded; retry after "
                              f"{headers['Retry-After']} s", headers=headers)
        principal = cached or await registry.principal_for(key_hash)
        registry.used(key_hash)
        # Kept for write_error: an error answer after authentication carries them too (not a 401).
        self.rate_limit_headers = headers
        return principal

    @staticmethod
    async def _principal_or_none(registry, key_hash):
        try:
            return await registry.principal_for(key_hash)
        except Unauthorized:
            return None  # over the default budget, an unknown key is told 429 like any other

    def json_body(self, model, *, optional=False):
        """Parse the body as JSON into a pydantic model; 415 for another content type, 400 naming the field.
        optional: no body at all is the model's defaults (Operation(body_optional=True))."""
        if optional and not self.request.body.strip():
            self.parsed_body = model()
            return self.parsed_body
        content_type = self.request.headers.get("Content-Type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise UnsupportedMediaType("Content-Type must be application/json")
        data = parse_json(self.request.body)
        if not isinstance(data, dict):
            raise Invalid("request body must be a JSON object")
        try:
            self.parsed_body = model.model_validate(data)
        except pydantic.ValidationError as exc:
            raise Invalid(validation_message(exc)) from None
        return self.parsed_body

    async def request_fingerprint(self):
        """What a retry with the same Idempotency-Key must repeat: the endpoint, the ids in its path and
        the parsed body (hashed in an executor when the body is big, e.g. embedded media)."""
        params = {"endpoint": type(self).__name__, "method": self.request.method, "path": list(self.path_args),
                  "body": self.parsed_body.model_dump(mode="json") if self.parsed_body is not None else None}
        if len(self.request.body) <= _HASH_INLINE_BYTES:
            return idempotency.fingerprint(params)
        return await asyncio.get_running_loop().run_in_executor(None, idempotency.fingerprint, params)


def bearer_token(authorization):
    """The token of an "Authorization: Bearer <token>" header (RFC 6750 §2.1: the scheme in any case)."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


class UnsupportedMediaType(DomainError):
    status, code = 415, "UNSUPPORTED_MEDIA_TYPE"


class CustomChannelHandler(ApiHandler):
    """The custom-channel endpoints answer every error as {"error": "text"} (docs/api.md#errors)."""

    @classmethod
    def error_body(cls, code, message):
        return {"error": message}


def raw_error_response(handler_class, status, message, request_id):
    """A whole HTTP/1.1 answer for a request no handler could take (its headers were too large to read):
    the route's error shape (a page for the UI), our headers, and Connection: close."""
    phrase = HTTPStatus(status).phrase
    if getattr(handler_class, "html_errors", False):
        content_type = "text/html; charset=UTF-8"
        body = (f"<!doctype html><title>{status} {phrase}</title><h1>{phrase}</h1><p>{html.escape(message)}</p>"
                f"<p>Request id {request_id}</p>").encode()
    else:
        content_type = "application/json; charset=UTF-8"
        error = handler_class.error_body(CODES.get(status, "ERROR"), message)
        body = compact_json(error).encode()
    headers = {"Content-Type": content_type, "Content-Length": str(len(body)), "Connection": "close",
               "X-Request-Id": request_id, **SECURITY_HEADERS}
    head = f"HTTP/1.1 {status} {phrase}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (head + "\r\n").encode("latin-1") + body


async def send_csv(handler, chunks, filename):
    """Stream a CSV export (chunks: an async iterator of text, common/spreadsheet.py csv_pages) as a download,
    flushing after each chunk so that it never sits in memory whole. The first chunk is awaited before any header
    is sent: an error (404, 400) is still answered as one."""
    first = await anext(chunks)
    handler.set_header("Content-Type", "text/csv; charset=UTF-8")
    handler.set_header("Content-Disposition", f'attachment; filename="{filename}"')
    handler.write(first)
    async for chunk in chunks:
        await handler.flush()
        handler.write(chunk)
    handler.finish()
