"""Pydantic request and response models; also the source of /v1/openapi.json."""
import datetime
from typing import Annotated, Literal, Optional

from pydantic import (AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, StrictBool, field_validator,
                      model_validator)

from common.validation import NOT_BLANK, Identifier, IdentifierNotBlank
from services.bot import OUTCOMES
from services.bot_settings import BotSettings
from services.contact_fields import MAX_EMAIL_LENGTH, MAX_NAME_LENGTH, MAX_PHONE_LENGTH

NotificationEvent = Literal["contact.created", "contact.updated", "contact.tagged", "conversation.handoff",
                            "subaccount.auto_recharge"]


def _in_utc(value):
    """9999-12-31T23:59:59-14:00 is a valid time in its zone but past year 9999 in UTC, where it is stored."""
    try:
        return value.astimezone(datetime.timezone.utc)
    except OverflowError:
        raise ValueError("is outside the years 0001-9999 once converted to UTC") from None


UtcDatetime = Annotated[AwareDatetime, AfterValidator(_in_utc)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")




class SettingsPatch(Strict):
    """PATCH /v1/account/settings: only the keys present change; null removes a setting."""
    customChannelWebhookUrl: Optional[str] = Field(None, description="Where replies are POSTed (spec §6).")
    notificationUrls: Optional[dict[NotificationEvent, str]] = Field(
        None, description="Event name to URL, e.g. {\"contact.created\": \"https://…\"}.")
    bot: Optional[BotSettings] = Field(None, description="The bot (DESIGN §3), merged into the stored one "
                                                         "(RFC 7386); null removes it.")
    optOutKeywords: Optional[list[Identifier]] = Field(
        None, min_length=1, max_length=20, description="An inbound message whose whole body (trimmed, any case) "
        "is one of these opts the contact out (default [\"STOP\", \"UNSUBSCRIBE\"]; null restores it).")
    optInKeywords: Optional[list[Identifier]] = Field(
        None, min_length=1, max_length=20, description="Likewise opts the contact back in (default [\"START\"]).")


class Account(BaseModel):
    id: str
    name: str
    email: str
    type: Literal["standard", "agency", "subaccount"]
    parentAgencyId: Optional[str]
    rateLimitPerMinute: Optional[int]
    apiKeyPrefix: Optional[str]
    settings: dict
    createdAt: str
    credits: float = Field(description="Credit balance (sub-accounts spend it; agencies grant it).")


class WebhookSecret(BaseModel):
    secret: str = Field(description="whsec_… Standard Webhooks signing secret.")
    previousSecretExpiresAt: Optional[str] = Field(
        description="Until then the previous secret also signs every delivery.")


class ErrorBody(BaseModel):
    class Detail(BaseModel):
        code: str
        message: str
        existingId: Optional[str] = Field(None, description="A 409 CONFLICT's other record, when it has one "
                                                             "(the contact that has this phone, the list of this name).")
    error: Detail


# --- Contacts and lists (spec §4.1-4.3, DESIGN §3) ---

class ContactCreate(Strict):
    """POST /v1/contacts: at least one of phone or email (spec §2 rule 1)."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"firstName": "Ada", "lastName": "Lovelace", "phone": "+14155552671", "email": "ada@example.com"}]})
    firstName: Optional[Identifier] = Field(None, max_length=MAX_NAME_LENGTH)
    lastName: Optional[Identifier] = Field(None, max_length=MAX_NAME_LENGTH)
    phone: Optional[Identifier] = Field(None, max_length=MAX_PHONE_LENGTH,
                                 description="With the country code, e.g. +14155552671; stored E.164.")
    email: Optional[Identifier] = Field(None, max_length=MAX_EMAIL_LENGTH, description="Stored case-folded.")


class ContactPatch(Strict):
    """PATCH /v1/contacts/{id}: any subset; null (or blank) clears a field, as long as a phone or an email
    stays."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"lastName": "King", "email": "ada@example.org"},
                                                              {"optedOut": True}]})
    firstName: Optional[str] = Field(None, max_length=MAX_NAME_LENGTH)
    lastName: Optional[str] = Field(None, max_length=MAX_NAME_LENGTH)
    phone: Optional[str] = Field(None, max_length=MAX_PHONE_LENGTH,
                                 description="With the country code, e.g. +14155552671; stored E.164.")
    email: Optional[str] = Field(None, max_length=MAX_EMAIL_LENGTH, description="Stored case-folded.")
    # Absent means unchanged; not nullable, so the document shows no default.
    optedOut: StrictBool = Field(None, description="Opt the contact out (true) or back in (false) by hand; "
                                                   "optOutChange then says: via api.",
                                 json_schema_extra=lambda schema: schema.pop("default", None))


