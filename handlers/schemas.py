"""Pydantic request and response models; also the source of /v1/openapi.json."""
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

NotificationEvent = Literal["contact.created", "contact.tagged", "subaccount.auto_recharge"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    createdAt: str


class ContactPage(BaseModel):
    data: list[Contact]
    nextCursor: Optional[str] = Field(description="Pass as ?cursor= for the next page; null on the last.")


class ListCreate(Strict):
    """POST /v1/lists."""
    name: str = Field(max_length=200)


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
    contactId: str


class AddToListResult(BaseModel):
    success: bool
    listId: str
    contactId: str
    added: bool = Field(description="False when the contact already was a member (nothing changed).")
