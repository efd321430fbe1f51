"""Pydantic models of a person's data export and of merging two contacts (issue 41; docs/api.md "Contacts")."""
from typing import Literal, Optional

from pydantic import BaseModel, Field

from common.validation import Identifier, Strict
from handlers.conversation_schemas import Status
from handlers.message_schemas import Message
from handlers.schemas import Contact
from handlers.schemas_canned_notes import Note


class ExportedIdentity(BaseModel):
    fromId: str = Field(description="A channel identity (customData.fromId, a widget visitor, an email address) "
                                    "that reaches this contact.")


class ExportedList(BaseModel):
    id: str
    name: str


class OptOutEntry(BaseModel):
    optedOut: bool = Field(description="true: opted out; false: back in.")
    via: Optional[str] = Field(description="reply, user or api (null for changes older than the history).")
    at: str


class ExportedConversation(BaseModel):
    status: Status
    assigneeUserId: Optional[str]
    snoozedUntil: Optional[str]


class ExportedCampaign(BaseModel):
    campaignId: str
    name: str
    status: str = Field(description="The recipient's status in the campaign (pending, sent, failed, ...).")
    messageId: Optional[str]


class ContactExport(BaseModel):
    """GET /v1/contacts/{id}/export: everything held on the person (GDPR art. 15 access and art. 20 portability)."""
    format: Literal["parley.contact-export.v1"]
    exportedAt: str
    contact: Contact
    identities: list[ExportedIdentity]
    messages: list[Message] = Field(description="Every message, oldest first, as GET /v1/messages/{id} shows it "
                                                "without its attempts.")
    notes: list[Note] = Field(description="The team's private notes, oldest first.")
    lists: list[ExportedList]
    optOutHistory: list[OptOutEntry] = Field(description="Every opt-out and opt-in, oldest first.")
    conversation: Optional[ExportedConversation] = Field(description="null before the first message.")
    campaigns: list[ExportedCampaign] = Field(description="The campaigns that were to reach the contact.")
