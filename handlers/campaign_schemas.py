"""Pydantic models of the campaigns API (docs/design.md#api-decisions "Campaigns"), beside handlers/schemas.py."""
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from common.validation import MESSAGE_BODY_MAX, NOT_BLANK, Identifier, IdentifierNotBlank
from handlers.schemas import Strict, Tag, UtcDatetime

# --- Campaigns (docs/design.md#api-decisions "Campaigns") ---

CampaignStatus = Literal["draft", "scheduled", "running", "paused", "completed", "cancelled"]
RecipientStatus = Literal["pending", "queued", "sent", "failed", "retrying", "skipped", "cancelled"]


class CampaignCreate(Strict):
    """POST /v1/campaigns: the audience is a list (listId) or a tag, exactly one (services/campaigns.py checks it,
    naming the field; the document says it with oneOf)."""
    model_config = ConfigDict(json_schema_extra={
        "oneOf": [{"required": ["listId"]}, {"required": ["tag"]}],
        "examples": [{"name": "Spring sale", "listId": "lst_0000000000aaaaaaaaaaaaaaaa",
                      "body": "Hi {{firstName}}, our spring sale starts today!", "ratePerMinute": 600},
                     {"name": "VIP preview", "tag": "vip", "body": "Hi {{firstName}}, you are invited first."}]})
    name: IdentifierNotBlank = Field(max_length=200)
    listId: Optional[IdentifierNotBlank] = Field(None, max_length=200, description=(
        "The list whose members get the campaign (taken when it starts). Exactly one of listId and tag."))
    tag: Optional[Tag] = Field(None, description=(
        "A contact tag (normalised as contact tags are: \"  VIP \" is \"vip\"): the account's contacts that carry it "
        "when the campaign starts get it; a tag no contact has makes a campaign of 0 recipients. Exactly one of "
        "listId and tag."))
    body: str = Field(max_length=MESSAGE_BODY_MAX, json_schema_extra=NOT_BLANK, description=(
        "The message; {{firstName}}, {{lastName}}, {{email}} and {{phone}} are replaced by the contact's "
        "(empty when missing). Any other {{name}} is refused (400)."))
    campaignId: Optional[IdentifierNotBlank] = Field(None, max_length=200, description=(
        "Goes into every message and its reply payload, and routes the answers to bot.campaigns[campaignId]. "
        "Default: the campaign's id."))
    channel: Optional[Identifier] = Field(None, max_length=200, description="Channel label of the messages (default: "
                                                                      "where each contact last wrote from).")
    startAt: Optional[UtcDatetime] = Field(None, description="ISO 8601 with a time zone; in the future the "
                                                               "campaign is scheduled, else it starts now. Not with "
                                                               "draft.")
    ratePerMinute: Optional[int] = Field(None, ge=1, le=1_000_000, description="Messages handed to delivery per "
                                                                              "minute (default 600).")
    draft: StrictBool = Field(False, description=(
        "true: the campaign is made as a draft: nothing is sent or snapshotted until POST "
        "/v1/campaigns/{id}/start (preview and test it first). Default false: it starts now or at startAt, "
        "as it always did."))


class CampaignStart(Strict):
    """POST /v1/campaigns/{id}/start (the body is optional)."""
    model_config = ConfigDict(json_schema_extra={"examples": [{}, {"startAt": "2031-03-01T09:00:00Z"}]})
    startAt: Optional[UtcDatetime] = Field(None, description="ISO 8601 with a time zone, in the future: the "
                                                               "campaign is scheduled for then. Left out: it starts "
                                                               "now.")


class CampaignPreviewRequest(Strict):
    """POST /v1/campaigns/{id}/preview (the body is optional)."""
    contactId: Optional[IdentifierNotBlank] = Field(None, max_length=200, description=(
        "A contact of the account to fill the body for. Default: the list's first contact."))


class CampaignTestRequest(Strict):
    """POST /v1/campaigns/{id}/test."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"contactId": "ct_0000000000aaaaaaaaaaaaaaaa"}]})
    contactId: IdentifierNotBlank = Field(max_length=200, description=(
        "The contact of the account (on the list or not, e.g. yourself) who gets the one test message."))


class SampleContact(BaseModel):
    id: str
    name: str = Field(description="How the UI names the contact: its name, else its phone, else its email.")
    firstName: Optional[str]
    lastName: Optional[str]
    phone: Optional[str]
    email: Optional[str]
    optedOut: bool


class Audience(BaseModel):
    total: int = Field(description="Contacts of the list (or with the tag) now: the campaign would send to them if "
                                   "it started now.")
    optedOut: int = Field(description="Of them, opted out: skipped when their turn comes.")


class CampaignPreview(BaseModel):
    body: str = Field(description="The body filled for contact (placeholders empty when there is none).")
    contact: Optional[SampleContact] = Field(description="Whom it was filled for; null when the list is empty "
                                                         "and no contactId was given.")
    recipients: Audience
    sample: list[SampleContact] = Field(description="The list's first 50 contacts, to preview or test with.")


class CampaignTestSent(BaseModel):
    messageId: str = Field(description="The test message (GET /v1/messages/{id}: its delivery).")
    contactId: str
    body: str = Field(description="The body as sent.")


class CampaignCounts(BaseModel):
    total: int = Field(description="Contacts of the list (or with the tag) when the campaign started.")
    pending: int = Field(description="Not handed over yet.")
    queued: int = Field(description="Message made, delivery not attempted yet.")
    sent: int
    failed: int = Field(description="Failed for good: no retry is scheduled (retry-failed sends them again).")
    retrying: int = Field(description="The last attempt failed and another is scheduled (the recipient's "
                                      "error.nextAttemptAt); a cancel stops it (then failed).")
    skipped: int = Field(description="Opted out when their turn came.")
    cancelled: int = Field(description="Never sent: the campaign was cancelled first.")


class Campaign(BaseModel):
    id: str
    name: str
    listId: Optional[str] = Field(description="The list it goes to; null for a tag campaign.")
    tag: Optional[str] = Field(description="The normalised tag whose contacts it goes to; null for a list campaign.")
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
    pendingAction: Optional[Literal["cancel", "retry"]] = Field(
        description="A cancel or retry-failed whose batches are still running (a large campaign's recipients "
                    "are done in batches after the request); null when none.")


class RetryOutcome(BaseModel):
    requeued: int = Field(description="Failed recipients queued again.")
    notRetryable: int = Field(description="Failed recipients that cannot be sent again: retention removed their "
                                          "deliveries. They stay failed.")


class CampaignAction(Campaign):
    """The campaign after an action; retry-failed adds what it queued again."""
    retry: Optional[RetryOutcome] = Field(None, description="retry-failed only.")


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
