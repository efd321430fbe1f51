"""Pydantic request and response models; also the source of /v1/openapi.json."""
import datetime
from typing import Annotated, Literal, Optional, Union

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, RootModel, StrictBool, StrictInt

from common.validation import NO_CONTROL, WHITESPACE, Identifier, IdentifierNotBlank, Strict
from services import event_stream
from services.bot_settings import BotSettings, BotSettingsShown
from services.csat import CsatSettings
from services.email_settings import EmailSettings, EmailSettingsShown
from services.contact_fields import MAX_EMAIL_LENGTH, MAX_NAME_LENGTH, MAX_PHONE_LENGTH, MAX_TAG_LENGTH, MAX_TAGS
from services.widget import WidgetSettings

# Every event type of GET /v1/events can be subscribed, with the same data (issue 37).
NotificationEvent = Literal[event_stream.TYPES]


def _in_utc(value):
    """9999-12-31T23:59:59-14:00 is a valid time in its zone but past year 9999 in UTC, where it is stored."""
    try:
        return value.astimezone(datetime.timezone.utc)
    except OverflowError:
        raise ValueError("is outside the years 0001-9999 once converted to UTC") from None


UtcDatetime = Annotated[AwareDatetime, AfterValidator(_in_utc)]




class AccountPatch(Strict):
    """PATCH /v1/account: the account's name (the first account is called "Owner" until renamed)."""
    name: IdentifierNotBlank = Field(max_length=200, description="The account's name, as pages and reports show "
                                                                 "it.")


class SlaSettings(Strict):
    """The SLA's targets in business minutes (GET /v1/account/business-hours; every minute without them)."""
    firstResponseMinutes: Optional[StrictInt] = Field(
        None, ge=1, le=525_600, description="A person answers a conversation's first message within this; null: "
        "no first-response target.")
    nextResponseMinutes: Optional[StrictInt] = Field(
        None, ge=1, le=525_600, description="And each later message the contact writes after a person's answer.")
