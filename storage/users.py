"""SQL for an account's UI users and their roles (migration 0221): invite, list, change role, name and
active, remove; each change audited in its own transaction (storage.audit). A user row is one person's membership
of one account (migration 0480): its email is unique in the account only; a removed user keeps the row (ids in
notes, messages, conversations and the audit point at it) with email, name and password erased."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from common.errors import Conflict, Forbidden, NotFound
from common.ids import now_iso
from storage.audit import record_by
from storage.conversation_status import unassign_user_in_tx
from storage.db import fetch_all, fetch_one, reads, writes
from storage.interface import Connection, Row
from storage.mail import COLUMNS as MAIL_COLUMNS, forget_recipient_in_tx, queue_in_tx
from storage.one_time_links import insert_link
from storage.rows import UserRow
from storage.sessions import end_user_sessions_in_tx, end_view_as_sessions_in_tx
from storage.user_states import INVITED, REMOVED

# invitation_pending: invited and the link not used yet (issue 43 §11: such a user is not "Active" on the page).
_COLUMNS = (f"id, account_id, email, name, role, active, created_at, available, capacity, last_seen_at,"
            f" email_new_conversation, email_handoff, email_assigned,"
            f" CASE WHEN password_hash = '{INVITED}' THEN 1 ELSE 0 END AS invitation_pending")


# Columns the audit shows as true/false (stored 0/1).
_BOOLEANS = ("active", "available", *MAIL_COLUMNS.values())
# The audit names a change as the API does (the agents' mail: emailNotifications.newConversation, not its column).
_AUDIT_NAMES = {column: f"emailNotifications.{kind}" for kind, column in MAIL_COLUMNS.items()}

REMOVED_LABEL = "Removed user"  # what pages show for a removed user (their email and name are erased)


def label_sql(user: str) -> str:
    """The SQL of how a joined user (table alias ``user``) is shown: their email; "Removed user" once removed;
    NULL when no user is joined."""
    return f"COALESCE({user}.email, CASE WHEN {user}.id IS NOT NULL THEN '{REMOVED_LABEL}' END)"


def author_sql(item: str, user: str = "u", account: str = "aa") -> tuple[str, str]:
    """The author columns of an item (a note, a message: table alias ``item``, with account_id and
    author_user_id) written by a UI user: author_email (see label_sql), author_user_name (their name, if they gave
    one), and author_as, the name of the item's account when the author is an agency user who viewed it as that
    account (None otherwise); and the joins they need."""
    return (f"{label_sql(user)} AS author_email, {user}.name AS author_user_name,"
            f" CASE WHEN {user}.account_id <> {item}.account_id THEN {account}.name END"
            f" AS author_as", f" LEFT JOIN users {user} ON {user}.id = {item}.author_user_id"
            f" LEFT JOIN accounts {account} ON {account}.id = {item}.account_id"
            f" AND {user}.account_id <> {item}.account_id")
LAST_OWNER = "the account must keep an active owner: make another user owner first"
OWNERS_ONLY = "only an owner can change an owner or make a user owner"


def email_taken(email: str) -> Conflict:
    """Only ever about the caller's own account: whether the address is a user of another account is not told."""
    return Conflict(f"email {email} is already a user of this account", code="CONFLICT", field="email")


def user_not_found() -> NotFound:
    return NotFound("no such user in this account", code="USER_NOT_FOUND")


def _get_in_tx(cx: Connection, account_id: str, user_id: str) -> Row | None:
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM users WHERE id = ? AND account_id = ? AND removed_at IS NULL",
                     (user_id, account_id))


def _email_taken_in_account(cx: Connection, account_id: str, email: str, user_id: str | None = None) -> bool:
    return cx.execute("SELECT 1 FROM users WHERE account_id = ? AND email = ? AND id IS DISTINCT FROM ?",
                      (account_id, email, user_id)).fetchone() is not None


@reads
def get_user(cx: Connection, account_id: str, user_id: str) -> UserRow | None:
    """The account's user with this id, or None (also for another account's)."""
    return cast("UserRow | None", _get_in_tx(cx, account_id, user_id))


@reads
def list_users(cx: Connection, account_id: str) -> list[UserRow]:
    """Every user of the account (the removed ones are not), owners first, then by when they were added."""
    return cast("list[UserRow]", fetch_all(
        cx, f"SELECT {_COLUMNS} FROM users WHERE account_id = ? AND removed_at IS NULL ORDER BY"
            " CASE role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, created_at, id", (account_id,)))


