"""Pydantic models of the custom channel (docs/api.md#custom-channel), messages and the bot's dry run, beside
handlers/schemas.py."""
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from common.validation import MESSAGE_BODY_MAX, NOT_BLANK, Identifier, IdentifierNotBlank
from handlers.schemas import Strict
from services.bot import OUTCOMES

# --- Custom channel (docs/api.md#custom-channel) and messages (docs/design.md#api-decisions) ---

class Lenient(BaseModel):
    """Custom-channel bodies come from other systems: unknown fields are ignored, numeric ids accepted."""
    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)


def _not_blank(value, info):
    if value is not None and not value.strip():
        raise ValueError(f"customData.{info.field_name} cannot be empty")
    return value


def _required_text(value, info):
    """Before validation: null counts as missing, empty or whitespace-only as empty."""
    if value is None:
        raise ValueError(f"customData.{info.field_name} is required")
    return _not_blank(value, info) if isinstance(value, str) else value


class InboundCustomData(Lenient):
    # For the OpenAPI schema: one of messageSid or id, not null (the _has_message_sid check below), said as
    # "not (neither)": a top-level anyOf made client generators type customData as two models, one holding
    # the messageSid alone and one the id alone (openapi-python-client, #44 §7).
    model_config = ConfigDict(json_schema_extra={"not": {"allOf": [
        {"not": {"required": [name], "properties": {name: {"not": {"type": "null"}}}}} for name in ("messageSid", "id")]}})
    messageSid: Optional[IdentifierNotBlank] = Field(None, max_length=512, description="Unique per message; a "
                                                     "repeat is answered with the first messageId.")
    id: Optional[IdentifierNotBlank] = Field(None, max_length=512, description="Accepted instead of messageSid.")
    fromId: IdentifierNotBlank = Field(max_length=512, description="Sender id in the external system; identifies "
                                                                   "the contact.")
    toId: IdentifierNotBlank = Field(max_length=512, description="Business identifier, any text but control "
                                                                 "characters.")
    body: str = Field(max_length=MESSAGE_BODY_MAX, description="Must not be empty or whitespace-only.",
                      json_schema_extra=NOT_BLANK)
    status: Optional[Identifier] = Field(None, max_length=64, description='Defaults to "received".')
    channel: Optional[Identifier] = Field(None, max_length=200)
    campaignId: Optional[Identifier] = Field(None, max_length=200)
    firstName: Optional[Identifier] = Field(None, max_length=200)
    lastName: Optional[Identifier] = Field(None, max_length=200)
    email: Optional[Identifier] = Field(None, max_length=320)
    mediaUrl: Optional[str] = Field(None, description="http(s) URL, or data:<type>;base64,<data>.")
    mediaContentType: Optional[Identifier] = Field(None, max_length=255, description="Required with mediaUrl; "
                                                                                     "must match the file content.")
    autoSubmitted: Optional[bool] = Field(None, description="True for an automatic message (an out-of-office, an "
                                                            "autoresponder): it starts no SLA wait and gets no "
                                                            "outside-hours message.")

    _check_required = field_validator("fromId", "toId", "body", mode="before")(_required_text)
    _check_not_blank = field_validator("messageSid", "id")(_not_blank)

    @model_validator(mode="after")
    def _has_message_sid(self):
        if self.messageSid is None and self.id is None:
            raise ValueError("customData.messageSid is required (customData.id is accepted instead)")
        return self


