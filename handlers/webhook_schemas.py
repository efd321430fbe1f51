"""Pydantic models of what Parley POSTs to its clients' URLs (docs/api.md#webhook-delivery): the reply to the Custom
Channel Webhook URL, a notification per event type to notificationUrls, and the test ping. They are the OpenAPI
document's `webhooks` (3.1), so that client generators type the payloads a receiver parses;
tests/test_openapi.py checks payloads a real receiver got against them."""
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from handlers.event_schemas import EVENT_DATA, type_name


class ReplyContact(BaseModel):
    firstName: Optional[str]
    lastName: Optional[str]
    phone: Optional[str]
    email: Optional[str]


class ReplyPayload(BaseModel):
    """An outbound message (an inbox, bot, API or campaign reply) to deliver to the contact on your platform."""
    model_config = ConfigDict(extra="allow")  # a new field is added, never one taken away
    contactId: str
    messageId: str = Field(description="Parley's id of the message: deliver each once (webhook-id is the same "
                                       "on every retry).")
    userId: str = Field(description="The account's owner user (or the account's id when it has no user).")
    body: str
    toId: Optional[str] = Field(description="The contact's fromId on your platform (null: the contact never wrote "
                                            "on a custom channel).")
    channel: Optional[str]
    campaignId: Optional[str] = Field(None, description="Present when the message belongs to a campaign.")
    mediaUrl: Optional[str] = Field(None, description="A signed link to the stored media, when there is media.")
    mediaContentType: Optional[str] = None
    contact: ReplyContact
    accountId: str = Field(description="The account the reply is from.")
    author: Literal["bot", "user", "api", "campaign", "auto"] = Field(
        description="Who wrote it: the bot, a person in the inbox (user), an API client (api), a campaign, or "
                    "Parley itself (auto: the outside-hours message, docs/api.md \"Business hours and SLA\").")
    authorUserId: Optional[str] = Field(None, description="The person's user id: present only when author is user.")
    createdAt: str = Field(description="When the reply was made (the message's createdAt).")
    sequence: int = Field(description="1, 2, 3 ... per contactId in the order its replies were made: sort by it to "
                                      "restore the order of replies that arrive out of order (docs/api.md).")


class PingData(BaseModel):
    test: Literal[True]


def _notification_model(event_type, data_model, doc):
    name = type_name(event_type) + "Notification"
    fields = {"__annotations__": {"event": Literal[event_type], "id": str, "occurredAt": str, "accountId": str,
                                  "data": data_model},
              "__doc__": doc, "model_config": ConfigDict(extra="allow"),
              "id": Field(description="Equal to the webhook-id header: the same on every retry.")}
    return type(name, (BaseModel,), fields)


# name in the document's webhooks -> (summary, the body's model)
WEBHOOKS = {
    "reply": ("A reply to deliver (POSTed to customChannelWebhookUrl)", ReplyPayload),
    **{event_type: (f"The {event_type} notification (POSTed to notificationUrls[\"{event_type}\"])",
                    _notification_model(event_type, model, model.__doc__))
       for event_type, model in EVENT_DATA.items()},
    "ping": ("POST /v1/account/webhook-test's signed test event (to customChannelWebhookUrl)",
             _notification_model("ping", PingData, "The test event: answer it 2xx.")),
}
