"""Custom-channel endpoints (docs/api.md#custom-channel): inbound messages in, outbound messages queued. Every
error is {"error": "text"}; any method but POST is 405 with Allow: POST."""
import asyncio

from handlers.base import CustomChannelHandler, idempotent
from handlers.openapi import Operation
from handlers.message_schemas import InboundAccepted, InboundMessage, OutboundMessage, OutboundQueued
from services import messaging

# Bodies below this are parsed on the event loop; larger ones (embedded media) in an executor.
_PARSE_INLINE_BYTES = 256 * 1024


class _CustomChannelPost(CustomChannelHandler):
    def max_body_bytes(self):
        # The decoded media size is checked exactly (413) once the data URI is decoded.
        return self.application.settings_obj.max_media_request_bytes

    async def parse(self, model):
        if len(self.request.body) <= _PARSE_INLINE_BYTES:
            return self.json_body(model)
        return await asyncio.get_running_loop().run_in_executor(None, self.json_body, model)


class IncomingMessageHandler(_CustomChannelPost):
    """POST /v1/incoming_custom_channel_message and /incomingCustomChannelMessage."""
    operations = {"post": Operation(
        "Receive an inbound custom-channel message", {200: (InboundAccepted, "Stored (or a repeat of a messageSid "
                                                                             "already stored: the first messageId).")},
        body=InboundMessage, tags=("custom channel",),
        links={"GetMessage": ("/v1/messages/{messageId}", "get", {"messageId": "$response.body#/messageId"})},
        errors={400: "A required field is missing or empty, or the media is invalid or does not match "
                     "mediaContentType.", 409: "customData.messageSid is stored already as another message "
                                               "(another fromId, body or channel): the error names it.",
                413: "Request body or decoded media too large."},
        description="Creates or updates the contact identified by fromId and stores the message; the bot "
                    "answers after the response.")}

    @idempotent
    async def post(self):
        request = await self.parse(InboundMessage)
        data = request.customData
        message, created = await messaging.receive_inbound(
            self.services, self.principal.account_id, message_sid=data.messageSid or data.id,
            from_id=data.fromId, to_id=data.toId, body=data.body, status=data.status, channel=data.channel,
            campaign_id=data.campaignId, first_name=data.firstName, last_name=data.lastName, email=data.email,
            media_url=data.mediaUrl, media_content_type=data.mediaContentType, message_type=request.messageType,
            auto_submitted=bool(data.autoSubmitted))
        self.respond({"success": True, "messageId": message["id"]})
        if created and not self.replayed:
            messaging.after_inbound(self.services, message)


class SendMessageHandler(_CustomChannelPost):
    """POST /v1/send_custom_channel_message and /v1/sendCustomChannelMessage."""
    operations = {"post": Operation(
        "Send an outbound custom-channel message", {200: (OutboundQueued, "Stored and queued for delivery.")},
        body=OutboundMessage, tags=("custom channel",),
        links={"GetMessage": ("/v1/messages/{messageId}", "get", {"messageId": "$response.body#/messageId"}),
               "GetContactMessages": ("/v1/contacts/{contactId}/messages", "get",
                                      {"contactId": "$response.body#/contactId"})},
        errors={400: "A required field is missing or empty, invalid media, or no Custom Channel Webhook URL "
                     "is configured.", 413: "Request body or decoded media too large."})}

    @idempotent
    async def post(self):
        data = (await self.parse(OutboundMessage)).customData
        queued = await messaging.send_custom_channel_message(
            self.services, self.principal.account_id, from_id=data.fromId, custom_channel=data.customChannel,
            body=data.body, campaign_id=data.campaignId, first_name=data.firstName, last_name=data.lastName,
            email=data.email, media_url=data.mediaUrl, media_content_type=data.mediaContentType)
        self.respond({"success": True, **queued, "message": messaging.QUEUED})
