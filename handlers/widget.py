"""The website chat widget's public side (services/widget.py, docs/guide.md "Website chat widget"): the loader
/widget.js, the chat frame /widget/{widgetId} (framed only by the widget's allowed origins), and the visitors' API
under /widget/{widgetId}/… that the frame calls, same-origin, with the visitor's token in X-Parley-Visitor.

No API key: a visitor is who their sealed token says. Calls must come from the frame (Parley's own origin): a
request whose Origin is another site is refused, and no answer carries CORS headers, so no other page can read one."""
import asyncio
import json
import logging

import tornado.web
import tornado.websocket

from common.errors import Forbidden
from handlers.base import SECURITY_HEADERS, ApiHandler, BaseHandler, StaticHandler
from handlers.live import SiteSocketHandler, _origin, site_origins
from handlers.openapi import Operation
from handlers.widget_schemas import (VisitorCsat, VisitorCsatAnswered, VisitorEmail, VisitorEmailSaved, VisitorHistory, VisitorIdentify,
                                     VisitorIdentity, VisitorSend, VisitorSent, VisitorUpdates, VisitorUpdatesQuery)
from services import messaging, widget

log = logging.getLogger("parley.widget")
WIDGET_ID = r"(wid_[0-9a-z]{26})"
TOKEN_HEADER = "X-Parley-Visitor"


class VisitorHandler(ApiHandler):
    """The visitors' API: no key; the widget must exist and be enabled; only Parley's own pages may call it."""
    requires_auth = False
    path_params = {"widgetId": "The widget's public id (wid_…), as in the snippet."}

    def set_default_headers(self):
        self.set_header("Cache-Control", "no-store")

    async def prepare(self):
        await super().prepare()
        origin = self.request.headers.get("Origin")
        if origin is not None and _origin(origin) not in site_origins(self):
            raise Forbidden("the chat's API answers the chat frame only, not other sites' pages")
        self.widget = await widget.load(self.services.db, self.path_args[0])

    def visitor_token(self):
        return self.request.headers.get(TOKEN_HEADER)


_ERRORS = {404: "No such widget, or it is disabled (WIDGET_NOT_FOUND).",
           403: "Called from another site than Parley's own chat frame (FORBIDDEN)."}


class VisitorMessagesHandler(VisitorHandler):
    operations = {
        "get": Operation("A visitor's conversation", {200: VisitorHistory}, tags=("widget",), errors=_ERRORS,
                         headers={TOKEN_HEADER: "The visitor's token, when they have one."},
                         description="The newest 100 messages of the visitor's conversation on the widget, oldest "
                                     "first, and the cursor live updates resume from. No token: none."),
        "post": Operation(
            "A visitor writes", {201: VisitorSent}, body=VisitorSend, tags=("widget",),
            headers={TOKEN_HEADER: "The visitor's token; without one, the answer makes one (keep it)."},
            errors={**_ERRORS, 400: "An empty or too long body (more than 2,000 characters), an attachment that is "
                                     "not an image or a PDF, or whose bytes are not its type.",
                    413: "An attachment over --max-media-bytes.",
                    403: "A crawler, another site, or an unidentified visitor when the widget requires identity "
                         "(IDENTITY_REQUIRED).",
                    429: "Too many messages from this visitor or this address (the message says how long to wait)."},
            description="An inbound message of channel web: the inbox, the bot, reports and events have it as any "
                        "other. The first one makes the visitor's token and contact; nothing is stored before.")}

    async def get(self, widget_id):
        self.respond(await widget.history(self.services, self.widget, self.visitor_token()))

    async def post(self, widget_id):
        body = self.json_body(VisitorSend)
        answer, stored = await widget.send(
            self.services, self.widget, self.visitor_token(), body=body.body, honeypot=body.website,
            remote_ip=self.request.remote_ip, user_agent=self.request.headers.get("User-Agent"),
            media_url=body.mediaUrl, media_content_type=body.mediaContentType)
        self.respond(answer, status=201)
        if stored is not None:
            messaging.after_inbound(self.services, stored)