class AssignmentSettings(Strict):
    """Automatic assignment (docs/api.md "Automatic assignment"): the whole object replaces the stored one."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"mode": "balanced", "awayAfterMinutes": 30}]})
    mode: Literal["off", "round_robin", "balanced"] = Field(
        description="off: nobody is assigned automatically; round_robin: a new or reopened conversation goes to "
                    "the available agent whose last automatic assignment is the oldest; balanced: to the one with "
                    "the fewest open conversations. Agents at their capacity are skipped; when everyone is, it "
                    "waits (oldest first) until one frees up.")
    awayAfterMinutes: Optional[StrictInt] = Field(
        30, ge=1, le=10080, description="An agent without a page of the UI open for this long counts as away "
                                        "until they open one again (default 30); null: never away for that.")


class SettingsPatch(Strict):
    """PATCH /v1/account/settings: only the keys present change; null removes a setting."""
    customChannelWebhookUrl: Optional[str] = Field(None, description="Where replies are POSTed.")
    notificationUrls: Optional[dict[NotificationEvent, Optional[str]]] = Field(
        None, description="Event name to URL, e.g. {\"contact.created\": \"https://…\"}, merged into the stored "
        "ones (RFC 7386 JSON Merge Patch): events not named are kept, an event given null is removed "
        "({\"contact.created\": null} turns that one notification off); null removes them all.")
    bot: Optional[BotSettings] = Field(None, description="The bot, merged into the stored one "
                                                         "(RFC 7386); null removes it.")
    optOutKeywords: Optional[list[Identifier]] = Field(
        None, min_length=1, max_length=20, description="An inbound message whose whole body (trimmed, any case) "
        "is one of these opts the contact out (default [\"STOP\", \"UNSUBSCRIBE\"]; null restores it).")
    optInKeywords: Optional[list[Identifier]] = Field(
        None, min_length=1, max_length=20, description="Likewise opts the contact back in (default [\"START\"]).")
    defaultCountry: Optional[Identifier] = Field(
        None, max_length=64, examples=["DE"], description="The account's country (ISO 3166 alpha-2, e.g. \"DE\"; any "
        "case, stored upper-case): a phone typed without its country code (\"030 1234567\") in POST and PATCH "
        "/v1/contacts, GET /v1/contacts?phoneNumber=, the UI's contact forms, list-member add and imports is read "
        "as a number of this country and stored E.164. Without it such a number is 400 INVALID_PHONE, as before; "
        "null removes it.")
    widget: Optional[WidgetSettings] = Field(None, description="The website chat widget (channel web), replaced "
                                             "whole; null removes it (the widget is then disabled).")
    sla: Optional[SlaSettings] = Field(
        None, description="Response targets in business minutes (docs/api.md \"Business hours and SLA\"): each "
        "conversation shows slaDueAt and slaBreached, and conversation.sla_breached fires once per breach; null "
        "removes them.")
    assignment: Optional[AssignmentSettings] = Field(None, description="Automatic assignment of new and reopened "
                                                                       "conversations; null turns it off.")
    csat: Optional[CsatSettings] = Field(None, description="Customer satisfaction (docs/api.md \"CSAT\"): a "
                                         "resolved conversation asks its contact once how we did; replaced whole, "
                                         "null turns it off.")
    email: Optional[EmailSettings] = Field(None, description="The mailbox (docs/api.md \"Email\"), merged into the "
                                           "stored one (RFC 7386); passwords are write-only; null removes it.")


class Account(BaseModel):
    id: str
    name: str
    email: str
    type: Literal["standard", "agency", "subaccount"]
    parentAgencyId: Optional[str]
    rateLimitPerMinute: Optional[int]
    apiKeyPrefix: Optional[str]
    # The title names the inline schema: client generators call it <Model><title>, and "AccountSettings" is
    # PATCH /v1/account/settings' answer (openapi-python-client dropped Account over the clash).
    settings: dict = Field(title="StoredSettings", description="The account's settings as stored (see "
                                                               "GET /v1/account/settings for every key).")
    createdAt: str
    credits: float = Field(description="Credit balance (sub-accounts spend it; agencies grant it).")


class WebhookSecret(BaseModel):
    secret: str = Field(description="whsec_… Standard Webhooks signing secret.")
    previousSecretExpiresAt: Optional[str] = Field(
        description="Until then the previous secret also signs every delivery.")


class ApiKey(BaseModel):
    """One of the account's API keys (GET /v1/account/api-keys); never its secret."""
    id: str
    name: str
    prefix: str = Field(description="The key's first characters, to tell keys apart.")
    createdAt: str
    lastUsedAt: Optional[str] = Field(description="When a request last used it, to the minute (written at most "
                                                  "once a minute); null: never.")


class ApiKeyCreated(ApiKey):
    key: str = Field(description="The secret key, pk_…: shown in this answer only (it is stored hashed).")


class ApiKeyList(BaseModel):
    data: list[ApiKey]


