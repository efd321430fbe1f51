"""Pydantic request and response models; also the source of /v1/openapi.json."""
from typing import Literal, Optional

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from common.validation import NOT_BLANK
from services.bot import OUTCOMES
from services.bot_settings import BotSettings
from services.contact_fields import MAX_EMAIL_LENGTH, MAX_NAME_LENGTH, MAX_PHONE_LENGTH

NotificationEvent = Literal["contact.created", "contact.tagged", "conversation.handoff", "subaccount.auto_recharge"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")




class SettingsPatch(Strict):
    """PATCH /v1/account/settings: only the keys present change; null removes a setting."""
    customChannelWebhookUrl: Optional[str] = Field(None, description="Where replies are POSTed (spec §6).")
    notificationUrls: Optional[dict[NotificationEvent, str]] = Field(
        None, description="Event name to URL, e.g. {\"contact.created\": \"https://…\"}.")
    bot: Optional[BotSettings] = Field(None, description="The bot (DESIGN §3), merged into the stored one "
                                                         "(RFC 7386); null removes it.")
    optOutKeywords: Optional[list[str]] = Field(
        None, min_length=1, max_length=20, description="An inbound message whose whole body (trimmed, any case) "
        "is one of these opts the contact out (default [\"STOP\", \"UNSUBSCRIBE\"]; null restores it).")
    optInKeywords: Optional[list[str]] = Field(
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
    error: Detail


# --- Contacts and lists (spec §4.1-4.3, DESIGN §3) ---

class ContactCreate(Strict):
    """POST /v1/contacts: at least one of phone or email (spec §2 rule 1)."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"firstName": "Ada", "lastName": "Lovelace", "phone": "+14155552671", "email": "ada@example.com"}]})
    firstName: Optional[str] = Field(None, max_length=MAX_NAME_LENGTH)
    lastName: Optional[str] = Field(None, max_length=MAX_NAME_LENGTH)
    phone: Optional[str] = Field(None, max_length=MAX_PHONE_LENGTH,
                                 description="With the country code, e.g. +14155552671; stored E.164.")
    email: Optional[str] = Field(None, max_length=MAX_EMAIL_LENGTH, description="Stored case-folded.")


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


BotOutcomeName = Literal[tuple(OUTCOMES)]


class BotOutcome(BaseModel):
    """What the bot did with an inbound message (README "Bot" lists the outcomes)."""
    outcome: BotOutcomeName = Field(description="README \"Bot\" says when each is recorded.")
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
    campaignId: Optional[str] = Field(None, max_length=200, description="Try it under this campaign's configuration.")
    contactId: Optional[str] = Field(None, max_length=200, description=(
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
    reason: BotOutcomeName = Field(description="The outcome a real message would record (README \"Bot\").")
    detail: str
    handoff: bool = Field(description="True when it would pause the bot for the contact.")
    active: bool = Field(description="Whether the bot is on for this campaign; the dry run answers either way.")


class RetryQueued(BaseModel):
    """POST /v1/messages/{id}/retry: the Failed message is Pending again and its delivery is due now."""
    success: bool
    messageId: str
    status: Literal["Pending"]


# --- Sub-accounts and credits (spec §4.6, DESIGN §3 "Credits") ---

def _credit_amount(value, info):
    """Before validation: a finite JSON number > 0 with at most 2 decimals (booleans and strings are not)."""
    from services.credits import to_hundredths
    from common.errors import Invalid
    try:
        to_hundredths(value, field=info.field_name)
    except Invalid as exc:
        raise ValueError(exc.message) from None
    return value


CREDITS = dict(gt=0, le=1_000_000_000)  # the schema's half of services.credits.to_hundredths (+ 2 decimals)


class CreditGrant(Strict):
    """POST /v1/subaccounts/credits (x-api-key header only; agency accounts only)."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"email": "sub@example.com", "amount": 100, "description": "Monthly top-up"}]})
    email: str = Field(max_length=320, description="Email of a sub-account under the calling agency.")
    amount: float = Field(description="Credits to grant: a number > 0, at most 2 decimals.", **CREDITS)
    description: Optional[str] = Field(None, max_length=500, description="Note stored in the credit history.")

    _check_amount = field_validator("amount", mode="before")(_credit_amount)


class CreditGrantResult(BaseModel):
    success: bool
    sub_account_id: str
    credits_added: float
    new_balance: float


class AutoRechargeSetting(Strict):
    """When a spend leaves the balance below threshold, the agency gets one subaccount.auto_recharge
    notification asking for amount (DESIGN §3 "Auto-recharge")."""
    threshold: float = Field(description="Credits: a number > 0, at most 2 decimals.", **CREDITS)
    amount: float = Field(description="Credits the notification asks the agency to grant: a number > 0, at most "
                                      "2 decimals.", **CREDITS)

    _check_amounts = field_validator("threshold", "amount", mode="before")(_credit_amount)


class AutoRecharge(BaseModel):
    threshold: float
    amount: float
    pendingIdempotencyKey: Optional[str] = Field(
        description="idempotency_key of the notification sent for the current low balance; null once a grant "
                    "brought the balance back to the threshold (or before any).")
    notifiedAt: Optional[str] = Field(description="When that notification was queued.")


class SubAccount(BaseModel):
    id: str
    name: str
    email: str
    credits: float
    autoRecharge: Optional[AutoRecharge] = Field(description="null: auto-recharge is off.")
    createdAt: str


class SubAccountPage(BaseModel):
    data: list[SubAccount]
    nextCursor: Optional[str]


class SubAccountCreate(Strict):
    """POST /v1/subaccounts (agency accounts only)."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "Bakery Rossi", "email": "ops@rossi.example"}]})
    name: str = Field(max_length=200, json_schema_extra=NOT_BLANK)
    email: str = Field(max_length=320, description="Unique among all accounts; the sub-account's login and the "
                                                   "email grants name.")


class SubAccountCreated(SubAccount):
    apiKey: str = Field(description="The sub-account's API key, shown only in this answer.")
    password: str = Field(description="Password of the sub-account's UI user (login: email), shown only in this "
                                      "answer.")


class SubAccountPatch(Strict):
    """PATCH /v1/subaccounts/{id}: autoRecharge {threshold, amount} sets it, null turns it off."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"autoRecharge": {"threshold": 10, "amount": 100}}]})
    autoRecharge: Optional[AutoRechargeSetting]


class CreditTransaction(BaseModel):
    id: int = Field(description="Increases in commit order.")
    kind: Literal["grant", "spend"]
    amount: float = Field(description="Signed: grants > 0, spends < 0.")
    balanceAfter: float = Field(description="The balance right after this transaction.")
    description: Optional[str] = Field(description="A grant's description, or why credits were spent.")
    idempotencyKey: Optional[str] = Field(description="The Idempotency-Key a grant was made with.")
    createdAt: str


class CreditTransactionPage(BaseModel):
    data: list[CreditTransaction]
    nextCursor: Optional[str]


# --- Campaigns (DESIGN §3 "Campaigns") ---

CampaignStatus = Literal["scheduled", "running", "paused", "completed", "cancelled"]
RecipientStatus = Literal["pending", "queued", "sent", "failed", "skipped", "cancelled"]


class CampaignCreate(Strict):
    """POST /v1/campaigns."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"name": "Spring sale", "listId": "lst_0000000000aaaaaaaaaaaaaaaa",
         "body": "Hi {{firstName}}, our spring sale starts today!", "ratePerMinute": 600}]})
    name: str = Field(max_length=200, json_schema_extra=NOT_BLANK)
    listId: str = Field(max_length=200, json_schema_extra=NOT_BLANK)
    body: str = Field(max_length=65536, json_schema_extra=NOT_BLANK, description=(
        "The message; {{firstName}}, {{lastName}}, {{email}} and {{phone}} are replaced by the contact's "
        "(empty when missing). Any other {{name}} is refused (400)."))
    campaignId: Optional[str] = Field(None, max_length=200, json_schema_extra=NOT_BLANK, description=(
        "Goes into every message and its reply payload, and routes the answers to bot.campaigns[campaignId]. "
        "Default: the campaign's id."))
    channel: Optional[str] = Field(None, max_length=200, description="Channel label of the messages (default: "
                                                                      "where each contact last wrote from).")
    startAt: Optional[AwareDatetime] = Field(None, description="ISO 8601 with a time zone; in the future the "
                                                               "campaign is scheduled, else it starts now.")
    ratePerMinute: Optional[int] = Field(None, ge=1, le=1_000_000, description="Messages handed to delivery per "
                                                                              "minute (default 600).")


class CampaignCounts(BaseModel):
    total: int = Field(description="Contacts of the list when the campaign started.")
    pending: int = Field(description="Not handed over yet.")
    queued: int = Field(description="Message made, delivery not attempted yet.")
    sent: int
    failed: int = Field(description="The last attempt failed (a retry may be scheduled: see the recipient's error).")
    skipped: int = Field(description="Opted out when their turn came.")
    cancelled: int = Field(description="Never sent: the campaign was cancelled first.")


class Campaign(BaseModel):
    id: str
    name: str
    listId: str
    campaignId: str
    status: CampaignStatus
    pausedReason: Optional[str] = Field(description="Why it is paused (a person, or the auto-pause rule).")
    body: str
    channel: Optional[str]
    ratePerMinute: int
    counts: CampaignCounts
    startAt: str
    startedAt: Optional[str]
    createdAt: str
    finishedAt: Optional[str] = Field(description="When it completed (every recipient handed over or skipped) "
                                                  "or was cancelled; counts keep moving as deliveries end.")


class CampaignPage(BaseModel):
    data: list[Campaign]
    nextCursor: Optional[str]


class Recipient(BaseModel):
    contactId: str
    messageId: Optional[str]
    status: RecipientStatus
    error: Optional[dict] = Field(description="The last failed attempt: {at, httpStatus, error, response, "
                                              "nextAttemptAt}.")
    firstName: Optional[str]
    lastName: Optional[str]
    phone: Optional[str]
    email: Optional[str]


class RecipientPage(BaseModel):
    data: list[Recipient]
    nextCursor: Optional[str]


class RecipientQuery(BaseModel):
    """GET /v1/campaigns/{id}/recipients."""
    status: Optional[RecipientStatus] = Field(None, description="Only recipients with this status.")
    limit: Optional[int] = Field(None, ge=1, le=200, description="Page size, 1-200 (default 50).")
    cursor: Optional[str] = Field(None, description="nextCursor of the previous page, unchanged.")


class RecipientCsvQuery(BaseModel):
    """GET /v1/campaigns/{id}/recipients.csv."""
    status: Optional[RecipientStatus] = Field(None, description="Only recipients with this status.")


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
