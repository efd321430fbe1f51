"""An agency's sub-accounts (docs/design.md#api-decisions "Sub-accounts", "Auto-recharge"): create, read, list, set the
auto-recharge threshold, read the credit history. Agencies only (Forbidden otherwise); another agency's
sub-account is NotFound SUBACCOUNT_NOT_FOUND, exactly like an unknown id."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from common.errors import Invalid, NotFound
from services import accounts, one_time_links, sessions
from services.contact_fields import normalize_email
from services.credits import as_number, price_to_hundredths, require_agency, to_hundredths
from storage.credits import DEFAULT_PRICE
from services.lists import keyset_page
from storage import subaccounts as store
from storage.interface import Store

if TYPE_CHECKING:
    from services.accounts import KeyRegistry
    from services.context import JSONObject
    from services.secretbox import SecretBox

log = logging.getLogger("parley.audit")

MAX_NAME = 200
MAX_EMAIL = 320


def not_found(sub_id: str) -> NotFound:
    return NotFound(f"no sub-account with id {sub_id} under this agency", code="SUBACCOUNT_NOT_FOUND")


def public_auto_recharge(row: Mapping[str, Any]) -> JSONObject | None:
    """{threshold, amount, pendingIdempotencyKey, notifiedAt} or None (off). pendingIdempotencyKey is the
    idempotency_key of the notification sent for the current low balance (null when none is outstanding)."""
    if row["auto_recharge_threshold"] is None:
        return None
    return {"threshold": as_number(row["auto_recharge_threshold"]), "amount": as_number(row["auto_recharge_amount"]),
            "pendingIdempotencyKey": row["auto_recharge_key"], "notifiedAt": row["auto_recharge_notified_at"]}


def public_subaccount(row: Mapping[str, Any]) -> JSONObject:
    return {"id": row["id"], "name": row["name"], "email": row["email"],
            "credits": as_number(row["credit_hundredths"]), "autoRecharge": public_auto_recharge(row),
            "creditsPerReply": as_number(price_hundredths(row)), "createdAt": row["created_at"]}


def price_hundredths(row: Mapping[str, Any]) -> int:
    """What the sub-account pays per bot reply (hundredths): its agency's price, else the default."""
    price = row.get("credits_per_reply")
    return DEFAULT_PRICE if price is None else price


def public_transaction(row: Mapping[str, Any]) -> JSONObject:
    """A credit history row; amount is signed (grants > 0, spends < 0), so the amounts add up to the balance."""
    return {"id": row["id"], "kind": row["kind"], "amount": as_number(row["amount"]),
            "balanceAfter": as_number(row["balance_after"]), "description": row["description"],
            "idempotencyKey": row["idempotency_key"], "createdAt": row["created_at"]}


def _clean_name(name: object) -> str:
    cleaned = name.strip() if isinstance(name, str) else ""
    if not cleaned:
        raise Invalid("name is required and cannot be blank")
    if len(cleaned) > MAX_NAME:
        raise Invalid(f"name is longer than {MAX_NAME} characters")
    return cleaned


async def create_subaccount(db: Store, box: SecretBox, registry: KeyRegistry, agency_id: str, caller_type: str, *,
                            name: object, email: object, by: Mapping[str, Any] | None = None) -> JSONObject:
    """A new sub-account of the agency, with its API key and a UI user (its login is the email) whose
    generated password is returned once, like the key. Invalid (name, email: INVALID_EMAIL), Conflict
    (the email belongs to an account already)."""
    require_agency(caller_type)
    cleaned = _clean_name(name)
    if not isinstance(email, str) or not email.strip():
        raise Invalid("email is required")
    if len(email.strip()) > MAX_EMAIL:
        raise Invalid(f"email is longer than {MAX_EMAIL} characters", code="INVALID_EMAIL")
    normalize_email(email)  # validates; accounts keep the email as given, lower-cased (grants look it up so)
    created = await accounts.create_account(db, box, registry, name=cleaned, email=email,
                                            parent_agency_id=agency_id, by=by)
    # As it was made (an Idempotency-Key retry gets this same answer, whatever changed since).
    row = {"id": created["account_id"], "name": created["name"], "email": created["email"],
           "credit_hundredths": 0, "auto_recharge_threshold": None, "created_at": created["created_at"]}
    return {**public_subaccount(row), "apiKey": created["api_key"], "password": created["password"]}


async def get_subaccount(db: Store, agency_id: str, caller_type: str, sub_id: str) -> JSONObject:
    require_agency(caller_type)
    row = await store.get_subaccount(db, agency_id, sub_id)
    if row is None:
        raise not_found(sub_id)
    return public_subaccount(row)


async def reset_password_link(db: Store, base_url: str, agency_id: str, caller_type: str, sub_id: str) -> JSONObject:
    """An agency resets a sub-account's password: the one-time sign-in link that reset-password prints,
    {email, signInUrl, expiresAt}, for the agency to pass on. Another agency's sub-account is NotFound."""
    await get_subaccount(db, agency_id, caller_type, sub_id)
    link = await one_time_links.issue_for_account_owner(db, base_url, sub_id, "reset")
    return {"email": link["email"], "signInUrl": link["url"], "expiresAt": link["expiresAt"]}


