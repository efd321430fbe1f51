"""HTTP servers: the HTTPS server that drains on shutdown, and the plain-HTTP rejecter."""
import tornado.httpserver
import tornado.web
from tornado import httputil

from handlers.base import BaseHandler, log_request
from common.errors import Forbidden


class DrainingHTTPServer(tornado.httpserver.HTTPServer):
    """An HTTPServer that knows how many requests are still being received.

    A request counts from its headers until its body is complete; from then on the handler counts
    it (Application.inflight). Shutdown waits for both to reach zero, so a client that is halfway
    through sending a body when SIGTERM arrives still gets its answer.
    """

    def initialize(self, *args, **kwargs):
        super().initialize(*args, **kwargs)
        self.receiving = 0

    def start_request(self, server_conn, request_conn):
        return _CountingDelegate(super().start_request(server_conn, request_conn), self)


class _CountingDelegate(httputil.HTTPMessageDelegate):
    def __init__(self, inner, server):
        self.inner, self.server, self.counted = inner, server, False

    def headers_received(self, start_line, headers):
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
        if self.counted:
            self.counted = False
            self.server.receiving -= 1


class HttpsRequiredHandler(BaseHandler):
    """Everything that arrives over plain HTTP: 403 HTTPS_REQUIRED, or a 301 for a browser page load.
    Nothing else is processed: no authentication, no storage."""

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


class RejecterApplication(tornado.web.Application):
    def __init__(self, https_base):
        self.inflight = 0
        super().__init__([(r".*", HttpsRequiredHandler)], log_function=log_request, https_base=https_base)
