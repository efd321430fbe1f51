"""Admin UI sessions, kept server-side so that they can be ended: sign-in starts one (the cookie carries
its random id), sign-out ends it, and a new API key or password ends the account's others."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from common.ids import iso, utcnow
from services import keys
from services.users import allows as users_allow, author_name
from storage import sessions as store
from storage.interface import Row, Store

# A signed-in UI user as handlers hold it: {id, account_id, email, role, ...} (storage/sessions.py's row, or
# view_as_user's)
User = Mapping[str, Any]

SESSION_DAYS = 7
VIEW_AS_MAX_ROLE = "admin"


async def start(db: Store, user: User, now: datetime | None = None, memberships: Sequence[User] = ()) -> str:
    """A new session for the UI user {id, account_id}; returns the id for the cookie (shown nowhere else).
    memberships: every user (the same person's in other accounts, user among them) the sign-in proved the
    password of: the session may switch between them (switch); with one or none, it stays where it is."""
    choices: Iterable[str] = [m["id"] for m in memberships] if len(memberships) > 1 else ()
    return await _insert(db, {"user_id": user["id"], "account_id": user["account_id"]}, now, choices=choices)


async def accounts(db: Store, session_id: str | None) -> list[Row]:
    """The accounts the session may switch to, {user_id, account_id, account_name, account_type, role}, by
    name ([] when it is in its only one)."""
    if not session_id:
        return []
    return await store.session_accounts(db, keys.hash_token(session_id), iso(utcnow()))


async def switch(db: Store, session_id: str | None, user_id: str) -> str | None:
    """Move the session to the membership user_id (one of accounts()): a new session id for the cookie (the
    old one ends, and the view-as sessions started from it), or None when it may not switch there."""
    new_id, now = keys.new_session_id(), utcnow()
    switched = await store.switch_session(db, keys.hash_token(session_id or ""), {
        "id_hash": keys.hash_token(new_id), "user_id": user_id, "created_at": iso(now),
        "expires_at": iso(now + timedelta(days=SESSION_DAYS))}, iso(now))
    return new_id if switched else None


async def start_view_as(db: Store, viewer: User, viewer_session_id: str | None, sub_id: str,
                        by: Mapping[str, Any] | None = None) -> str:
    """A "View as" session: the agency user ``viewer`` (their own session's user) in their agency's sub-account
    sub_id. It works only beside viewer_session_id, and only while that session lives, the viewer is active and
    keeps the role they have now (storage/sessions.py); the viewer acts there with at most that role, never
    above admin (view_as_role). Audited in the sub-account as view_as.started by ``by``."""
    return await _insert(db, {"user_id": viewer["id"], "account_id": sub_id, "viewer_user_id": viewer["id"],
                              "viewer_session_hash": session_hash(viewer_session_id),
                              "viewer_role": viewer.get("role") or "admin"}, None, by)


async def _insert(db: Store, row: Mapping[str, Any], now: datetime | None, by: Mapping[str, Any] | None = None,
                  choices: Iterable[str] = ()) -> str:
    session_id = keys.new_session_id()
    now = now or utcnow()
    await store.insert_session(db, {**row, "id_hash": keys.hash_token(session_id), "created_at": iso(now),
                                    "expires_at": iso(now + timedelta(days=SESSION_DAYS))}, by, choices)
    return session_id


def view_as_role(role: str) -> str:
    """What an agency user may do in a sub-account they view: their own role, never above admin (an owner's
    API key, signing secret and owners stay the sub-account's own)."""
    return role if not users_allow(role, VIEW_AS_MAX_ROLE) else VIEW_AS_MAX_ROLE


async def user_for(db: Store, session_id: str | None) -> Row | None:
    """The UI user {id, account_id, email, account_type} of a live session id, or None."""
    if not session_id:
        return None
    return await store.get_session_user(db, keys.hash_token(session_id), iso(utcnow()))


async def view_as_user(db: Store, view_id: str | None, viewer_session_id: str | None) -> dict[str, Any] | None:
    """The user of a live view-as session started from viewer_session_id: the agency user, in the sub-account
    (account_id, account_type, account_name are the sub-account's), with role capped by view_as_role, "viewer":
    {id, email, role (their own), account_id, account_name (the agency's)} and "label" ("alice@… as Corner
    Shop", what the sub-account's people see the viewer's work credited to). None otherwise."""
    if not view_id or not viewer_session_id:
        return None
    row = await store.get_view_as_user(db, keys.hash_token(view_id), keys.hash_token(viewer_session_id),
                                       iso(utcnow()))
    if row is None:
        return None
    viewer = {"id": row["id"], "email": row["email"], "name": row["name"], "role": row["role"],
              "account_id": row["viewer_account_id"], "account_name": row["viewer_account_name"]}
    return {"id": row["id"], "email": row["email"], "name": row["name"], "role": view_as_role(row["role"]),
            "account_id": row["account_id"], "account_type": row["account_type"],
            "account_name": row["account_name"], "viewer": viewer,
            "label": author_name(row["email"], row["account_name"], row["name"])}


async def end(db: Store, session_id: str | None, by: Mapping[str, Any] | None = None) -> None:
    """End a session (a view-as one is audited as view_as.ended by ``by``) and the view-as sessions started
    from it."""
    if session_id:
        await store.delete_session(db, keys.hash_token(session_id), by)


def session_hash(session_id: str | None) -> str | None:
    """What the store knows a session by (for "end the others, keep this one")."""
    return keys.hash_token(session_id) if session_id else None