class VisitorIdentifyHandler(VisitorHandler):
    operations = {"post": Operation(
        "A visitor says who they are", {200: VisitorIdentity}, body=VisitorIdentify, tags=("widget",),
        headers={TOKEN_HEADER: "The visitor's token, when they have one."},
        errors={**_ERRORS, 400: "A missing or too long id, a bad email."},
        description="With hash = hex HMAC-SHA256(identity secret, id), compared in constant time, the answer's token "
                    "names that id: the same id from another browser is the same contact. A wrong hash binds "
                    "nothing (verified false; the token the visitor had stays theirs).")}

    async def post(self, widget_id):
        body = self.json_body(VisitorIdentify)
        self.respond(await widget.identify(self.services, self.widget, self.visitor_token(), user_id=body.id,
                                           email=body.email, name=body.name, hash=body.hash))


class VisitorEmailHandler(VisitorHandler):
    operations = {"post": Operation(
        "A visitor leaves their email", {200: VisitorEmailSaved}, body=VisitorEmail, tags=("widget",),
        headers={TOKEN_HEADER: "The visitor's token, when they have one; without one, the answer makes one."},
        errors={**_ERRORS, 400: "Not an email address (the message names email).",
                429: "Too many tries from this visitor."},
        description="Outside business hours the chat asks for an email to answer at. It goes into the visitor's "
                    "token (their first message makes their contact with it: nothing is stored before) and, when "
                    "they wrote already, onto their contact if it has no email and no other contact has it.")}

    async def post(self, widget_id):
        body = self.json_body(VisitorEmail)
        self.respond(await widget.give_email(self.services, self.widget, self.visitor_token(), body.email))


class VisitorCsatHandler(VisitorHandler):
    operations = {"post": Operation(
        "A visitor answers the CSAT question", {200: VisitorCsatAnswered}, body=VisitorCsat, tags=("widget",),
        headers={TOKEN_HEADER: "The visitor's token."},
        errors={**_ERRORS, 400: "A rating that is not a whole number from 1 to 5, a comment over 1,000 characters or "
                                "with control characters (the message names the field).",
                410: "No question waits for an answer: answered already, or expired (CSAT_CLOSED)."},
        description="Answers the question the chat shows when the visitor's conversation was resolved (the history's "
                    "csat): once; csat.submitted is emitted.")}

    async def post(self, widget_id):
        body = self.json_body(VisitorCsat)
        self.respond(await widget.answer_csat(self.services, self.widget, self.visitor_token(), body.rating,
                                              body.comment))


class VisitorUpdatesHandler(VisitorHandler):
    operations = {"get": Operation(
        "A visitor's new messages (long-poll)", {200: VisitorUpdates}, query=VisitorUpdatesQuery, tags=("widget",),
        headers={TOKEN_HEADER: "The visitor's token."},
        errors={**_ERRORS, 400: "after is not a cursor of this widget, or wait is out of range.",
                410: "after is older than the events kept (CURSOR_EXPIRED): read the history again."},
        description="The frame's fallback when its WebSocket (/widget/{widgetId}/live) cannot connect: waits up to "
                    "wait seconds for a message of the visitor's conversation committed after the cursor.")}

    async def get(self, widget_id):
        after = self.get_query_argument("after", "")
        wait = widget.parse_wait(self.get_query_argument("wait", None))
        self.respond(await widget.updates(self.services, self.widget, self.visitor_token(), after, wait))


