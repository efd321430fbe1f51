"""An account's users and their roles (issue 21): owner (everything), admin (everything but owners and API
keys), agent (inbox, contacts, lists). Invite (a one-time sign-in link, shown), list, change role, name,
active, remove. The rules that need the stored state (the last active owner) are checked in the write itself.

A user is one person's membership of one account: the same email may be a user of several accounts (agency
staff), each with its own role and password; an email is unique within an account only, and nothing here tells
whether it is a user elsewhere. Sign-in offers the person every account whose password matches
(services/accounts.py sign_in); the session is in one of them at a time (services/sessions.py)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TYPE_CHECKING, cast

from common.errors import Conflict, Forbidden, Invalid, NotFound
from common.ids import new_id, now_iso
from common.validation import no_control_characters
from services import agent_mail, assignment, mail_out, one_time_links
from services.contact_fields import normalize_email
from storage import accounts as account_store, mail as mail_store, users as store
from storage.db import StoredResultLost
from storage.interface import Row, Store
from storage.rows import UserRow

if TYPE_CHECKING:
    from services.secretbox import SecretBox

ROLES = ("agent", "admin", "owner")  # each can do what the ones before it can
_RANK = {role: rank for rank, role in enumerate(ROLES)}
API_KEY_ROLE = "owner"  # an API key acts with an owner's rights
MAX_NAME = 200
INVITED = store.INVITED
OWNERS_ONLY = store.OWNERS_ONLY
REMOVED_LABEL = store.REMOVED_LABEL


def allows(role: str | None, required: str) -> bool:
    """True when ``role`` may use what needs ``required`` (None: a user from before roles is an admin)."""
    return _RANK.get(role or "admin", -1) >= _RANK[required]


def author_name(email: str, as_account: str | None = None, name: str | None = None) -> str:
    """Who did something, as a page shows it: the user's name (issue 43 §3), else their email; for an agency user
    who did it viewing a sub-account (services.sessions.view_as_user), "<name or email> as <the sub-account>"."""
    who = (name or "").strip() or email
    return f"{who} as {as_account}" if as_account else who


def public_user(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "email": row["email"], "name": row["name"], "role": row["role"],
            "active": bool(row["active"]), "invitationPending": bool(row["invitation_pending"]),
            "available": bool(row["available"]), "capacity": row["capacity"], "lastSeenAt": row["last_seen_at"],
            "emailNotifications": agent_mail.public(row), "createdAt": row["created_at"]}


def _role(value: Any) -> str:
    if value not in ROLES:
        raise Invalid(f"role must be one of {', '.join(ROLES)}", field="role")
    return value


def _name(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid("name must be text", field="name")
    value = value.strip()
    if len(value) > MAX_NAME:
        raise Invalid(f"name is longer than {MAX_NAME} characters", field="name")
    return value or None


def own_changes(user: Mapping[str, Any], name: Any, email: Any) -> dict[str, Any]:
    """What a user's own form (Settings or Your account: issue 43 §3) changes of their name and sign-in email,
    validated as update() validates them: {field: new value} of those that differ (a blank name removes it)."""
    if not isinstance(email, str) or not email.strip():
        raise Invalid("email is required", field="email")
    if isinstance(name, str):
        no_control_characters(name, "name")  # the API's model refuses them; a form is checked here
    wanted = {"name": _name(name), "email": normalize_email(email)}
    return {field: value for field, value in wanted.items() if value != user.get(field)}


def _require_manager(actor_role: str | None, role: str | None = None) -> None:
    """Users are managed by owners and admins; only owners make or change owners."""
    if not allows(actor_role, "admin"):
        raise Forbidden("only an owner or an admin can manage users")
    if role == "owner" and not allows(actor_role, "owner"):
        raise Forbidden(OWNERS_ONLY, field="role")


async def list_users(db: Store, account_id: str) -> dict[str, Any]:
    return {"data": [public_user(row) for row in await store.list_users(db, account_id)]}


async def get_user(db: Store, account_id: str, user_id: str) -> dict[str, Any]:
    row = await store.get_user(db, account_id, user_id)
    if row is None:
        raise store.user_not_found()
    return public_user(row)


async def invite(db: Store, box: SecretBox, base_url: str, account_id: str, *, email: str, name: str | None = None, role: Any, by: Mapping[str, Any] | None, actor_role: str | None) -> dict[str, Any]:
    """Add a user and make its one-time sign-in link (/invite/<token>, LINK_HOURS): the invitee chooses a
    password through it. Returns the user with signInUrl and signInExpiresAt, shown once (the link is stored
    hashed; an Idempotency-Key retry gets the same link back, kept encrypted with the key's answer).
    Invalid naming the field, Forbidden (an admin inviting an owner), Conflict (a user of this account has the
    email; other accounts' users do not count, and are not told of)."""
    if not isinstance(email, str) or not email.strip():
        raise Invalid("email is required", field="email")
    email, name, role = normalize_email(email), _name(name), _role(role)
    _require_manager(actor_role, role)
    user = {"id": new_id("usr"), "account_id": account_id, "email": email, "name": name, "role": role,
            "password_hash": INVITED, "created_at": now_iso()}
    link_row, link = one_time_links.new_link(base_url, user["id"], account_id, "invite")
    account = cast(Row, await account_store.get_account(db, account_id))  # the caller's account: it exists
    mail = mail_out.invitation(box, account, to=email, url=link["url"],
                               expires_at=link["expiresAt"])  # None without SMTP
    shown = box.encrypt(json.dumps({**link, "emailed": mail is not None}))
    try:
        created = await store.insert_user(db, user, link_row, shown, by, mail)
    except StoredResultLost:  # committed, only the writer's answer was lost: what was made here is stored
        created = {**user, "active": 1, "shown": shown}
    link = json.loads(box.decrypt(created["shown"]))
    return {**public_user(created), "signInUrl": link["url"], "signInExpiresAt": link["expiresAt"],
            "invitationEmailed": bool(link.get("emailed"))}


async def new_invitation_link(db: Store, box: SecretBox, base_url: str, account_id: str, user_id: str, *, actor_role: str | None) -> dict[str, Any]:
    """A new one-time sign-in link for a user whose invitation is pending (the first one expired, or was lost):
    the earlier link dies (services.one_time_links.issue). Returns the user with signInUrl and signInExpiresAt.
    NotFound USER_NOT_FOUND, Forbidden (an admin and an owner's invitation), Conflict when it was accepted."""
    user = await get_user(db, account_id, user_id)
    _require_manager(actor_role, user["role"])
    if not user["invitationPending"]:
        raise Conflict(f"{user['email']} accepted the invitation already: they sign in with their password "
                       f"(a forgotten one: reset-password)", code="INVITATION_ACCEPTED")
    row, link = one_time_links.new_link(base_url, user_id, account_id, "invite")
    account = cast(Row, await account_store.get_account(db, account_id))  # the caller's account: it exists
    mail = mail_out.invitation(box, account, to=user["email"], url=link["url"],
                               expires_at=link["expiresAt"])  # None without SMTP
    await mail_store.insert_links_with_mail(db, [(row, mail)])  # the earlier link dies
    return {**user, "signInUrl": link["url"], "signInExpiresAt": link["expiresAt"],
            "invitationEmailed": mail is not None}


async def update(db: Store, account_id: str, user_id: str, *, changes: Mapping[str, Any], by: Mapping[str, Any] | None, actor_role: str | None) -> tuple[dict[str, Any], bool, int]:
    """Change a user's role, name, email (the login), active, available and/or capacity (automatic assignment:
    services/assignment.py) and/or emailNotifications (services/agent_mail.py) (changes: field -> value, as sent). Deactivating ends the
    user's sessions at once and unassigns their conversations that are not resolved. Returns (the user as it is
    now, whether it was deactivated now, how many conversations that unassigned).
    Invalid naming the field, NotFound USER_NOT_FOUND, Forbidden (an admin and an owner), Conflict
    LAST_OWNER (the account would have no active owner left)."""
    clean: dict[str, Any] = {}
    if "role" in changes:
        clean["role"] = _role(changes["role"])
    if "name" in changes:
        clean["name"] = _name(changes["name"])
    if "email" in changes:
        if not isinstance(changes["email"], str) or not changes["email"].strip():
            raise Invalid("email is required", field="email")
        clean["email"] = normalize_email(changes["email"])
    if "active" in changes:
        if not isinstance(changes["active"], bool):
            raise Invalid("active must be true or false", field="active")
        clean["active"] = int(changes["active"])
    if "available" in changes:
        clean["available"] = _available(changes["available"])
    if "capacity" in changes:
        clean["capacity"] = assignment.capacity_of(changes["capacity"])
    if "emailNotifications" in changes:
        clean.update(agent_mail.changes_of(changes["emailNotifications"]))
    if not clean and "emailNotifications" not in changes:
        raise Invalid("send at least one of role, name, email, active, available, capacity, emailNotifications")
    _require_manager(actor_role, clean.get("role"))
    row, changed, unassigned = await store.update_user(db, account_id, user_id, clean, by,
                                                       allows(actor_role, "owner"))
    if row is None:
        raise NotFound("no such user")
    return public_user(row), changed.get("active") == [1, 0], unassigned


def _available(value: Any) -> int:
    if not isinstance(value, bool):
        raise Invalid("available must be true or false", field="available")
    return int(value)


async def set_own_availability(db: Store, user: Mapping[str, Any], available: Any, by: Mapping[str, Any] | None) -> dict[str, Any]:
    """A user's own away switch (every role has it): available true or false. Returns the user as it is now."""
    row, _, _ = await store.update_user(db, user["account_id"], user["id"], {"available": _available(available)},
                                        by, allows(user.get("role"), "owner"))
    return public_user(cast(UserRow, row))  # the signed-in user: there


async def set_own_email_notifications(db: Store, user: Mapping[str, Any], form: Mapping[str, Any], by: Mapping[str, Any] | None) -> dict[str, Any]:
    """A user's own choice of Parley's mail to them (every role has it), from their page's checkboxes. Returns the
    user as it is now."""
    row, _, _ = await store.update_user(db, user["account_id"], user["id"], agent_mail.from_form(form), by,
                                        allows(user.get("role"), "owner"))
    return public_user(cast(UserRow, row))  # the signed-in user: there


async def remove(db: Store, account_id: str, user_id: str, *, by: Mapping[str, Any] | None, actor_role: str | None) -> int:
    """Remove a user from the account: their sessions in it and links end, their unresolved conversations are
    unassigned, their email and name are erased here (notes, messages and the audit keep the id: "Removed
    user"); the person's memberships of other accounts are untouched. Returns how many conversations were
    unassigned. NotFound USER_NOT_FOUND (also a removed one), Forbidden (not an owner or admin; an admin and an
    owner), Conflict LAST_OWNER (the account's last active owner, the caller themselves included)."""
    _require_manager(actor_role)
    return await store.remove_user(db, account_id, user_id, by, allows(actor_role, "owner"))