class InboundMessage(Lenient):
    """POST /v1/incoming_custom_channel_message."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"customData": {"messageSid": "SM0001", "fromId": "+14155552671", "toId": "shop-1", "body": "Hi! Prices?",
                        "channel": "web chat", "firstName": "Ada", "mediaUrl": "https://cdn.example.com/photo.jpg",
                        "mediaContentType": "image/jpeg"}}]})
    customData: InboundCustomData
    messageType: Optional[Literal["text", "reaction"]] = Field(None, description='Omitted means "text".')


class InboundAccepted(BaseModel):
    success: bool
    messageId: str


class OutboundCustomData(Lenient):
    fromId: IdentifierNotBlank = Field(max_length=512, description="The contact's id on the client's platform.")
    customChannel: IdentifierNotBlank = Field(max_length=200, description="Name of the custom channel.")
    body: str = Field(max_length=MESSAGE_BODY_MAX, json_schema_extra=NOT_BLANK)
    campaignId: Optional[Identifier] = Field(None, max_length=200)
    firstName: Optional[Identifier] = Field(None, max_length=200)
    lastName: Optional[Identifier] = Field(None, max_length=200)
    email: Optional[Identifier] = Field(None, max_length=320)
    mediaUrl: Optional[str] = None
    mediaContentType: Optional[Identifier] = Field(None, max_length=255)

    _check_required = field_validator("fromId", "customChannel", "body", mode="before")(_required_text)

    @model_validator(mode="before")
    @classmethod
    def _from_id_not_guessed(cls, data):
        """toId and channel are the inbound payload's names: a sender who guessed them is told the one it takes."""
        if isinstance(data, dict) and data.get("fromId") is None and ("toId" in data or "channel" in data):
            raise ValueError("customData.fromId is required (the contact's id on your platform; "
                             "the inbound message's fromId)")
        return data


class OutboundMessage(Lenient):
    """POST /v1/send_custom_channel_message."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"customData": {"fromId": "+14155552671", "customChannel": "web chat", "body": "Thanks, we will call you."}}]})
    customData: OutboundCustomData


class OutboundQueued(BaseModel):
    success: bool
    messageId: str
    contactId: str
    message: str


class MessageMedia(BaseModel):
    url: str = Field(description="The http(s) URL as given, or a signed, expiring URL of the stored file.")
    contentType: str


class DeliveryAttempt(BaseModel):
    at: str
    httpStatus: Optional[int]
    error: Optional[str]


BotOutcomeName = Literal[tuple(OUTCOMES)]


class BotOutcome(BaseModel):
    """What the bot did with an inbound message."""
    outcome: BotOutcomeName = Field(description=(
        "greeting, rule, provider, fallback or handoff: the bot answered (replyId); provider_failed: the AI "
        "provider failed (the fallback answered, if set); no_answer: nothing matched and there is no provider or "
        "fallback; no_credits: a sub-account's balance is below its price per bot reply; paused: the bot is "
        "paused for the contact; opted_out: the contact opted out; not_sent: no Custom Channel Webhook URL; "
        "busy: too many messages were waiting for the bot."))
    detail: str = Field(description="Why, in words (the keyword, the provider's error, the balance ...).")
    replyId: Optional[str] = Field(None, description="The bot's reply message, or null when it sent none.")


class Message(BaseModel):
    id: str
    direction: Literal["inbound", "outbound"]
    status: str = Field(description="Inbound: as sent (default received). Outbound: Pending, Sent, Failed, or "
                                    "Cancelled (its campaign was cancelled before it was sent).")
    body: str
    channel: Optional[str]
    contactId: str
    messageType: str
    campaignId: Optional[str]
    author: Literal["contact", "bot", "user", "api", "campaign", "auto"] = Field(
        description="Who wrote it: the contact (inbound), the bot, a user in the inbox, an API client, a campaign, "
                    "or Parley itself (auto: the outside-hours message).")
    fromId: Optional[str]
    toId: Optional[str]
    media: Optional[MessageMedia]
    error: Optional[dict] = Field(description="The last failed delivery's details, when delivery failed.")
    nextAttemptAt: Optional[str] = Field(description="Failed: when the delivery is tried again (null otherwise).")
    final: bool = Field(description="Failed for good: no retry will come (a 3xx or 4xx answer, a refused URL, no "
                                    "URL, or the last of 8 attempts); POST /v1/messages/{id}/retry sends it again.")
    attempts: list[DeliveryAttempt] = Field([], description="GET /v1/messages/{id} only.")
    bot: Optional[BotOutcome] = Field(None, description="Inbound: what the bot did with it; null while it did "
                                                        "nothing (no active bot, a reaction).")
    subject: Optional[str] = Field(None, description="Email (channel email): the mail's subject (a reply's "
                                                     "\"Re: …\"); null on other channels.")
    quoted: Optional[str] = Field(None, description="Inbound email: the quoted history trimmed off the body for "
                                                    "display (body + quoted is the whole text); null when none.")
    createdAt: str


class ContactMessageCreate(Strict):
    """POST /v1/contacts/{contactId}/messages: a reply delivered on the contact's channel."""
    body: str = Field(max_length=MESSAGE_BODY_MAX, json_schema_extra=NOT_BLANK)
    channel: Optional[IdentifierNotBlank] = Field(
        None, max_length=200, description="Where to deliver it: web (the website chat widget), email (by the "
        "account's SMTP server, to the address the contact last wrote from) or a custom channel's "
        "name (POSTed to the Custom Channel Webhook URL). Default: the channel of the contact's newest inbound "
        "message.")
    mediaUrl: Optional[str] = None
    mediaContentType: Optional[Identifier] = Field(None, max_length=255)

    @field_validator("body", "channel")
    @classmethod
    def _not_blank(cls, value, info):
        if value is not None and not value.strip():
            raise ValueError(f"{info.field_name} cannot be empty")
        return value


