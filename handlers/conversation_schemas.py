"""Pydantic models of the conversations API (issue 21: status and assignee); handlers/schemas.py has the rest."""
from typing import Literal, Optional

from pydantic import ConfigDict, BaseModel, Field

from common.validation import Identifier
from handlers.schemas import Strict, UtcDatetime

Status = Literal["open", "pending", "resolved", "snoozed"]


def _no_default(schema):
    schema.pop("default", None)


class ConversationPatch(Strict):
    """PATCH /v1/conversations/{id}: any subset; at least one field."""
    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "examples": [
        {"status": "resolved"}, {"assigneeUserId": None},
        {"status": "snoozed", "snoozedUntil": "2030-01-06T09:00:00Z"}]})
    # Absent means unchanged; not nullable, so the document shows no default.
    status: Status = Field(None, description="open, pending, resolved, or snoozed (with snoozedUntil). A new "
                                             "inbound message reopens a resolved or snoozed conversation.",
                           json_schema_extra=_no_default)
    snoozedUntil: Optional[UtcDatetime] = Field(
        None, description="When a snoozed conversation opens again (in the future); alone, it snoozes.")
    assigneeUserId: Optional[Identifier] = Field(
        None, max_length=100, description="A user of the account; null unassigns.")


class ConversationBulk(ConversationPatch):
    """POST /v1/conversations/bulk: the same change on many conversations, all or none."""
    model_config = ConfigDict(json_schema_extra={"minProperties": 2, "examples": [
        {"conversationIds": ["ct_0001"], "status": "resolved"}]})
    conversationIds: list[Identifier] = Field(min_length=1, max_length=100,
                                              description="Conversation ids (a conversation's id is its contact's).")


class Conversation(BaseModel):
    id: str = Field(description="The contact's id: one conversation per contact.")
    contactId: str
    status: Status
    snoozedUntil: Optional[str]
    assigneeUserId: Optional[str]
    lastMessageId: str
    lastMessageAt: str
    lastDirection: Literal["inbound", "outbound"]
    unreadCount: int
    channel: Optional[str]
    slaDueAt: Optional[str] = Field(description="When a person's answer is due (settings sla, in business "
                                                "minutes); null: nothing waits for one.")
    slaBreached: bool = Field(description="The answer is overdue (conversation.sla_breached fired).")


class ConversationBulkResult(BaseModel):
    data: list[Conversation] = Field(description="The conversations after the change, in the order given.")
