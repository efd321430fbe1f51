"""One-time links (docs/design.md#wave-3-contracts Day two): one mechanism for the first-run setup link, reset-password's sign-in
link and an agency's reset of a sub-account. The token is shown once, in the link; only its hash is stored;
using the link (choosing a password) spends it, and it dies after LINK_HOURS. No password or API key is
ever printed: the person chooses the password, and the Settings page shows the key once."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any, cast

from common.errors import Invalid, NotFound
from common.ids import iso, utcnow
from common.one_time_link_kinds import PURPOSES
from services import keys
from storage import accounts as account_store, one_time_links as store
from storage.interface import Row, Store

LINK_HOURS = 24


class LinkInvalid(NotFound):
    """The link is unknown, already used or expired (one answer for all three: nothing to probe)."""

    def __init__(self) -> None:
        super().__init__("This link is not valid: it was already used or has expired. Ask for a new one.",
                         code="NOT_FOUND")


def url_for(base_url: str, purpose: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/{purpose}/{token}"


def new_link(base_url: str, user_id: str, account_id: str, purpose: str, now: datetime | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the row to store, {url, expiresAt} to show) of a new link; a write stores the row
    (storage.one_time_links.insert_link, alone or inside a larger transaction: an invitation's)."""
    assert purpose in PURPOSES
    token, now = keys.new_session_id(), now or utcnow()
    expires_at = iso(now + timedelta(hours=LINK_HOURS))
    row = {"token_hash": keys.hash_token(token), "purpose": purpose, "user_id": user_id, "account_id": account_id,
           "created_at": iso(now), "expires_at": expires_at}
    return row, {"url": url_for(base_url, purpose, token), "expiresAt": expires_at}


async def issue(db: Store, base_url: str, user_id: str, account_id: str, purpose: str, now: datetime | None = None) -> dict[str, Any]:
    """A new link for the user: {url, expiresAt}. The user's earlier unspent link of this purpose dies."""
    row, shown = new_link(base_url, user_id, account_id, purpose, now)
    await store.insert_link(db, row)
    return shown


async def issue_reset_for_email(db: Store, base_url: str, email: str, account_id: str | None = None) -> dict[str, Any]:
    """reset-password: {email, accountId, signInUrl, expiresAt} for the UI user with this email (in account_id,
    needed when the email is a user of several accounts: passwords are per account); NotFound otherwise."""
    email = (email or "").strip().lower()
    found = [u for u in await account_store.get_users_by_email(db, email)
             if account_id is None or u["account_id"] == account_id]
    if not found:
        raise NotFound(f"no user with email {email}" + (f" in account {account_id}" if account_id else ""),
                       code="NOT_FOUND")
    if len(found) > 1:
        raise Invalid(f"{email} is a user of several accounts: say which with --account-id (one of "
                      f"{', '.join(u['account_id'] + ' ' + u['account_name'] for u in found)})", field="account_id")
    user = found[0]
    link = await issue(db, base_url, user["id"], user["account_id"], "reset")
    return {"email": user["email"], "accountId": user["account_id"], "signInUrl": link["url"],
            "expiresAt": link["expiresAt"]}


async def issue_for_account_owner(db: Store, base_url: str, account_id: str, purpose: str) -> dict[str, Any]:
    """A link for the account's owner user: {email, url, expiresAt} (create-account, an agency's reset)."""
    user_id = await account_store.get_owner_user_id(db, account_id)
    if user_id is None:
        raise NotFound("the account has no UI user", code="NOT_FOUND")
    user = cast(Row, await account_store.get_user(db, user_id))  # the owner found just above
    return {"email": user["email"], **await issue(db, base_url, user_id, account_id, purpose)}


async def peek(db: Store, token: str | None, purpose: str) -> Row:
    """The live link's {user_id, account_id, email, expires_at, ...} (opening it spends nothing: a chat
    app's link preview must not burn it); LinkInvalid otherwise."""
    link = await store.get_live_link(db, keys.hash_token(token or ""), purpose, iso(utcnow()))
    if link is None:
        raise LinkInvalid()
    return link


async def redeem(db: Store, token: str, purpose: str, password: str | None, min_length: int, max_length: int) -> dict[str, Any]:
    """Choose the password through the link: spends it, sets the password and ends every session of the
    user, in one transaction. Returns the user {id, account_id, email, account_type} to sign in.
    Invalid naming the field for a bad password (the link stays unspent); LinkInvalid for a dead link."""
    if not min_length <= len(password or "") <= max_length:
        raise Invalid(f"password must have {min_length} to {max_length} characters")
    await peek(db, token, purpose)  # before hashing: a dead link costs none
    password_hash = await asyncio.get_running_loop().run_in_executor(
        None, keys.hash_password, cast(str, password))  # its length checked above
    user = await store.spend_link(db, keys.hash_token(token), purpose, iso(utcnow()), password_hash)
    if user is None:
        raise LinkInvalid()
    return user
