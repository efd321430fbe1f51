"""Pydantic models of GET /v1/events (docs/api.md "Events"): one model per event type's data, described once;
tests/test_events_api.py checks every event emitted against them. A notification (notificationUrls) of a type
carries the same data as its event."""
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from handlers.conversation_schemas import Status
from handlers.message_schemas import Message
from handlers.schemas import Contact
from services.handoff import REASONS


class MessageData(Message):
    """The message as GET /v1/messages/{id} shows it when the event is read, without its attempts."""
    model_config = ConfigDict(extra="forbid")


class ContactData(Contact):
    """The contact as GET /v1/contacts/{id} shows it, when the change was made."""
    model_config = ConfigDict(extra="forbid")


class ConversationUpdatedData(BaseModel):
    """Read, bot paused or resumed (contactId alone); status or assignee changed (with both)."""
    model_config = ConfigDict(extra="forbid")
    contactId: str
    status: Optional[Status] = None
    assigneeUserId: Optional[str] = None


class HandoffData(BaseModel):
    """The bot handed the conversation to a person (docs/api.md "Bot")."""
    model_config = ConfigDict(extra="forbid")
    contactId: str
    messageId: str = Field(description="The contact's message that caused the handoff.")
    reason: Literal[REASONS]


class TaggedList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    name: str


class ContactTaggedData(BaseModel):
    """The contact was added to a list."""
    model_config = ConfigDict(extra="forbid")
    contact: ContactData
    list: TaggedList
    addedAt: str


class ContactErasedData(BaseModel):
    """The contact was erased: its id only (every earlier event that named it was emptied). Erase it too."""
    model_config = ConfigDict(extra="forbid")
    contactId: str


class ContactMergedData(BaseModel):
    """Another contact of the same person was merged into contactId (POST /v1/contacts/{id}/merge): mergedId is
    gone; what you hold under it belongs to contactId now (contact.updated follows with the kept contact)."""
    model_config = ConfigDict(extra="forbid")
    contactId: str
    mergedId: str


class AutoRechargeData(BaseModel):
    """An agency's sub-account fell below its auto-recharge threshold (agency accounts only)."""
    model_config = ConfigDict(extra="forbid")
    idempotency_key: str
    sub_account_id: str
    email: Optional[str]
    balance: float
    threshold: float
    amount: Optional[float]


class DeliveryError(BaseModel):
    """A failed delivery attempt, as stored with the message (its error)."""
    at: str
    httpStatus: Optional[int]
    error: str
    response: Optional[str] = Field(description="The first 1 KB of the receiver's answer.")
    nextAttemptAt: Optional[str] = Field(description="When it is tried again; null: never (final).")


class MessageFailedData(BaseModel):
    """A reply's delivery failed for good (a 3xx or 4xx, a refused URL, no URL, or the 8th attempt failed): no
    retry will come; POST /v1/messages/{id}/retry sends it again once the receiver is fixed."""
    model_config = ConfigDict(extra="forbid")
    messageId: str
    contactId: str
    final: Literal[True]
    error: Optional[DeliveryError]


class SlaBreachedData(BaseModel):
    """A person's answer to the conversation was not given by its SLA due time (settings sla, in business
    minutes): fired once per breach, by one process."""
    model_config = ConfigDict(extra="forbid")
    contactId: str
    dueAt: str = Field(description="When the answer was due.")
    kind: Literal["first", "next"] = Field(description="The first response's target or the next response's.")
    assigneeUserId: Optional[str] = Field(description="Who the conversation was assigned to then, or null.")


class CsatSubmittedData(BaseModel):
    """A contact answered the CSAT question asked when their conversation was resolved (settings csat)."""
    model_config = ConfigDict(extra="forbid")
    contactId: str
    rating: int = Field(ge=1, le=5, description="1 (bad) to 5 (very good).")
    comment: Optional[str] = Field(description="What they wrote beside the rating, or null.")


# Event type -> its data's model: the one description of each type.
EVENT_DATA = {
    "message.created": MessageData,
    "message.updated": MessageData,
    "conversation.updated": ConversationUpdatedData,
    "conversation.handoff": HandoffData,
    "contact.created": ContactData,
    "contact.updated": ContactData,
    "contact.tagged": ContactTaggedData,
    "contact.erased": ContactErasedData,
    "contact.merged": ContactMergedData,
    "subaccount.auto_recharge": AutoRechargeData,
    "message.failed": MessageFailedData,
    "conversation.sla_breached": SlaBreachedData,
    "csat.submitted": CsatSubmittedData,
}


def type_name(event_type):
    """An event type as a model name's start: contact.created -> ContactCreated (and the notification's model)."""
    return "".join(part.capitalize() for part in event_type.replace("_", ".").split("."))


def _event_model(event_type, data_model):
    name = type_name(event_type) + "Event"
    fields = {"__annotations__": {"id": str, "type": Literal[event_type], "createdAt": str, "data": data_model},
              "__doc__": data_model.__doc__, "model_config": ConfigDict(extra="forbid"),
              "id": Field(description="This event's cursor: pass it as after to read what came next.")}
    return type(name, (BaseModel,), fields)


Event = Annotated[Union[tuple(_event_model(t, m) for t, m in EVENT_DATA.items())], Field(discriminator="type")]


class EventPage(BaseModel):
    data: list[Event] = Field(description="Oldest first, in commit order.")
    nextCursor: str = Field(description="Pass as after to read on; equal to after when nothing came.")


class EventsQuery(BaseModel):
    after: Optional[str] = Field(None, description="An event's id or a nextCursor; omitted: from the oldest kept.")
    types: Optional[str] = Field(None, description="Comma-separated event types to read (default all): "
                                                   + ", ".join(EVENT_DATA) + ".")
    limit: Optional[int] = Field(None, ge=1, le=500, description="Events at most, 1-500 (default 100).")
    wait: Optional[float] = Field(None, ge=0, le=30, description="Seconds to wait, 0-30 (default 0), when no "
                                                                 "event is there yet: answers as soon as one "
                                                                 "commits.")