class ChatFrameHandler(BaseHandler):
    """GET /widget/{widgetId}: the chat frame, framed only by the widget's allowed origins (frame-ancestors)."""
    in_openapi = False

    async def get(self, widget_id):
        try:
            loaded = await widget.load(self.services.db, widget_id)
        except widget.Unavailable:
            loaded = None
        ancestors = " ".join(loaded["settings"]["allowedOrigins"]) if loaded else ""
        self.set_header("Content-Security-Policy",
                        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                        "connect-src 'self'; base-uri 'none'; form-action 'none'; "
                        f"frame-ancestors {ancestors or chr(39) + 'none' + chr(39)}")
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("Cache-Control", "no-store")
        if loaded is None:
            self.set_status(404)
            self.finish("<!doctype html><title>Chat unavailable</title><p>This chat is not available.</p>")
            return
        config = widget.public_config(loaded)
        self.render("widget_frame.html", config=config, config_json=json.dumps(config))


class WidgetScriptHandler(StaticHandler):
    """GET /widget.js: the loader the snippet names (static/widget.js), cached an hour (it is not versioned)."""
    in_openapi = False

    def initialize(self):
        super().initialize(self.application.settings["static_path"])

    def get_cache_time(self, path, modified, mime_type):
        return 3600


class VisitorLiveHandler(SiteSocketHandler):
    """WS /widget/{widgetId}/live?after=<cursor>: the frame's live updates. Its first message is {"token"}; then each
    message of the visitor's conversation comes as {"type": "messages", "messages", "cursor"} (the cursor to resume
    from after a drop), read from the account's event stream as the long-poll does. Typing, both ways and never
    stored (services/typing.py): the frame sends {"type": "typing"} while the visitor types, and gets
    {"type": "typing", "expiresIn": 5} while an agent types a reply."""
    task = None
    from_id = None

    def set_default_headers(self):
        self.set_header("Server", SECURITY_HEADERS["Server"])
        self.set_header("Cache-Control", "no-store")

    async def prepare(self):
        self.refuse_unless_from_this_site("the chat's live updates answer the chat frame only")
        try:
            self.widget = await widget.load(self.application.services.db, self.path_args[0])
        except widget.Unavailable:
            raise tornado.web.HTTPError(404, "this chat is not available") from None
        self.refuse_when_full("the server has as many live connections as it keeps")
        self.after = self.get_query_argument("after", "")

    def on_message(self, message):
        """The first message is {"token"}; then {"type": "typing"} while the visitor types (services/typing.py)."""
        try:
            data = json.loads(message)
        except ValueError:
            data = None
        data = data if isinstance(data, dict) else {}
        typing = self.application.services.typing
        if self.task is None:
            token = data.get("token")
            token = token if isinstance(token, str) else None  # {"token": 5} is no token, not a TypeError
            self.from_id = widget.visitor_from_id(self.application.services.box, self.widget, token)
            if self.from_id is not None:
                typing.join(self.widget["account_id"], self.from_id, self.send_typing)
            self.task = asyncio.ensure_future(self.follow(token))
        elif data.get("type") == "typing" and self.from_id is not None:
            typing.visitor_typing(self.widget["account_id"], self.from_id)

    def send_typing(self, frame):
        """An agent types a reply in the visitor's conversation: {"type": "typing", "expiresIn"}."""
        if self.ws_connection is not None and not self.ws_connection.is_closing():
            self.write_message(frame)

    async def follow(self, token):
        services, after = self.application.services, self.after
        try:
            while self.ws_connection is not None and not services.hub.stopping:
                result = await widget.updates(services, self.widget, token, after, widget.SOCKET_WAIT)
                after = result["cursor"]
                if result["messages"]:
                    await self.write_message({"type": "messages", **result})
        except tornado.websocket.WebSocketClosedError:
            pass
        except Exception as exc:  # a bad cursor or token: say why, close; the frame reads the history again
            code = getattr(exc, "code", "INTERNAL")
            if code == "INTERNAL":
                log.exception("widget live updates failed")
            if self.ws_connection is not None:
                self.close(4000, str(code)[:100])

    def on_close(self):
        if self.from_id is not None:
            self.application.services.typing.leave(self.widget["account_id"], self.from_id, self.send_typing)
        if self.task is not None:
            self.task.cancel()