class OptOutChange(BaseModel):
    at: str
    via: Literal["reply", "user", "api"] = Field(description="reply: the contact sent a keyword (by: it); user: "
                                                             "by hand in the UI (by: the user's email); api: PATCH.")
    by: Optional[str]


class Contact(BaseModel):
    id: str
    firstName: Optional[str]
    lastName: Optional[str]
    phone: Optional[str]
    email: Optional[str]
    optedOut: bool = Field(description="True after the contact sent an opt-out keyword (STOP), or was opted "
                                       "out by hand: campaigns skip it and the bot does not answer it.")
    optOutChange: Optional[OptOutChange] = Field(description="How optedOut last changed; null if it never did.")
    createdAt: str


class ErasedCounts(BaseModel):
    """Rows removed per kind (campaign recipients are kept, anonymised, and counted here)."""
    model_config = ConfigDict(extra="allow")
    contacts: int
    messages: int


class ContactErased(BaseModel):
    """DELETE /v1/contacts/{id}: the contact and everything holding its data are gone."""
    erased: bool
    id: str
    removed: ErasedCounts


class ContactPage(BaseModel):
    data: list[Contact]
    nextCursor: Optional[str] = Field(description="Pass as ?cursor= for the next page; null on the last.")


class ListCreate(Strict):
    """POST /v1/lists."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "Leads"}]})
    name: IdentifierNotBlank = Field(max_length=200)


class ListOut(BaseModel):
    id: str
    name: str
    contactCount: int
    createdAt: str


class ListPage(BaseModel):
    data: list[ListOut]
    nextCursor: Optional[str]


class ListPatch(ListCreate):
    """PATCH /v1/lists/{id}: rename (names are unique per account, compared without case and surrounding
    spaces)."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "Customers"}]})


class ListDeleted(BaseModel):
    deleted: bool
    id: str
    removedMemberships: int = Field(description="How many memberships went with it (its contacts stay).")


class RemoveFromListResult(BaseModel):
    success: bool
    listId: str
    contactId: str
    removed: bool = Field(description="False when the contact was not a member (nothing changed).")


class AddToList(Strict):
    """POST /v1/lists/{listId}/contacts (spec §4.3)."""
    contactId: IdentifierNotBlank


class AddToListResult(BaseModel):
    success: bool
    listId: str
    contactId: str
    added: bool = Field(description="False when the contact already was a member (nothing changed).")


# --- Custom channel (spec §4.4, §4.5) and messages (DESIGN §3) ---

class Lenient(BaseModel):
    """Custom-channel bodies come from other systems: unknown fields are ignored, numeric ids accepted."""
    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)


def _not_blank(value, info):
    if value is not None and not value.strip():
        raise ValueError(f"customData.{info.field_name} cannot be empty")
    return value


def _required_text(value, info):
    """Before validation: null counts as missing, empty or whitespace-only as empty (spec §7 rules 1-2)."""
    if value is None:
        raise ValueError(f"customData.{info.field_name} is required")
    return _not_blank(value, info) if isinstance(value, str) else value


