"""HTTP servers: the HTTPS server with connection limits (a cap, a TLS handshake deadline, lingering
after early answers, 431 for oversized headers, accept() failures logged once per interval), draining
on shutdown; and the plain-HTTP rejecter."""
import contextvars
import errno
import logging
import os
import resource
import ssl
import time

import tornado.httpserver
import tornado.web
from tornado import httputil
from tornado.iostream import IOStream, SSLIOStream, UnsatisfiableReadError
from tornado.netutil import ssl_wrap_socket

from common.errors import Forbidden
from handlers.base import BaseHandler, log_request, raw_error_response
from handlers.bodies import StreamedBodyRouting

log = logging.getLogger("parley.connections")

DISCARD_BEFORE_CLOSE = 1 << 20  # bytes read and dropped before closing after a 431 (avoids a reset)
handshaking_client = contextvars.ContextVar("handshaking_client", default=None)  # its address, during a handshake


class _ServerStream:
    """What our server's streams add to Tornado's: an answer (431) instead of a cut connection when the
    request headers outgrow --max-header-bytes, and lingering after an early answer (a handler refused
    the request before reading its body: the client may still be sending it, and closing on unread data
    would reset the connection before the client read the answer)."""

    server = None
    linger_on_close = False  # set by handlers/bodies.py when answering before the body was read
    _lingering = False
    _answering = False

    def close(self, exc_info=False):
        if self._answering:
            return None  # the 431 is on its way; the stream closes once it is written
        reading_headers = not self.closed() and self in self.server.guard.waiting
        if isinstance(exc_info, UnsatisfiableReadError) and reading_headers:
            return self._answer_headers_too_large()
        if self.linger_on_close and not self._lingering and not exc_info and not self.closed():
            # Tornado keeps draining the body it was reading (until its end, the body timeout, or the client
            # closing); the next close() is the real one. Meanwhile the connection may be evicted.
            self._lingering = True
            self.server.guard.wait(self, self.server.body_timeout)
            return None
        return super().close(exc_info)

    def abort(self):
        """Close now: no answer pending, no lingering."""
        self._answering = False
        super().close()

    def _answer_headers_too_large(self):
        self._answering = True
        buffered = bytes(getattr(self, "_read_buffer", b"")[:8192])
        try:
            written = self.write(self.server.headers_too_large(buffered))
        except Exception:  # closed meanwhile, or the answer could not be made: just close
            log.exception("no 431 answer could be sent")
            self._discard_and_close()
            return
        written.add_done_callback(lambda f: (f.cancelled() or f.exception(), self._discard_and_close()))

    def _discard_and_close(self):
        """Read and drop what the client already sent (up to a bound), so that closing does not reset the
        connection before the client read the answer."""
        buffer, dropped = bytearray(65536), 0
        try:
            while dropped < DISCARD_BEFORE_CLOSE:
                n = self.read_from_fd(buffer)
                if not n:
                    break
                dropped += n
        except (OSError, ssl.SSLError):
            pass
        self._answering = False
        super().close()


class _PlainStream(_ServerStream, IOStream):
    pass


class _TLSStream(_ServerStream, SSLIOStream):
    client_address = None  # set by GuardedHTTPServer._accepted

    def _do_ssl_handshake(self):
        # Tornado logs a failed handshake with getpeername(), often gone by then: TlsRefusalLog reads this.
        token = handshaking_client.set(self.client_address)
        try:
            super()._do_ssl_handshake()
        finally:
            handshaking_client.reset(token)