class ApiKeyCreate(Strict):
    """POST /v1/account/api-keys."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "CRM bridge 2026-11"}]})
    name: IdentifierNotBlank = Field(max_length=100, description="What the key is for, 1-100 characters.")


class ErrorBody(BaseModel):
    class Detail(BaseModel):
        code: str
        message: str
        existingId: Optional[str] = Field(None, description="A 409 CONFLICT's other record, when it has one "
                                                             "(the contact that has this phone, the list of this name).")
    error: Detail


# --- Contacts and lists (docs/api.md#contacts, docs/api.md#lists, docs/design.md#api-decisions) ---

# A tag as sent: no quote, backslash or comma, not blank (Python's whitespace, as services/contact_fields.py
# normalize_tag reads it), at most MAX_TAG_LENGTH characters before normalising.
_TAG_CHAR = '[^"\\\\,]'
_TAG_PATTERN = f'^{_TAG_CHAR}*[^"\\\\,{WHITESPACE}]{_TAG_CHAR}*$'
Tag = Annotated[Identifier, Field(max_length=MAX_TAG_LENGTH, pattern=_TAG_PATTERN,
                                  json_schema_extra={**NO_CONTROL, "pattern": _TAG_PATTERN})]
TAGS_DESCRIPTION = (f"Tags, at most {MAX_TAGS}: each trimmed, inner spaces collapsed and case-folded (\"  VIP  "
                    f"Customer\" is stored \"vip customer\"), 1-{MAX_TAG_LENGTH} characters, no quote, backslash "
                    "or comma; duplicates dropped, stored sorted.")


class ContactCreate(Strict):
    """POST /v1/contacts: at least one of phone or email."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"firstName": "Ada", "lastName": "Lovelace", "phone": "+14155552671", "email": "ada@example.com"}]})
    firstName: Optional[Identifier] = Field(None, max_length=MAX_NAME_LENGTH)
    lastName: Optional[Identifier] = Field(None, max_length=MAX_NAME_LENGTH)
    phone: Optional[Identifier] = Field(None, max_length=MAX_PHONE_LENGTH,
                                 description="With the country code, e.g. +14155552671, or national when the account "
                                             "has a defaultCountry; stored E.164.")
    email: Optional[Identifier] = Field(None, max_length=MAX_EMAIL_LENGTH, description="Stored case-folded.")
    tags: Optional[list[Tag]] = Field(None, max_length=MAX_TAGS, description=TAGS_DESCRIPTION + " For an "
                                             "existing contact, added to its tags.")


class ContactPatch(Strict):
    """PATCH /v1/contacts/{id}: any subset; null (or blank) clears a field, as long as a phone or an email
    stays."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"lastName": "King", "email": "ada@example.org"},
                                                              {"optedOut": True}]})
    firstName: Optional[str] = Field(None, max_length=MAX_NAME_LENGTH)
    lastName: Optional[str] = Field(None, max_length=MAX_NAME_LENGTH)
    phone: Optional[str] = Field(None, max_length=MAX_PHONE_LENGTH,
                                 description="With the country code, e.g. +14155552671, or national when the account "
                                             "has a defaultCountry; stored E.164.")
    email: Optional[str] = Field(None, max_length=MAX_EMAIL_LENGTH, description="Stored case-folded.")
    tags: Optional[list[Tag]] = Field(None, max_length=MAX_TAGS, description=TAGS_DESCRIPTION + " The whole set: "
                                      "[] or null removes every tag.")
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
    tags: list[str] = Field(description="Normalised tags, sorted (PATCH tags to change them).")
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


class ContactOrPage(RootModel[Union[Contact, ContactPage]]):
    """GET /v1/contacts: the contact (with phoneNumber or email), or a page of contacts (without)."""


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
    """POST /v1/lists/{listId}/contacts."""
    contactId: IdentifierNotBlank


class AddToListResult(BaseModel):
    success: bool
    listId: str
    contactId: str
    added: bool = Field(description="False when the contact already was a member (nothing changed).")


# --- OpenAPI document only (handlers/openapi.py): shapes the handlers produce or read by hand ---

class ChannelError(BaseModel):
    """Every error of the custom-channel endpoints: {"error": "<message text>"}."""
    error: str


class AccountSettings(BaseModel):
    """PATCH /v1/account/settings answers the whole settings object; keys set elsewhere (the UI) pass through."""
    model_config = ConfigDict(extra="allow")
    customChannelWebhookUrl: Optional[str] = None
    notificationUrls: Optional[dict[str, str]] = None
    bot: Optional[BotSettingsShown] = Field(None, description="provider.apiKey never appears: apiKeySet says "
                                                              "whether one is stored.")
    optOutKeywords: list[str]
    optInKeywords: list[str]
    defaultCountry: Optional[str] = Field(None, description="Present when set: national phone numbers are read in "
                                                            "this country.")
    widget: Optional[WidgetSettings] = Field(None, description="Present when set: the website chat widget.")
    sla: Optional[SlaSettings] = Field(None, description="Present when set.")
    businessHours: Optional[dict] = Field(None, description="Present when set (GET /v1/account/business-hours).")
    assignment: Optional[AssignmentSettings] = Field(None, description="Present when set: automatic assignment.")
    csat: Optional[CsatSettings] = Field(None, description="Present when set: customer satisfaction asks.")
    email: Optional[EmailSettingsShown] = Field(None, description="Present when set: the mailbox; passwords never "
                                                "appear, passwordSet says whether one is stored.")
    warnings: Optional[list[str]] = Field(None, description="Present when a saved URL's host does not resolve "
                                                            "now: it is saved, and checked again at delivery.")


class WidgetInfo(BaseModel):
    """GET /v1/account/widget."""
    widgetId: str = Field(description="The widget's public id (wid_…), in the snippet and the visitors' URLs.")
    snippet: str = Field(description="The one line to paste into the site's pages.")
    identitySecretSet: bool = Field(description="Whether an identity secret exists (identify needs one).")


class WidgetIdentitySecret(BaseModel):
    """POST /v1/account/widget/identity-secret: shown in this answer only."""
    identitySecret: str = Field(description="Keep it on your server: hash = hex HMAC-SHA256(identitySecret, id).")


class WebhookTestResult(BaseModel):
    """POST /v1/account/webhook-test: what the receiver answered a signed {"event": "ping", …}."""
    httpStatus: Optional[int] = Field(description="The receiver's HTTP status; null when there was no answer.")
    responseBody: Optional[str] = Field(description="The first 1 KB of the answer's body.")
    durationMs: int
    error: Optional[str] = Field(description="Why it failed (a non-2xx status, a timeout, a refused or "
                                             "unreachable URL); null on a 2xx answer.")


class MailServerCheck(BaseModel):
    ok: bool = Field(description="Connected and logged in (IMAP: and opened the folder).")
    error: Optional[str] = Field(description="Why not, in words (e.g. \"SMTP login refused: 535 …\", \"could not "
                                             "connect to imap.example.com:993: …\", \"IMAP is not configured\"); "
                                             "null when ok.")


class EmailTestResult(BaseModel):
    """POST /v1/account/email/test: what each of the account's mail servers did just now."""
    imap: MailServerCheck
    smtp: MailServerCheck