class MessagePage(BaseModel):
    data: list[Message]
    nextCursor: Optional[str]


class MessagesQuery(BaseModel):
    """GET /v1/messages: outbound messages by status, in the order they reached it."""
    status: Literal["Pending", "Sent", "Failed", "Cancelled"] = Field(description=(
        "Failed lists replies whose delivery failed: final (no retry will come) or with nextAttemptAt."))
    since: Optional[str] = Field(None, description="ISO 8601 time with its offset: only messages that reached the "
                                                   "status at or after it.")
    limit: Optional[int] = Field(None, ge=1, le=200, description="Page size, 1-200 (default 50).")
    cursor: Optional[str] = Field(None, description="nextCursor of the previous page, unchanged.")


# --- The bot's dry run (docs/design.md#api-decisions "Bot") ---

class BotTest(Strict):
    """POST /v1/bot/test: what the bot would answer, sending and spending nothing."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"body": "How much does it cost?", "campaignId": "spring"}]})
    body: str = Field(max_length=MESSAGE_BODY_MAX, json_schema_extra=NOT_BLANK, description="The message to try.")
    campaignId: Optional[Identifier] = Field(None, max_length=200, description="Try it under this campaign's "
                                                                              "configuration.")
    contactId: Optional[Identifier] = Field(None, max_length=200, description=(
        "Try it as this contact: its pause, opt-out, first message and conversation (for the AI provider) count."))
    firstMessage: Optional[StrictBool] = Field(None, description=(
        "Treat it as the contact's first message (the greeting). Default: whether the contact has written "
        "before; without contactId, false."))

    @field_validator("body")
    @classmethod
    def _body(cls, body):
        if not body.strip():
            raise ValueError("body cannot be empty")
        return body


class BotTestResult(BaseModel):
    reply: Optional[str] = Field(description="What the bot would send; null when it would send nothing.")
    reason: BotOutcomeName = Field(description="The outcome a real message would record (see BotOutcome).")
    detail: str
    handoff: bool = Field(description="True when it would pause the bot for the contact.")
    active: bool = Field(description="Whether the bot is on for this campaign; the dry run answers either way.")
    providerMode: Optional[Literal["json_schema", "json_object", "plain"]] = Field(None, description=(
        "The response format the AI provider answered in (plain: text, after an unusable structured answer or "
        "in mode plain); null when it was not asked or failed."))


class RetryQueued(BaseModel):
    """POST /v1/messages/{id}/retry: the Failed message is Pending again and its delivery is due now."""
    success: bool
    messageId: str
    status: Literal["Pending"]