class GuardedHTTPServer(tornado.httpserver.HTTPServer):
    """Tornado's HTTPServer with the limits of docs/operations.md "Limits": connections capped by ``guard`` (shared by every
    server of the process), a TLS handshake deadline, request headers up to ``max_header_size`` (431
    above), and the idle and body timeouts Tornado has. It also knows how many requests are still being
    received: a request counts from its headers until its body is complete, the handler from then on
    (Application.inflight); shutdown waits for both, so a client halfway through sending a body when
    SIGTERM arrives still gets its answer."""

    def initialize(self, *args, guard, handshake_timeout=None, idle_connection_timeout=None, body_timeout=None,
                   **kwargs):
        super().initialize(*args, **kwargs)
        # The guard keeps these deadlines (one sweep for all connections), not Tornado (a timer per request).
        self.idle_timeout, self.body_timeout = idle_connection_timeout, body_timeout
        self.conn_params.header_timeout = self.conn_params.body_timeout = None
        self.guard = guard
        self.handshake_timeout = handshake_timeout
        self.receiving = 0
        self._listeners = []

    def add_sockets(self, sockets):
        for sock in sockets:
            self._listeners.append(self.guard.listen(sock, self._accepted))

    def stop(self):
        for listener in self._listeners:
            listener.close()
        self._listeners = []

    def _accepted(self, connection, address):
        try:
            stream = self._stream(connection)
        except Exception as exc:  # a client that went away at once, a TLS setup failure: not our problem
            log.info("connection from %s dropped before it started: %s", address[0] if address else "?", exc)
            connection.close()
            return
        if stream is None:
            return
        stream.server = self
        stream.client_address = address[0] if address else None
        self.guard.opened(stream, self.idle_timeout)
        if isinstance(stream, SSLIOStream) and self.handshake_timeout:
            self._handshake_deadline(stream)
        self.handle_stream(stream, address)

    def _stream(self, connection):
        params = dict(max_buffer_size=self.max_buffer_size, read_chunk_size=self.read_chunk_size)
        if self.ssl_options is None:
            return _PlainStream(connection, **params)
        try:
            connection = ssl_wrap_socket(connection, self.ssl_options, server_side=True,
                                         do_handshake_on_connect=False)
        except (ssl.SSLError, OSError) as exc:
            # As tornado.tcpserver: a port scan's connection may be gone before it is wrapped.
            if getattr(exc, "errno", None) in (errno.ECONNABORTED, errno.EINVAL) or (
                    isinstance(exc, ssl.SSLError) and exc.args[0] == ssl.SSL_ERROR_EOF):
                connection.close()
                return None
            raise
        return _TLSStream(connection, **params)

    def _handshake_deadline(self, stream):
        self.guard.handshake(stream, self.handshake_timeout)  # kept by the guard's sweep, as the other deadlines
        stream.wait_for_handshake().add_done_callback(
            lambda f: (self.guard.handshake_done(stream), f.cancelled() or f.exception()))

    def start_request(self, server_conn, request_conn):
        self.guard.wait(server_conn.stream, self.idle_timeout)
        return _RequestDelegate(super().start_request(server_conn, request_conn), self, server_conn.stream)

    def on_close(self, server_conn):
        super().on_close(server_conn)
        self.guard.closed(server_conn.stream)

    def headers_too_large(self, buffered):
        """The whole 431 answer for a request whose headers outgrew the limit, in its route's error shape."""
        start_line = buffered.split(b"\n", 1)[0].decode("latin-1").strip()
        method, _, rest = start_line.partition(" ")
        uri = (rest.rpartition(" ")[0] or rest)[:2048]
        handler_class, path = BaseHandler, "?"
        try:  # the route's handler class decides the shape of the answer
            request = httputil.HTTPServerRequest(method=method or "GET", uri=uri or "/")
            path = request.path
            handler_class = self.request_callback.find_handler(request).handler_class
        except Exception:
            pass  # a request line that is not one: the general shape
        message = f"request line and headers are larger than {self.conn_params.max_header_size} bytes"
        request_id = os.urandom(8).hex()
        log.warning("431 %s %s rid=%s: %s", method[:16], path[:200], request_id, message)
        return raw_error_response(handler_class, 431, message, request_id)


class _RequestDelegate(httputil.HTTPMessageDelegate):
    def __init__(self, inner, server, stream):
        self.inner, self.server, self.stream, self.counted = inner, server, stream, False

    def headers_received(self, start_line, headers):
        self.server.guard.busy(self.stream, self.server.body_timeout)
        self.counted = True
        self.server.receiving += 1
        return self.inner.headers_received(start_line, headers)

    def data_received(self, chunk):
        return self.inner.data_received(chunk)

    def finish(self):
        try:
            self.inner.finish()  # creates the handler, which takes over the count
        finally:
            self._release()

    def on_connection_close(self):
        try:
            self.inner.on_connection_close()
        finally:
            self._release()

    def _release(self):
        self.server.guard.received(self.stream)
        if self.counted:
            self.counted = False
            self.server.receiving -= 1