class ContactLookup(BaseModel):
    """GET /v1/contacts: with phoneNumber or email (the phone is tried first), the one contact that has it; with
    neither, every contact of the account by cursor (tag, listId, limit, cursor)."""
    phoneNumber: Optional[str] = Field(None, description="With the country code; an unencoded leading "
                                                         "\"+\" that arrives as a space is read as \"+\".",
                                       examples=["+14155552671"])
    email: Optional[str] = Field(None, description="Matched case-insensitively.")
    tag: Optional[Tag] = Field(None, description="Listing: only contacts with this tag (normalised as tags are).")
    listId: Optional[str] = Field(None, description="Listing: only members of this list.")
    limit: Optional[int] = Field(None, ge=1, le=200, description="Listing: page size, 1-200 (default 50).")
    cursor: Optional[str] = Field(None, description="Listing: nextCursor of the previous page, unchanged.")


class ContactExportQuery(BaseModel):
    """GET /v1/contacts/export.csv: every contact, or those with the tag and in the list."""
    tag: Optional[Tag] = Field(None, description="Only contacts with this tag (normalised as tags are).")
    listId: Optional[str] = Field(None, description="Only members of this list.")


class PageQuery(BaseModel):
    """Keyset pagination of a listing."""
    limit: Optional[int] = Field(None, ge=1, le=200, description="Page size, 1-200 (default 50).")
    cursor: Optional[str] = Field(None, description="nextCursor of the previous page, unchanged.")


class MediaQuery(BaseModel):
    """GET /v1/media/{sha256}: the signed, expiring URL a message's media.url carries."""
    type: str = Field(description="The file's content type, as signed.")
    exp: str = Field(description="Expiry, Unix seconds, as signed.")
    sig: str = Field(description="Signature over the file hash, type and expiry.")
