"""Reading messages (GET /v1/messages/{id}, GET /v1/contacts/{id}/messages), retrying a failed reply
(POST /v1/messages/{id}/retry) and serving stored media by signed, expiring URLs (GET /v1/media/{sha256})."""
import time

import tornado.web

from handlers.base import ApiHandler, StaticHandler, idempotent
from handlers.openapi import BINARY, Operation
from handlers.message_schemas import ContactMessageCreate, Message, MessagePage, MessagesQuery, RetryQueued
from handlers.schemas import MediaQuery, PageQuery
from services import inbox, lists, media, messaging
from common.errors import Forbidden


class MessageHandler(ApiHandler):
    path_params = {"messageId": "The message's id."}
    operations = {"get": Operation("A message with its delivery attempts", {200: Message}, tags=("messages",),
                                   errors={404: "No such message (NOT_FOUND)."})}

    async def get(self, message_id):
        self.respond(await messaging.get_message(self.services, self.principal.account_id, message_id))


class MessagesHandler(ApiHandler):
    operations = {"get": Operation(
        "Outbound messages by status (e.g. the replies that failed since a time)", {200: MessagePage},
        query=MessagesQuery, tags=("messages",),
        errors={400: "Invalid status, since, limit or cursor (named in the message)."},
        description="Oldest first by the time each message reached the status. With status=Failed, final says "
                    "whether a retry will come (nextAttemptAt) or none will.")}

    async def get(self):
        arg = self.get_query_argument
        self.respond(await messaging.list_by_status(
            self.services, self.principal.account_id, status=arg("status", None), since=arg("since", None),
            cursor=arg("cursor", None), limit=lists.parse_limit(arg("limit", None))))


class MessageRetryHandler(ApiHandler):
    path_params = {"messageId": "The message's id."}
    operations = {"post": Operation(
        "Retry a Failed reply now", {202: (RetryQueued, "The message is Pending; its delivery is attempted now.")},
        tags=("messages",),
        links={"GetMessage": ("/v1/messages/{messageId}", "get", {"messageId": "$response.body#/messageId"})},
        errors={404: "No such outbound message (NOT_FOUND).",
                409: "The message is not Failed (CONFLICT): Pending and Sent messages are not retried."},
        description="The inbox's Retry: one more delivery attempt to the Custom Channel Webhook, with the same "
                    "webhook-id. If it fails with a retryable error the schedule continues.")}

    @idempotent
    async def post(self, message_id):
        await inbox.retry(self.services, self.principal.account_id, message_id)
        self.respond({"success": True, "messageId": message_id, "status": "Pending"}, status=202)


class ContactMessagesHandler(ApiHandler):
    path_params = {"contactId": "The contact's id."}
    operations = {"get": Operation("A contact's messages, oldest first", {200: MessagePage}, query=PageQuery,
                                   tags=("messages",), errors={400: "Invalid limit or cursor.",
                                                               404: "No such contact (CONTACT_NOT_FOUND)."}),
                  "post": Operation(
                      "Reply to a contact on its channel", {201: (Message, "The reply: Pending until delivered "
                                                                           "(on web: Sent once stored).")},
                      body=ContactMessageCreate, tags=("messages",),
                      errors={400: "A missing body, a bad field, or nowhere to deliver it (named in the message).",
                              404: "No such contact (CONTACT_NOT_FOUND)."},
                      description="Delivered on the channel named, else on the channel of the contact's newest "
                                  "inbound message: the custom channel's webhook (Pending, then Sent or Failed with "
                                  "retries, as every reply), or `web`, the website chat widget, where it is stored "
                                  "and the visitor's chat shows it live (Sent at once).")}

    async def get(self, contact_id):
        limit = lists.parse_limit(self.get_query_argument("limit", None))
        self.respond(await messaging.list_contact_messages(
            self.services, self.principal.account_id, contact_id,
            cursor=self.get_query_argument("cursor", None), limit=limit))

    @idempotent
    async def post(self, contact_id):
        body = self.json_body(ContactMessageCreate)
        sent = await messaging.send_reply(self.services, self.principal.account_id, contact_id, body.body,
                                          body.channel, author="api", media_url=body.mediaUrl,
                                          media_content_type=body.mediaContentType)
        self.respond(await messaging.get_message(self.services, self.principal.account_id, sent["messageId"]),
                     status=201)


class MediaHandler(StaticHandler):
    """A stored media file. No API key: the URL's signature (over the file, its type and the expiry)
    is the authorization, so the inbox and webhook receivers can fetch it. Range requests work."""
    path_params = {"sha256": "SHA-256 of the file's content (lower-case hex)."}
    _media = dict(responses={200: (BINARY, "The file."), 206: (BINARY, "The requested range."),
                             304: (None, "Not modified (If-None-Match).")}, query=MediaQuery, tags=("messages",),
                  errors={400: "A query parameter holds U+0000 (named in the message).",
                          403: "The link is invalid or has expired.", 404: "No such file.",
                          416: "The range cannot be satisfied."},
                  description="No API key: the link's signature authorizes it. Never fetch it with your key.")
    operations = {"get": Operation("A stored media file (signed link)", **_media),
                  "head": Operation("A stored media file's headers (signed link)", **_media)}

    def initialize(self):
        super().initialize(str(media.media_dir(self.application.settings_obj)))

    def prepare(self):
        if self.request.method not in ("GET", "HEAD"):
            raise tornado.web.HTTPError(405, "%s is not allowed here; use GET", self.request.method)
        self.content_type = self.get_query_argument("type", "")
        self.expires = self.get_query_argument("exp", "")
        key = media.signing_key(self.services.box)
        if not media.verify(key, self.path_args[0], self.content_type, self.expires,
                            self.get_query_argument("sig", "")):
            raise Forbidden("this media link is invalid or has expired")

    def write_error(self, status_code, **kwargs):
        if status_code == 405:  # Tornado cleared the headers set before the error was raised
            self.set_header("Allow", "GET, HEAD")
        super().write_error(status_code, **kwargs)

    def compute_etag(self):
        return f'"{self.path_args[0]}"'  # content-addressed: the name is the content's hash

    def get_content_type(self):
        return self.content_type

    def get_cache_time(self, path, modified, mime_type):
        return 0  # set_extra_headers caches privately until the link expires

    def set_extra_headers(self, path):
        self.set_header("Cache-Control", f"private, max-age={max(0, int(self.expires) - int(time.time()))}")
        # Files come from outside: never let one run script in our origin (an SVG or HTML file).
        self.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
        major = self.content_type.split("/")[0]
        self.set_header("Content-Disposition", "inline" if major in ("image", "audio", "video") else "attachment")
