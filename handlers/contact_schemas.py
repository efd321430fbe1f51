"""Pydantic models of a person's data export and of merging two contacts (issue 41; docs/api.md "Contacts")."""
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from common.validation import IdentifierNotBlank, Strict
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


class ExportedCsatAnswer(BaseModel):
    """A CSAT question asked when the conversation was resolved, and the contact's answer (null until answered)."""
    channel: str = Field(description="Where it was asked (web: the chat; elsewhere a link to a one-question page).")
    question: str
    askedAt: str
    agentUserId: Optional[str] = Field(description="Who had the conversation when it was resolved.")
    answeredAt: Optional[str]
    rating: Optional[int] = Field(description="1 (bad) to 5 (very good).")
    comment: Optional[str]


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
    csatAnswers: list[ExportedCsatAnswer] = Field(description="The CSAT questions asked and answered, oldest "
                                                              "first.")


MergeField = Literal["firstName", "lastName", "phone", "email"]


class ContactMerge(Strict):
    """POST /v1/contacts/{id}/merge: merge the contact otherId into this one."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"otherId": "ct_01h2xcejqtf2nbrexx3vqjhp41"},
                                                              {"otherId": "ct_01h2xcejqtf2nbrexx3vqjhp41",
                                                               "keep": {"email": "other"}}]})
    otherId: IdentifierNotBlank = Field(description="The contact to merge into this one; it is deleted.")
    keep: Optional[dict[MergeField, Literal["this", "other"]]] = Field(
        None, description="Whose value stays where both contacts have a different one: \"this\" (the default for "
                          "names) or \"other\". Required for a phone or an email both have (else 409).")


class MergeMoved(BaseModel):
    """Rows moved from the other contact (a list or campaign both were on counts once, on the kept contact)."""
    messages: int
    identities: int
    notes: int
    optOutChanges: int
    lists: int
    campaigns: int
    conversation: int = Field(description="1 when the other contact had a conversation (now one with this one's).")


class ContactMerged(BaseModel):
    contact: Contact = Field(description="The kept contact after the merge.")
    mergedId: str = Field(description="The other contact's id: GET /v1/contacts/{mergedId} is 404 from now on.")
    moved: MergeMoved
