"""GET /ws: the admin UI's live events over a WebSocket (Tornado's own), for the signed-in account only.

The handshake needs the session cookie (handlers.ui_base.session_user, 401 without one) and an Origin that is
this site's (403 otherwise: a page elsewhere cannot ride the cookie), and ?after=<event id> (the id the page
was rendered at, or the last one it received; 400 without it), or ?counts=1 on a page that shows no live events
(the navigation's counts alone). services/live.py's docstring has the frames. The access log has the handshake
(one line a connection), never a line per event."""
import json
from urllib.parse import urlsplit

import tornado.web
import tornado.websocket

from handlers.base import CODES, SECURITY_HEADERS
from handlers.ui_base import session_key, session_user
from services.presence import page_message
from services.users import author_name


def _origin(url):
    try:
        parts = urlsplit(url.strip().lower())
    except ValueError:  # e.g. "https://[::1": an Origin or Host header that is no URL matches nothing
        return None
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None


def site_origins(handler):
    """This site as the browser sees it: the public URL, and the Host it was reached at over HTTPS."""
    origins = {_origin(handler.application.settings_obj.base_url)}
    host = handler.request.headers.get("Host")
    if host:
        origins.add(_origin(f"https://{host}"))
    return origins - {None}


class _Transport:
    """What the hub needs of a socket: write a frame (a future), close it."""

    def __init__(self, handler):
        self.handler = handler

    def write(self, frame):
        connection = self.handler.ws_connection
        if connection is None or connection.is_closing():
            raise tornado.websocket.WebSocketClosedError()
        # write_message() wraps every write in a Task of its own and compresses per connection; with hundreds
        # of pages per round those were the fan-out's largest costs. The protocol's frame writer takes the
        # frame deflated once for every page (RSV1 marks a compressed message) and gives the stream's own
        # future (it fails, and is retrieved by the hub, if the connection closes first).
        if self.handler.shared_deflate:
            return connection._write_frame(True, 0x1, frame.deflated, flags=connection.RSV1)
        return connection._write_frame(True, 0x1, frame.data)

    def close(self, code, reason):
        self.handler.close(code, reason)


class SiteSocketHandler(tornado.websocket.WebSocketHandler):
    """A WebSocket only this site's own pages may open (the inbox's /ws, the chat frame's /widget/{id}/live):
    over HTTPS, from this site's origin, while the connection cap has room. Refusals come before the upgrade,
    as plain HTTP answers."""

    def check_origin(self, origin):
        return _origin(origin or "") in site_origins(self)

    def refuse_unless_from_this_site(self, refusal):
        """403 for plain HTTP behind a proxy, and for a missing or other origin (refusal: what it says then)."""
        if self.application.settings_obj.behind_proxy and self.request.protocol != "https":
            raise tornado.web.HTTPError(403, "HTTPS is required")
        origin = self.request.headers.get("Origin")
        if not origin or not self.check_origin(origin):
            raise tornado.web.HTTPError(403, refusal)

    def refuse_when_full(self, refusal):
        """503 when the server keeps as many live connections as it may (refusal: what it says then)."""
        guard = getattr(self.application, "connection_guard", None)
        if guard is not None and not guard.socket_room():
            raise tornado.web.HTTPError(503, refusal)


class LiveEventsHandler(SiteSocketHandler):
    subscriber = None
    shared_deflate = False  # permessage-deflate agreed such that one deflated frame serves every page

    def get_compression_options(self):
        return {}  # negotiate permessage-deflate when the page offers it (browsers do)

    def set_header(self, name, value):
        # The answer to a permessage-deflate offer: add server_no_context_takeover (RFC 7692 §7.1.1.1 lets a
        # server add it unasked), so that each message stands alone and the hub's one deflated copy is valid
        # on every connection. A page that limits our window (server_max_window_bits) gets plain frames.
        if name == "Sec-WebSocket-Extensions" and str(value).startswith("permessage-deflate"):
            if "server_max_window_bits" not in value:
                if "server_no_context_takeover" not in value:
                    value = f"{value}; server_no_context_takeover"
                self.shared_deflate = True
        super().set_header(name, value)

    def set_default_headers(self):
        self.set_header("Server", SECURITY_HEADERS["Server"])
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")

    async def prepare(self):
        self.refuse_unless_from_this_site("cross-origin WebSocket refused: open it from this site's pages")
        self.user = await session_user(self)
        if self.user is None:
            raise tornado.web.HTTPError(401, "sign in first: the live events need the session cookie")
        self.refuse_when_full("the server has as many live connections as it keeps; the page works without "
                              "live updates meanwhile")
        self.counts_only = self.get_query_argument("counts", "") == "1"
        text = self.get_query_argument("after", "0" if self.counts_only else "")
        if not (text.isascii() and text.isdigit()) or len(text) > 18:
            raise tornado.web.HTTPError(400, "after must be the last event id the page saw (an integer), or "
                                             "counts=1 for the navigation's counts alone")
        self.after = int(text)

    async def open(self):
        hub = self.application.services.hub
        viewer = self.user.get("viewer")
        subscriber = await hub.subscribe(
            self.user["account_id"], self.user["id"], self.after, _Transport(self), session_key(self, self.user),
            role=self.user.get("role") or "admin", user_role=(viewer or self.user).get("role") or "admin",
            parent_session=session_key(self) if viewer else None, counts_only=self.counts_only)
        if subscriber is not None and self.ws_connection is None:  # the page left while it was subscribing
            hub.unsubscribe(subscriber)
            return
        if subscriber is not None:
            subscriber.label = self.user.get("label") or author_name(self.user["email"], name=self.user.get("name"))
            seen = getattr(self.application.services, "seen", None)
            if seen is not None:
                seen.arrived(self.user["id"])  # a live page: not away for idleness (services/assignment.py)
        self.subscriber = subscriber

    def on_message(self, message):
        """A thread page says which conversation it shows ({"type": "viewing", "contactId"}): the hub tells the
        account's other pages on it; or that its agent types a reply ({"type": "typing", "contactId"}): the
        contact's widget visitors are told (services/typing.py). Anything else is ignored."""
        if self.subscriber is None or self.subscriber.closed:
            return
        services = self.application.services
        try:
            kind, contact_id = page_message(message)
        except ValueError:
            return
        if kind == "viewing":
            services.hub.presence.view(self.subscriber, contact_id)
        else:
            services.typing.agent_typing(self.subscriber, contact_id)

    def on_close(self):
        if self.subscriber is not None:
            self.subscriber.closed = True
            self.application.services.hub.unsubscribe(self.subscriber)

    def write_error(self, status_code, **kwargs):
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = (exc.log_message % exc.args if isinstance(exc, tornado.web.HTTPError) and exc.log_message
                   else "the live events are unavailable")
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        if status_code == 503:  # the WebSockets' share of the connections is taken: the page retries later
            self.set_header("Retry-After", "30")
        self.finish(json.dumps({"error": {"code": CODES.get(status_code, "ERROR"), "message": message}}))

    def log_exception(self, typ, value, tb):
        if isinstance(value, tornado.web.HTTPError):
            return  # an expected refusal; the access log has the status
        super().log_exception(typ, value, tb)
