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