async def start_view_as(db: Store, agency_user: Mapping[str, Any], viewer_session_id: str | None, caller_type: str,
                        sub_id: str, by: Mapping[str, Any] | None = None) -> str:
    """The agency user opens a sub-account's UI without its password: a view-as session of their own (never
    the sub-account owner's), with at most their role and never above admin, that lives only beside and as long
    as their session viewer_session_id (services.sessions.start_view_as). Audited (view_as.started) and logged.
    Returns the session id for the view-as cookie. Another agency's sub-account is NotFound."""
    sub = await get_subaccount(db, agency_user["account_id"], caller_type, sub_id)
    log.info("agency user %s views sub-account %s (%s)", agency_user["id"], sub_id, sub["name"])
    return await sessions.start_view_as(db, agency_user, viewer_session_id, sub_id, by)


async def list_subaccounts(db: Store, agency_id: str, caller_type: str, *, limit: str | None = None,
                           cursor: str | None = None) -> JSONObject:
    """The agency's sub-accounts with their balances and auto-recharge, oldest first, as {data, nextCursor}."""
    require_agency(caller_type)
    return await keyset_page(lambda after, n: store.page_subaccounts(db, agency_id, after, n), limit, cursor,
                             public_subaccount)


def parse_auto_recharge(value: object) -> tuple[int | None, int | None]:
    """{"threshold", "amount"} (credits, the grant amount rules) -> (threshold, amount) in hundredths;
    None -> (None, None), turning auto-recharge off."""
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise Invalid("autoRecharge must be an object {threshold, amount} or null")
    unknown = sorted(set(value) - {"threshold", "amount"})
    if unknown:
        raise Invalid(f"autoRecharge.{unknown[0]} is not a known field")
    for field in ("threshold", "amount"):
        if value.get(field) is None:
            raise Invalid(f"autoRecharge.{field} is required")
    return (to_hundredths(value["threshold"], field="autoRecharge.threshold"),
            to_hundredths(value["amount"], field="autoRecharge.amount"))


async def update_subaccount(db: Store, agency_id: str, caller_type: str, sub_id: str, changes: Mapping[str, Any],
                            by: Mapping[str, Any] | None = None) -> JSONObject:
    """The agency's PATCH of its sub-account, in one transaction; changes holds any of autoRecharge
    ({threshold, amount} sets it, None turns it off: below the threshold a spend queues one
    subaccount.auto_recharge notification per episode, storage.credits.spend) and creditsPerReply (what each
    bot reply costs the sub-account, 0 to MAX_PRICE; None: back to the default of 1). Only the agency sets
    the price: a sub-account's own key never reaches this (Forbidden). Returns the sub-account."""
    require_agency(caller_type)
    columns: dict[str, int | None] = {}
    if "autoRecharge" in changes:
        columns["auto_recharge_threshold"], columns["auto_recharge_amount"] = parse_auto_recharge(
            changes["autoRecharge"])
    if "creditsPerReply" in changes:
        price = changes["creditsPerReply"]
        columns["credits_per_reply"] = None if price is None else price_to_hundredths(price)
    if not columns:
        raise Invalid("autoRecharge or creditsPerReply is required")
    row = await store.update_subaccount(db, agency_id, sub_id, columns, by)
    if row is None:
        raise not_found(sub_id)
    return public_subaccount(row)


async def set_auto_recharge(db: Store, agency_id: str, caller_type: str, sub_id: str, auto_recharge: object,
                            by: Mapping[str, Any] | None = None) -> JSONObject:
    """Set ({threshold, amount}) or turn off (None) the sub-account's auto-recharge; returns the sub-account."""
    return await update_subaccount(db, agency_id, caller_type, sub_id, {"autoRecharge": auto_recharge}, by)


async def own_credits(db: Store, account_id: str) -> JSONObject | None:
    """A sub-account's own balance as its UI shows it: public_subaccount plus `state` ("empty" at 0, the bot
    cannot answer; "low" below the auto-recharge threshold; else "ok"), or None for other account types."""
    row = await store.get_own(db, account_id)
    if row is None:
        return None
    balance, threshold = row["credit_hundredths"], row["auto_recharge_threshold"]
    state = "empty" if balance <= 0 else "low" if threshold is not None and balance < threshold else "ok"
    return {**public_subaccount(row), "state": state}


async def own_transactions(db: Store, account_id: str, *, cursor: str | None = None) -> JSONObject:
    """A sub-account's own grants and spends, newest first, as {data, nextCursor} (its Credits page)."""
    if await store.get_own(db, account_id) is None:
        raise NotFound("no such page")
    return await _transactions_page(db, account_id, None, cursor)


async def _transactions_page(db: Store, account_id: str, limit: str | None, cursor: str | None) -> JSONObject:
    return await keyset_page(lambda before, n: store.page_transactions(db, account_id, before, n), limit, cursor,
                             public_transaction, integer_ids=True)


async def list_transactions(db: Store, agency_id: str, caller_type: str, sub_id: str, *, limit: str | None = None,
                            cursor: str | None = None) -> JSONObject:
    """The sub-account's grants and spends, newest first, as {data, nextCursor}."""
    await get_subaccount(db, agency_id, caller_type, sub_id)
    return await _transactions_page(db, sub_id, limit, cursor)
