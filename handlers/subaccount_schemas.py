"""Pydantic models of the sub-accounts and credits API (docs/api.md#sub-account-credits-agency-accounts), beside handlers/schemas.py."""
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from common.validation import Identifier, IdentifierNotBlank
from handlers.schemas import Strict

# --- Sub-accounts and credits (docs/api.md#sub-account-credits-agency-accounts, docs/design.md#api-decisions "Credits") ---

def _credits_check(name, allow_none=False):
    """A before-validator running services.credits.<name>(value, field=...) (a finite JSON number with at most
    2 decimals, in that check's range; booleans and strings are not): its Invalid is the field's error."""
    def validate(value, info):
        from services import credits
        from common.errors import Invalid
        if value is None and allow_none:
            return value
        try:
            getattr(credits, name)(value, field=info.field_name)
        except Invalid as exc:
            raise ValueError(exc.message) from None
        return value
    return validate


_credit_amount = _credits_check("to_hundredths")  # > 0


CREDITS = dict(gt=0, le=1_000_000_000)  # the schema's half of services.credits.to_hundredths (+ 2 decimals)


class CreditGrant(Strict):
    """POST /v1/subaccounts/credits (x-api-key header only; agency accounts only)."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"email": "sub@example.com", "amount": 100, "description": "Monthly top-up"}]})
    email: Identifier = Field(max_length=320, description="Email of a sub-account under the calling agency.")
    amount: float = Field(description="Credits to grant: a number > 0, at most 2 decimals.", **CREDITS)
    description: Optional[str] = Field(None, max_length=500, description="Note stored in the credit history.")

    _check_amount = field_validator("amount", mode="before")(_credit_amount)


class CreditGrantResult(BaseModel):
    success: bool
    sub_account_id: str
    credits_added: float
    new_balance: float


class AutoRechargeSetting(Strict):
    """When a spend leaves the balance below threshold, the agency gets one subaccount.auto_recharge
    notification asking for amount."""
    threshold: float = Field(description="Credits: a number > 0, at most 2 decimals.", **CREDITS)
    amount: float = Field(description="Credits the notification asks the agency to grant: a number > 0, at most "
                                      "2 decimals.", **CREDITS)

    _check_amounts = field_validator("threshold", "amount", mode="before")(_credit_amount)


class AutoRecharge(BaseModel):
    threshold: float
    amount: float
    pendingIdempotencyKey: Optional[str] = Field(
        description="idempotency_key of the notification sent for the current low balance; null once a grant "
                    "brought the balance back to the threshold (or before any).")
    notifiedAt: Optional[str] = Field(description="When that notification was queued.")


class SubAccount(BaseModel):
    id: str
    name: str
    email: str
    credits: float
    autoRecharge: Optional[AutoRecharge] = Field(description="null: auto-recharge is off.")
    creditsPerReply: float = Field(description="What each bot reply costs the sub-account, set by the agency "
                                               "(default 1).")
    createdAt: str


class SubAccountPage(BaseModel):
    data: list[SubAccount]
    nextCursor: Optional[str]


class SubAccountCreate(Strict):
    """POST /v1/subaccounts (agency accounts only)."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "Bakery Rossi", "email": "ops@rossi.example"}]})
    name: IdentifierNotBlank = Field(max_length=200)
    email: Identifier = Field(max_length=320, description="Unique among all accounts; the sub-account's login and the "
                                                   "email grants name.")


class SubAccountCreated(SubAccount):
    apiKey: str = Field(description="The sub-account's API key, shown only in this answer.")
    password: str = Field(description="Password of the sub-account's UI user (login: email), shown only in this "
                                      "answer.")


class SubAccountPatch(Strict):
    """PATCH /v1/subaccounts/{id}: only the keys present change; at least one is required."""
    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "examples": [
        {"autoRecharge": {"threshold": 10, "amount": 100}}, {"creditsPerReply": 0.5}]})
    autoRecharge: Optional[AutoRechargeSetting] = Field(
        None, description="{threshold, amount} sets auto-recharge; null turns it off.")
    creditsPerReply: Optional[float] = Field(
        None, ge=0, le=1000, description="What each bot reply costs the sub-account: 0 (free) to 1000 credits, at "
                                         "most 2 decimals; null: the default of 1. Only the agency sets it.")

    _check_price = field_validator("creditsPerReply", mode="before")(
        _credits_check("price_to_hundredths", allow_none=True))

    @model_validator(mode="after")
    def _something(self):
        if not self.model_fields_set:
            raise ValueError("autoRecharge or creditsPerReply is required")
        return self

    def changes(self):
        """The keys sent, as plain data."""
        return self.model_dump(include=self.model_fields_set)


class CreditTransaction(BaseModel):
    id: int = Field(description="Increases in commit order.")
    kind: Literal["grant", "spend"]
    amount: float = Field(description="Signed: grants > 0, spends < 0.")
    balanceAfter: float = Field(description="The balance right after this transaction.")
    description: Optional[str] = Field(description="A grant's description, or why credits were spent.")
    idempotencyKey: Optional[str] = Field(description="The Idempotency-Key a grant was made with.")
    createdAt: str


class CreditTransactionPage(BaseModel):
    data: list[CreditTransaction]
    nextCursor: Optional[str]
