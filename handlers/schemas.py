"""Pydantic request and response models; also the source of /v1/openapi.json."""
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NotificationEvent = Literal["contact.created", "contact.tagged", "subaccount.auto_recharge"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# Documents (in the OpenAPI schema only) a check the validators make by hand with str.strip(): not empty or
# whitespace-only. Python's whitespace, spelled out: JSON Schema's \S differs (e.g. on U+001F, U+FEFF).
NOT_BLANK = {"pattern": "[^" + "".join(c for c in map(chr, range(0x3001)) if c.isspace()) + "]"}


class SettingsPatch(Strict):
    """PATCH /v1/account/settings: only the keys present change; null removes a setting."""
    customChannelWebhookUrl: Optional[str] = Field(None, description="Where replies are POSTed (spec §6).")
    notificationUrls: Optional[dict[NotificationEvent, str]] = Field(
        None, description="Event name to URL, e.g. {\"contact.created\": \"https://…\"}.")


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
    error: Detail


# --- Contacts and lists (spec §4.1-4.3, DESIGN §3) ---

class ContactCreate(Strict):
    """POST /v1/contacts: at least one of phone or email (spec §2 rule 1)."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"firstName": "Ada", "lastName": "Lovelace", "phone": "+14155552671", "email": "ada@example.com"}]})
    firstName: Optional[str] = Field(None, max_length=200)
    lastName: Optional[str] = Field(None, max_length=200)
    phone: Optional[str] = Field(None, max_length=64,
                                 description="With the country code, e.g. +14155552671; stored E.164.")
    email: Optional[str] = Field(None, max_length=320, description="Stored case-folded.")


class Contact(BaseModel):
    id: str
    firstName: Optional[str]
    lastName: Optional[str]
    phone: Optional[str]
    email: Optional[str]
    optedOut: bool = Field(description="True after the contact sent an opt-out keyword (STOP): campaigns "
                                       "skip it and the bot does not answer it.")
    createdAt: str


class ContactPage(BaseModel):
    data: list[Contact]
    nextCursor: Optional[str] = Field(description="Pass as ?cursor= for the next page; null on the last.")


class ListCreate(Strict):
    """POST /v1/lists."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "Leads"}]})
    name: str = Field(max_length=200, json_schema_extra=NOT_BLANK)


class ListOut(BaseModel):
    id: str
    name: str
    contactCount: int
    createdAt: str


class ListPage(BaseModel):
    data: list[ListOut]
    nextCursor: Optional[str]


class AddToList(Strict):
    """POST /v1/lists/{listId}/contacts (spec §4.3)."""
    contactId: str = Field(json_schema_extra=NOT_BLANK)


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
    messageSid: Optional[str] = Field(None, max_length=512, description="Unique per message; a repeat is "
                                                                        "answered with the first messageId.",
                                      json_schema_extra=NOT_BLANK)
    id: Optional[str] = Field(None, max_length=512, description="Accepted instead of messageSid.",
                              json_schema_extra=NOT_BLANK)
    fromId: str = Field(max_length=512, description="Sender id in the external system; identifies the contact.",
                        json_schema_extra=NOT_BLANK)
    toId: str = Field(max_length=512, description="Business identifier, any text.", json_schema_extra=NOT_BLANK)
    body: str = Field(max_length=65536, description="Must not be empty or whitespace-only.",
                      json_schema_extra=NOT_BLANK)
    status: Optional[str] = Field(None, max_length=64, description='Defaults to "received".')
    channel: Optional[str] = Field(None, max_length=200)
    campaignId: Optional[str] = Field(None, max_length=200)
    firstName: Optional[str] = Field(None, max_length=200)
    lastName: Optional[str] = Field(None, max_length=200)
    email: Optional[str] = Field(None, max_length=320)
    mediaUrl: Optional[str] = Field(None, description="http(s) URL, or data:<type>;base64,<data>.")
    mediaContentType: Optional[str] = Field(None, max_length=255, description="Required with mediaUrl; must "
                                                                              "match the file content.")

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
    fromId: str = Field(max_length=512, description="The contact's id on the client's platform.",
                        json_schema_extra=NOT_BLANK)
    customChannel: str = Field(max_length=200, description="Name of the custom channel.", json_schema_extra=NOT_BLANK)
    body: str = Field(max_length=65536, json_schema_extra=NOT_BLANK)
    campaignId: Optional[str] = Field(None, max_length=200)
    firstName: Optional[str] = Field(None, max_length=200)
    lastName: Optional[str] = Field(None, max_length=200)
    email: Optional[str] = Field(None, max_length=320)
    mediaUrl: Optional[str] = None
    mediaContentType: Optional[str] = Field(None, max_length=255)

    _check_required = field_validator("fromId", "customChannel", "body", mode="before")(_required_text)


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


class Message(BaseModel):
    id: str
    direction: Literal["inbound", "outbound"]
    status: str = Field(description="Inbound: as sent (default received). Outbound: Pending, Sent or Failed.")
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
    createdAt: str


class MessagePage(BaseModel):
    data: list[Message]
    nextCursor: Optional[str]


class RetryQueued(BaseModel):
    """POST /v1/messages/{id}/retry: the Failed message is Pending again and its delivery is due now."""
    success: bool
    messageId: str
    status: Literal["Pending"]


# --- Sub-accounts and credits (spec §4.6, DESIGN §3 "Credits") ---

def _credit_amount(value):
    """Before validation: a finite JSON number > 0 with at most 2 decimals (booleans and strings are not)."""
    from services.credits import to_hundredths
    from common.errors import Invalid
    try:
        to_hundredths(value)
    except Invalid as exc:
        raise ValueError(exc.message) from None
    return value


class CreditGrant(Strict):
    """POST /v1/subaccounts/credits (x-api-key header only; agency accounts only)."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"email": "sub@example.com", "amount": 100, "description": "Monthly top-up"}]})
    email: str = Field(max_length=320, description="Email of a sub-account under the calling agency.")
    amount: float = Field(gt=0, le=1_000_000_000, description="Credits to grant: a number > 0, at most 2 decimals.")
    description: Optional[str] = Field(None, max_length=500, description="Note stored in the credit history.")

    _check_amount = field_validator("amount", mode="before")(_credit_amount)


class CreditGrantResult(BaseModel):
    success: bool
    sub_account_id: str
    credits_added: float
    new_balance: float


class SubAccount(BaseModel):
    id: str
    name: str
    email: str
    credits: float
    createdAt: str


class SubAccountPage(BaseModel):
    data: list[SubAccount]
    nextCursor: Optional[str]


# --- OpenAPI document only (handlers/openapi.py): shapes the handlers produce or read by hand ---

class ChannelError(BaseModel):
    """Every error of the custom-channel endpoints (spec §7): {"error": "<message text>"}."""
    error: str


class AccountSettings(BaseModel):
    """PATCH /v1/account/settings answers the whole settings object; keys set elsewhere (the UI) pass through."""
    model_config = ConfigDict(extra="allow")
    customChannelWebhookUrl: Optional[str] = None
    notificationUrls: Optional[dict[str, str]] = None


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
