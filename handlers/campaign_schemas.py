"""Pydantic models of the campaigns API (docs/design.md#api-decisions "Campaigns"), beside handlers/schemas.py."""
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from common.validation import MESSAGE_BODY_MAX, NOT_BLANK, Identifier, IdentifierNotBlank
from handlers.schemas import Strict, UtcDatetime

# --- Campaigns (docs/design.md#api-decisions "Campaigns") ---

CampaignStatus = Literal["scheduled", "running", "paused", "completed", "cancelled"]
RecipientStatus = Literal["pending", "queued", "sent", "failed", "retrying", "skipped", "cancelled"]


class CampaignCreate(Strict):
    """POST /v1/campaigns."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"name": "Spring sale", "listId": "lst_0000000000aaaaaaaaaaaaaaaa",
         "body": "Hi {{firstName}}, our spring sale starts today!", "ratePerMinute": 600}]})
    name: IdentifierNotBlank = Field(max_length=200)
    listId: IdentifierNotBlank = Field(max_length=200)
    body: str = Field(max_length=MESSAGE_BODY_MAX, json_schema_extra=NOT_BLANK, description=(
        "The message; {{firstName}}, {{lastName}}, {{email}} and {{phone}} are replaced by the contact's "
        "(empty when missing). Any other {{name}} is refused (400)."))
    campaignId: Optional[IdentifierNotBlank] = Field(None, max_length=200, description=(
        "Goes into every message and its reply payload, and routes the answers to bot.campaigns[campaignId]. "
        "Default: the campaign's id."))
    channel: Optional[Identifier] = Field(None, max_length=200, description="Channel label of the messages (default: "
                                                                      "where each contact last wrote from).")
    startAt: Optional[UtcDatetime] = Field(None, description="ISO 8601 with a time zone; in the future the "
                                                               "campaign is scheduled, else it starts now.")
    ratePerMinute: Optional[int] = Field(None, ge=1, le=1_000_000, description="Messages handed to delivery per "
                                                                              "minute (default 600).")


class CampaignCounts(BaseModel):
    total: int = Field(description="Contacts of the list when the campaign started.")
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