@writes
def insert_user(cx: Connection, user: Mapping[str, Any], link: Mapping[str, Any], shown: str | None, by: Mapping[str, Any] | None, mail: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Add an invited user with its one-time sign-in link (and the mail that carries it, storage/mail.py), audited,
    in one transaction. Conflict (naming
    email) when a user of this account has the email (another account's users are not looked at: the same
    person may be invited to many). shown: the link's URL, encrypted by the caller and only returned (an
    Idempotency-Key retry gets the same). Returns the user with "shown"."""
    if _email_taken_in_account(cx, user["account_id"], user["email"]):
        raise email_taken(user["email"])
    cx.execute("INSERT INTO users (id, account_id, email, name, role, active, password_hash, is_owner, created_at)"
               " VALUES (?, ?, ?, ?, ?, 1, ?, 0, ?)",
               (user["id"], user["account_id"], user["email"], user["name"], user["role"], user["password_hash"],
                user["created_at"]))
    insert_link.sync(cx, link)
    if mail is not None:
        queue_in_tx(cx, mail)
    record_by(cx, by, account_id=user["account_id"], action="user.invited", subject_id=user["id"],
              detail={"email": user["email"], "role": user["role"]})
    return {**cast(Row, _get_in_tx(cx, user["account_id"], user["id"])), "shown": shown}  # inserted just above


def _move_login_in_tx(cx: Connection, before: Mapping[str, Any], email: str) -> None:
    """A user's new login: refused when another user of the account has it; the account whose email was this
    user's login (its first owner: the ops commands' --email) follows it unless another account has that email
    (accounts' emails stay unique on the server). Sessions and links are the user's, by id: they stay valid."""
    if _email_taken_in_account(cx, before["account_id"], email, before["id"]):
        raise email_taken(email)
    _follow_account_email_in_tx(cx, before["account_id"], before["email"], email)


def _follow_account_email_in_tx(cx: Connection, account_id: str, old: str | None, new: str | None) -> None:
    """The account's email (the ops commands' --email) was ``old``, a user's login that became ``new``."""
    if not cx.execute("SELECT 1 FROM accounts WHERE email = ?", (new,)).fetchone():
        cx.execute("UPDATE accounts SET email = ? WHERE id = ? AND email = ?", (new, account_id, old))


def _refuse_owner_change_in_tx(cx: Connection, account_id: str, before: Mapping[str, Any], after: Mapping[str, Any] | None, may_touch_owners: bool, field: str | None) -> None:
    """Forbidden when may_touch_owners is False and the user is or becomes an owner; Conflict LAST_OWNER when the
    account would be left without an active owner (after: the user as it would be, None when removed)."""
    if not may_touch_owners and (before["role"] == "owner" or (after or {}).get("role") == "owner"):
        raise Forbidden(OWNERS_ONLY, field="role")
    if before["role"] == "owner" and before["active"] and (not after or after["role"] != "owner"
                                                           or not after["active"]):
        others = cx.execute("SELECT COUNT(*) FROM users WHERE account_id = ? AND role = 'owner' AND active = 1"
                            " AND id <> ?", (account_id, before["id"])).fetchone()[0]
        if not others:
            raise Conflict(f"{field}: {LAST_OWNER}" if field else LAST_OWNER, code="LAST_OWNER", field=field)


def _end_membership_in_tx(cx: Connection, account_id: str, user_id: str, unassign: bool = True) -> int:
    """The user signs in no more: their sessions (view-as ones included) and unspent links end; with unassign,
    their conversations that are not resolved return to the queue. Returns how many were unassigned."""
    end_user_sessions_in_tx(cx, user_id)
    cx.execute("DELETE FROM one_time_links WHERE user_id = ? AND used_at IS NULL", (user_id,))
    return unassign_user_in_tx(cx, account_id, user_id) if unassign else 0


