"""Credits: agencies grant them to their sub-accounts (docs/api.md#sub-account-credits-agency-accounts; an Idempotency-Key makes a grant
exactly-once, services/idempotency.py); spend_credits takes them away (never below zero, auto-recharge
notification included); balances are exact integer hundredths underneath."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TYPE_CHECKING

from common.errors import Forbidden, IdempotencyKeyReused, InsufficientCredits, Invalid, NotFound
from common.ids import iso, utcnow
from services import idempotency
from storage import credits as store
from storage.interface import Store

if TYPE_CHECKING:
    from services.worker_loop import WorkerLoop

MAX_GRANT = 10 ** 9  # credits in one grant or spend
MAX_DESCRIPTION = 500
GRANT_KEY_REUSED = ("this Idempotency-Key already granted credits with other parameters; use a new key for a "
                    "new grant")
GRANT_ENDPOINT = "POST /v1/subaccounts/credits"  # part of the request's fingerprint: keys stay per endpoint

as_number = store.as_number


def to_hundredths(amount: Any, field: str = "amount") -> int:
    """A JSON number of credits as exact integer hundredths; Invalid unless it is a finite number > 0 with
    at most two decimal places and at most MAX_GRANT. Booleans and strings are not numbers."""
    if isinstance(amount, bool) or not isinstance(amount, (int, float, Decimal)):
        raise Invalid(f"{field} must be a number")
    if isinstance(amount, float) and not math.isfinite(amount):
        raise Invalid(f"{field} must be a finite number")
    try:
        # repr() is the shortest text that reads back as the same float: 0.1 -> "0.1", not 0.1000000000000000055…
        value = Decimal(repr(amount)) if isinstance(amount, float) else Decimal(amount)
    except InvalidOperation:
        raise Invalid(f"{field} must be a number") from None
    if not value.is_finite():
        raise Invalid(f"{field} must be a finite number")
    if value <= 0:
        raise Invalid(f"{field} must be greater than 0")
    if value > MAX_GRANT:
        raise Invalid(f"{field} must be at most {MAX_GRANT}")
    scaled = value * store.SCALE
    if scaled != scaled.to_integral_value():
        raise Invalid(f"{field} must have at most 2 decimal places")
    return int(scaled)


MAX_PRICE = 1000  # credits per bot reply


def price_to_hundredths(price: Any, field: str = "creditsPerReply") -> int:
    """What a sub-account pays per bot reply, set by its agency: a number from 0 (free) to MAX_PRICE with at
    most two decimals, as hundredths; Invalid naming the field otherwise."""
    if not isinstance(price, bool) and isinstance(price, (int, float, Decimal)) and price == 0:
        return 0
    hundredths = to_hundredths(price, field=field)
    if hundredths > MAX_PRICE * store.SCALE:
        raise Invalid(f"{field} must be at most {MAX_PRICE}")
    return hundredths


_TYPED_NUMBER = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def number_from_text(text: str, field: str = "amount") -> Decimal:
    """A number of credits typed into a form ("12", "12.50") as a Decimal for to_hundredths; Invalid naming
    the field unless it is plain ASCII digits with an optional decimal point (a minus sign passes, for
    to_hundredths to say "greater than 0")."""
    text = (text or "").strip()
    if not text:
        raise Invalid(f"{field} is required")
    if not _TYPED_NUMBER.fullmatch(text):
        raise Invalid(f"{field} must be a number such as 10 or 2.50")
    return Decimal(text)


def require_agency(caller_type: str) -> None:
    """Spec §5.7: the credit endpoint is available to agency accounts only."""
    if caller_type != "agency":
        raise Forbidden("only agency accounts can manage sub-accounts and their credits")


def _clean_description(description: Any, field: str = "description") -> str | None:
    if description is None:
        return None
    if not isinstance(description, str):
        raise Invalid(f"{field} must be a string")
    description = description.strip()
    if len(description) > MAX_DESCRIPTION:
        raise Invalid(f"{field} is longer than {MAX_DESCRIPTION} characters")
    return description or None


def _grant_parameters(email: str, amount: Any, description: Any) -> tuple[str, int, str | None]:
    """(email, hundredths, description) as a grant uses them; Invalid for a bad one."""
    if not isinstance(email, str) or not email.strip():
        raise Invalid("email is required")
    # accounts store their email case-folded
    return email.strip().lower(), to_hundredths(amount), _clean_description(description)


def grant_fingerprint(email: str, amount: Any, description: Any) -> str:
    """An Idempotency-Key's fingerprint of a grant: its parameters as the grant uses them, so the same
    grant spelled differently (email case, 10 or 10.0) is the same request."""
    return _fingerprint(*_grant_parameters(email, amount, description))


def _fingerprint(email: str, hundredths: int, description: str | None) -> str:
    return idempotency.fingerprint({"endpoint": GRANT_ENDPOINT, "email": email, "amount": hundredths,
                                    "description": description})


async def grant_credits(db: Store, agency_id: str, caller_type: str, *, email: str, amount: Any, description: Any = None, idempotency_key: str | None = None,
                        now: datetime | None = None, by: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], bool]:
    """Spec §4.6: add ``amount`` credits to the calling agency's sub-account with this email and record the
    grant (with ``description`` and the request's Idempotency-Key) in its history, in one transaction.

    Returns (body, replayed): body is {"success", "sub_account_id", "credits_added", "new_balance"};
    replayed is True when the agency already granted with this Idempotency-Key and the same parameters,
    whenever that was: its first answer comes back and nothing is granted. A grant's key is the agency's
    for good (the grant history answers it, not only the 24 h Idempotency-Key answers of
    services/idempotency.py), because an auto-recharge notification is redelivered for ~30 h. Raises
    Forbidden (not an agency), Invalid, NotFound SUBACCOUNT_NOT_FOUND (also for another agency's
    sub-account: nothing is revealed), IdempotencyKeyReused (same key, another grant, or another request
    within 24 h). Without a key every call grants: "The service does not itself deduplicate grants."
    """
    require_agency(caller_type)
    email, hundredths, description = _grant_parameters(email, amount, description)

    async def fingerprint() -> str:
        return _fingerprint(email, hundredths, description)
    with idempotency.covering(agency_id, idempotency_key, fingerprint, now) as claim:
        earlier = await store.keyed_grant(db, agency_id, idempotency_key) if idempotency_key else None
        if earlier is not None:
            if (earlier["email"], earlier["amount"], earlier["description"]) != (email, hundredths, description):
                raise IdempotencyKeyReused(GRANT_KEY_REUSED)
            if claim is not None:  # the request's claim answers as a replay, and is not used for a write
                claim.open, claim.replayed = False, True
            return store.grant_response(earlier["account_id"], earlier["amount"], earlier["balance_after"]), True
        body = await store.grant(db, agency_id, email, hundredths, description, iso(now or utcnow()),
                                 idempotency_key, by=by)
    return body, claim is not None and claim.replayed


async def spend_credits(db: Store, account_id: str, amount: Any, reason: str | None, now: datetime | None = None, *, delivery: WorkerLoop | None = None) -> int | float:
    """Take ``amount`` credits from the account (a bot reply's cost) and record why, in one transaction.
    Never goes below zero: a spend larger than the balance raises InsufficientCredits and spends nothing.
    A spend that leaves a sub-account below its auto-recharge threshold queues the agency's
    subaccount.auto_recharge notification in the same transaction; ``delivery`` (the DeliveryWorker, when
    this process runs one) is woken for it after the commit.
    Returns the new balance as a number. Raises Invalid (bad amount or reason) or NotFound (no account)."""
    hundredths = to_hundredths(amount)
    reason = _clean_description(reason, field="reason")
    result = await store.spend(db, account_id, hundredths, reason, iso(now or utcnow()))
    if result.get("auto_recharge") and delivery is not None:
        delivery.notify()
    if result["outcome"] == "not_found":
        raise NotFound("account not found")
    if result["outcome"] == "insufficient":
        raise InsufficientCredits(f"the balance of {as_number(result['balance'])} credits is less than "
                                  f"{as_number(hundredths)}")
    return as_number(result["balance"])


async def get_balance(db: Store, account_id: str) -> int | float:
    """The account's credit balance as a number (0 for an unknown account)."""
    return as_number(await store.get_balance(db, account_id) or 0)


async def price_per_reply(db: Store, account_id: str) -> int | float:
    """What one bot reply costs the account, as a number: its agency's price for a sub-account (default 1)."""
    price = await store.get_price(db, account_id)
    return as_number(store.DEFAULT_PRICE if price is None else price)