class HttpsRequiredHandler(BaseHandler):
    """Everything that arrives over plain HTTP: 403 HTTPS_REQUIRED, or a 301 for a browser page load.
    Nothing else is processed: no authentication, no storage, no body."""

    def max_body_bytes(self):
        return 0  # nothing that arrives here is read

    def prepare(self):
        path = self.request.path
        is_api = path == "/v1" or path.startswith("/v1/") or path.startswith("/incomingCustomChannelMessage")
        wants_page = "text/html" in self.request.headers.get("Accept", "")
        https_base = self.application.settings["https_base"]
        if self.request.method in ("GET", "HEAD") and wants_page and not is_api:
            self.redirect(https_base + self.request.uri, permanent=True)
            return
        raise Forbidden(f"HTTPS is required: use {https_base}{path}", code="HTTPS_REQUIRED")


class RejecterApplication(StreamedBodyRouting, tornado.web.Application):
    def __init__(self, https_base):
        self.inflight = 0
        super().__init__([(r".*", HttpsRequiredHandler)], log_function=log_request, https_base=https_base)


class LogThrottle(logging.Filter):
    """At most one record per ``interval`` seconds for each message of the loggers it filters (floods of
    refused connections, TLS errors, accept() failures); the next one let through, or flush(), says how
    many were left out."""

    def __init__(self, interval=10.0, clock=time.monotonic):
        super().__init__()
        self.interval, self.clock = interval, clock
        self._windows = {}  # (logger, message template) -> [window start, records left out, the last one]

    def filter(self, record):
        if getattr(record, "throttle_summary", False):
            return True
        key = (record.name, str(record.msg))
        now = self.clock()
        window = self._windows.get(key)
        if window is not None and now - window[0] < self.interval:
            window[1] += 1
            window[2] = record
            return False
        if window is not None and window[1]:
            record.msg = f"{record.msg} [and {window[1]} more like this in the last {now - window[0]:.0f} s]"
        if len(self._windows) > 1000:  # templates are few; this only bounds a pathological caller
            self._windows.clear()
        self._windows[key] = [now, 0, None]
        return True

    def flush(self):
        """Report what was left out in windows that are over (call periodically)."""
        now = self.clock()
        for key, window in list(self._windows.items()):
            if window[1] and now - window[0] >= self.interval:
                record = window[2]
                summary = logging.makeLogRecord({**record.__dict__, "throttle_summary": True, "exc_info": None,
                                                 "exc_text": None})
                summary.msg = "%d more like this in the last %.0f s; the last one: %s"
                summary.args = (window[1], now - window[0], record.getMessage())
                del self._windows[key]
                logging.getLogger(record.name).handle(summary)


class TlsRefusalLog(logging.Filter):
    """Tornado's "SSL Error on <fd> <peer>: <error>" (one per connection: a browser that refuses the
    self-signed certificate opens many) becomes one INFO line per client address per ``interval`` seconds,
    with the fix when the client refused the certificate. For the "tornado.general" logger, before
    LogThrottle."""

    HINT = ("the client refused the server's certificate: trust data/tls/cert.pem in the browser or system, "
            "or bring a certificate with --tls-cert and --tls-key")

    def __init__(self, interval=3600.0, clock=time.monotonic):
        super().__init__()
        self.interval, self.clock = interval, clock
        self._last = {}  # client address -> when its last line was logged

    def filter(self, record):
        if record.msg != "SSL Error on %s %s: %s" or not isinstance(record.args, tuple) or len(record.args) != 3:
            return True
        peer, error = record.args[1], str(record.args[2])
        address = handshaking_client.get() or (peer[0] if isinstance(peer, tuple) and peer else str(peer))
        now = self.clock()
        if now - self._last.get(address, -self.interval) < self.interval:
            return False
        if len(self._last) > 10000:  # bounded: forget the addresses whose hour is over
            self._last = {a: t for a, t in self._last.items() if now - t < self.interval}
        self._last[address] = now
        hint = f"; {self.HINT}" if "ALERT" in error.upper() else ""
        record.levelno, record.levelname = logging.INFO, "INFO"
        record.msg, record.args = "TLS handshake from %s failed: %s%s (logged once per address per hour)", (
            address, error, hint)
        return True


def raise_file_limit():
    """The soft limit on open files raised to the hard one (connections are file descriptors); returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, hard, exc)
    return soft


def connection_cap(wanted, file_limit, reserve):
    """--max-connections, lowered to what the file limit leaves after ``reserve`` descriptors for the rest
    (the database, the writer, media files, webhook deliveries)."""
    cap = max(1, min(wanted, file_limit - reserve))
    if cap < wanted:
        log.warning("the open-file limit (%d) allows %d connections, not --max-connections %d",
                    file_limit, cap, wanted)
    return cap