class InboundCustomData(Lenient):
    # For the OpenAPI schema: one of messageSid or id, not null (the _has_message_sid check below).
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"required": [name], "properties": {name: {"not": {"type": "null"}}}} for name in ("messageSid", "id")]})
    messageSid: Optional[IdentifierNotBlank] = Field(None, max_length=512, description="Unique per message; a "
                                                     "repeat is answered with the first messageId.")
    id: Optional[IdentifierNotBlank] = Field(None, max_length=512, description="Accepted instead of messageSid.")
    fromId: IdentifierNotBlank = Field(max_length=512, description="Sender id in the external system; identifies "
                                                                   "the contact.")
    toId: IdentifierNotBlank = Field(max_length=512, description="Business identifier, any text but control "
                                                                 "characters.")
    body: str = Field(max_length=65536, description="Must not be empty or whitespace-only.",
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

    _check_required = field_validator("fromId", "toId", "body", mode="before")(_required_text)
    _check_not_blank = field_validator("messageSid", "id")(_not_blank)

    @model_validator(mode="after")
    def _has_message_sid(self):
        if self.messageSid is None and self.id is None:
            raise ValueError("customData.messageSid is required (customData.id is accepted instead)")
        return self


class InboundMessage(Lenient):
    """POST /v1/incoming_custom_channel_message (spec §4.4)."""
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
    body: str = Field(max_length=65536, json_schema_extra=NOT_BLANK)
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
    """POST /v1/send_custom_channel_message (spec §4.5)."""
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
    """What the bot did with an inbound message (README "Bot" lists the outcomes)."""
    outcome: BotOutcomeName = Field(description="docs/api.md \"Bot\" says when each is recorded.")
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
    author: Literal["contact", "bot", "user", "api", "campaign"] = Field(
        description="Who wrote it: the contact (inbound), the bot, a user in the inbox, an API client, a campaign.")
    fromId: Optional[str]
    toId: Optional[str]
    media: Optional[MessageMedia]
    error: Optional[dict] = Field(description="The last failed delivery's details, when delivery failed.")
    attempts: list[DeliveryAttempt] = Field([], description="GET /v1/messages/{id} only.")
    bot: Optional[BotOutcome] = Field(None, description="Inbound: what the bot did with it; null while it did "
                                                        "nothing (no active bot, a reaction).")
    createdAt: str


class MessagePage(BaseModel):
    data: list[Message]
    nextCursor: Optional[str]


# --- The bot's dry run (DESIGN §3 "Bot") ---

class BotTest(Strict):
    """POST /v1/bot/test: what the bot would answer, sending and spending nothing."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"body": "How much does it cost?", "campaignId": "spring"}]})
    body: str = Field(max_length=65536, json_schema_extra=NOT_BLANK, description="The message to try.")
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
    reason: BotOutcomeName = Field(description="The outcome a real message would record (docs/api.md \"Bot\").")
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


# --- OpenAPI document only (handlers/openapi.py): shapes the handlers produce or read by hand ---

class ChannelError(BaseModel):
    """Every error of the custom-channel endpoints (spec §7): {"error": "<message text>"}."""
    error: str


class AccountSettings(BaseModel):
    """PATCH /v1/account/settings answers the whole settings object; keys set elsewhere (the UI) pass through."""
    model_config = ConfigDict(extra="allow")
    customChannelWebhookUrl: Optional[str] = None
    notificationUrls: Optional[dict[str, str]] = None
    bot: Optional[BotSettings] = Field(None, description="provider.apiKey never appears: apiKeySet says "
                                                         "whether one is stored.")
    optOutKeywords: list[str]
    optInKeywords: list[str]
    warnings: Optional[list[str]] = Field(None, description="Present when a saved URL's host does not resolve "
                                                            "now: it is saved, and checked again at delivery.")


class WebhookTestResult(BaseModel):
    """POST /v1/account/webhook-test: what the receiver answered a signed {"event": "ping", …}."""
    httpStatus: Optional[int] = Field(description="The receiver's HTTP status; null when there was no answer.")
    responseBody: Optional[str] = Field(description="The first 1 KB of the answer's body.")
    durationMs: int
    error: Optional[str] = Field(description="Why it failed (a non-2xx status, a timeout, a refused or "
                                             "unreachable URL); null on a 2xx answer.")


class ContactLookup(BaseModel):
    """GET /v1/contacts: one of phoneNumber or email (the phone is tried first); neither is 400."""
    phoneNumber: Optional[str] = Field(None, description="With the country code; an unencoded leading "
                                                         "\"+\" that arrives as a space is read as \"+\".",
                                       examples=["+14155552671"])
    email: Optional[str] = Field(None, description="Matched case-insensitively.")


class PageQuery(BaseModel):
    """Keyset pagination of a listing."""
    limit: Optional[int] = Field(None, ge=1, le=200, description="Page size, 1-200 (default 50).")
    cursor: Optional[str] = Field(None, description="nextCursor of the previous page, unchanged.")


class MediaQuery(BaseModel):
    """GET /v1/media/{sha256}: the signed, expiring URL a message's media.url carries."""
    type: str = Field(description="The file's content type, as signed.")
    exp: str = Field(description="Expiry, Unix seconds, as signed.")
    sig: str = Field(description="Signature over the file hash, type and expiry.")