@writes
def update_user(cx: Connection, account_id: str, user_id: str, changes: Mapping[str, Any], by: Mapping[str, Any] | None, may_touch_owners: bool) -> tuple[UserRow | None, dict[str, Any], int]:
    """Set role, name, email and/or active of the account's user in one transaction. Deactivating ends the user's
    sessions and unspent links in it and unassigns their conversations that are not resolved (the audit
    entry counts them: unassignedConversations). Refuses (nothing changed): NotFound for another account's or an
    unknown user; Forbidden when may_touch_owners is False and the user is or would become
    an owner; Conflict LAST_OWNER when the account would be left without an active owner.
    Returns (user as it is now, {field: [from, to]} of what changed, how many conversations were unassigned)."""
    before = _get_in_tx(cx, account_id, user_id)
    if before is None:
        raise user_not_found()
    after = {**before, **changes}
    _refuse_owner_change_in_tx(cx, account_id, before, after, may_touch_owners,
                               "role" if "role" in changes else "active")
    changed = {k: [before[k], v] for k, v in changes.items() if before[k] != v}
    if "email" in changed:
        _move_login_in_tx(cx, before, changes["email"])
    unassigned = 0
    if changed:
        columns = ", ".join(f"{column} = ?" for column in changed)
        cx.execute(f"UPDATE users SET {columns} WHERE id = ? AND account_id = ?",
                   (*(v[1] for v in changed.values()), user_id, account_id))
        shown: dict[str, Any] = {_AUDIT_NAMES.get(k, k): [bool(v) for v in pair] if k in _BOOLEANS else pair
                                 for k, pair in changed.items()}
        if "role" in changed:  # a sub-account viewed as this user would keep what the old role gave
            end_view_as_sessions_in_tx(cx, user_id)
        if not after["active"]:  # deactivated now: nobody signs in to answer theirs, back to the queue
            unassigned = _end_membership_in_tx(cx, account_id, user_id, unassign="active" in changed)
            if unassigned:
                shown["unassignedConversations"] = unassigned
        record_by(cx, by, account_id=account_id, action="user.updated", subject_id=user_id,
                  detail={"email": before["email"], **shown})
    return cast("UserRow | None", _get_in_tx(cx, account_id, user_id)), changed, unassigned


@writes
def remove_user(cx: Connection, account_id: str, user_id: str, by: Mapping[str, Any] | None, may_touch_owners: bool) -> int:
    """Remove the account's user in one transaction: their sessions and links end, their unresolved
    conversations are unassigned, and their email and name are erased in this account (the row stays for the ids
    that notes, messages, conversations and the audit keep; earlier audit entries lose the email they named,
    an opt-out set by hand forgets who set it, the mails Parley queued to them go). The account's email follows to an owner when it was theirs.
    The same refusals as update_user: NotFound, Forbidden (an owner, without may_touch_owners), Conflict
    LAST_OWNER. Audited as user.removed with the id only. Returns how many conversations were unassigned."""
    before = _get_in_tx(cx, account_id, user_id)
    if before is None:
        raise user_not_found()
    _refuse_owner_change_in_tx(cx, account_id, before, None, may_touch_owners, None)
    unassigned = _end_membership_in_tx(cx, account_id, user_id)
    cx.execute("UPDATE users SET email = NULL, name = NULL, password_hash = ?, active = 0, removed_at = ?"
               " WHERE id = ? AND account_id = ?", (REMOVED, now_iso(), user_id, account_id))
    if before["email"]:
        owner = cx.execute("SELECT email FROM users WHERE account_id = ? AND role = 'owner' AND active = 1"
                           " AND email IS NOT NULL ORDER BY created_at, id LIMIT 1", (account_id,)).fetchone()
        if owner:
            _follow_account_email_in_tx(cx, account_id, before["email"], owner[0])
        cx.execute("UPDATE contacts SET opt_out_by = NULL WHERE account_id = ? AND opt_out_via = 'user'"
                   " AND opt_out_by = ?", (account_id, before["email"]))
        forget_recipient_in_tx(cx, account_id, before["email"], now_iso())
    _erase_from_audit_in_tx(cx, account_id, user_id)
    record_by(cx, by, account_id=account_id, action="user.removed", subject_id=user_id,
              detail={"role": before["role"], **({"unassignedConversations": unassigned} if unassigned else {})})
    return unassigned


def _erase_from_audit_in_tx(cx: Connection, account_id: str, user_id: str) -> None:
    """The audit keeps the user's id only: the email it showed as who did a thing (in the account and, for an
    agency's user, its sub-accounts) and the email and name its entries about the user named."""
    accounts = "account_id IN (SELECT id FROM accounts WHERE id = ? OR parent_agency_id = ?)"
    cx.execute(f"UPDATE audit_log SET actor_label = NULL WHERE {accounts} AND actor = ?",
               (account_id, account_id, user_id))
    for entry_id, detail in cx.execute(f"SELECT id, detail FROM audit_log WHERE {accounts} AND subject_id = ?"
                                       " AND detail IS NOT NULL", (account_id, account_id, user_id)).fetchall():
        kept = {k: v for k, v in json.loads(detail).items() if k not in ("email", "name")}
        cx.execute("UPDATE audit_log SET detail = ? WHERE id = ?",
                   (json.dumps(kept, separators=(",", ":"), sort_keys=True), entry_id))
