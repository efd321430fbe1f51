"""SQL for an account's UI users and their roles (migration 0221): invite, list, change role, name and
active; each change audited in its own transaction (storage.audit)."""
from common.errors import Conflict, Forbidden, NotFound
from storage.audit import record_by
from storage.conversation_status import unassign_user_in_tx
from storage.db import fetch_all, fetch_one, reads, writes
from storage.one_time_links import insert_link
from storage.sessions import end_user_sessions_in_tx, end_view_as_sessions_in_tx

INVITED = "!invited"  # the password hash of a user who has not used the invitation: matches no password
# invitation_pending: invited and the link not used yet (issue 43 §11: such a user is not "Active" on the page).
_COLUMNS = (f"id, account_id, email, name, role, active, created_at,"
            f" CASE WHEN password_hash = '{INVITED}' THEN 1 ELSE 0 END AS invitation_pending")


def author_sql(item, user="u", account="aa"):
    """The author columns of an item (a note, a message: table alias ``item``, with account_id and
    author_user_id) written by a UI user: author_email, author_user_name (their name, if they gave one), and
    author_as, the name of the item's account when the author is an agency user who viewed it as that account (None
    otherwise); and the joins they need."""
    return (f"{user}.email AS author_email, {user}.name AS author_user_name, CASE WHEN {user}.account_id <> {item}.account_id THEN {account}.name END"
            f" AS author_as", f" LEFT JOIN users {user} ON {user}.id = {item}.author_user_id"
            f" LEFT JOIN accounts {account} ON {account}.id = {item}.account_id"
            f" AND {user}.account_id <> {item}.account_id")
LAST_OWNER = "the account must keep an active owner: make another user owner first"
OWNERS_ONLY = "only an owner can change an owner or make a user owner"


def email_taken(email):
    return Conflict(f"email {email} is already a user or an account", code="CONFLICT", field="email")


def user_not_found():
    return NotFound("no such user in this account", code="USER_NOT_FOUND")


def _get_in_tx(cx, account_id, user_id):
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM users WHERE id = ? AND account_id = ?", (user_id, account_id))


@reads
def get_user(cx, account_id, user_id):
    """The account's user with this id, or None (also for another account's)."""
    return _get_in_tx(cx, account_id, user_id)


@reads
def list_users(cx, account_id):
    """Every user of the account, owners first, then by when they were added (accounts have a few)."""
    return fetch_all(cx, f"SELECT {_COLUMNS} FROM users WHERE account_id = ? ORDER BY"
                         " CASE role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, created_at, id",
                     (account_id,))


@writes
def insert_user(cx, user, link, shown, by):
    """Add an invited user with its one-time sign-in link, audited, in one transaction. Conflict (naming
    email) when a user or an account has the email. shown: the link's URL, encrypted by the caller and
    only returned (an Idempotency-Key retry gets the same). Returns the user with "shown"."""
    if cx.execute("SELECT 1 FROM users WHERE email = ? UNION ALL SELECT 1 FROM accounts WHERE email = ?",
                  (user["email"], user["email"])).fetchone():
        raise email_taken(user["email"])
    cx.execute("INSERT INTO users (id, account_id, email, name, role, active, password_hash, is_owner, created_at)"
               " VALUES (?, ?, ?, ?, ?, 1, ?, 0, ?)",
               (user["id"], user["account_id"], user["email"], user["name"], user["role"], user["password_hash"],
                user["created_at"]))
    insert_link.sync(cx, link)
    record_by(cx, by, account_id=user["account_id"], action="user.invited", subject_id=user["id"],
              detail={"email": user["email"], "role": user["role"]})
    return {**_get_in_tx(cx, user["account_id"], user["id"]), "shown": shown}


def _move_login_in_tx(cx, before, email):
    """A user's new login: refused when another user or account has it; the account whose email was this user's
    login (its first owner: the ops commands' --email) follows it. Sessions and links are the user's, by id: they
    stay valid."""
    if cx.execute("SELECT 1 FROM users WHERE email = ? AND id <> ? UNION ALL "
                  "SELECT 1 FROM accounts WHERE email = ? AND NOT (id = ? AND email = ?)",
                  (email, before["id"], email, before["account_id"], before["email"])).fetchone():
        raise email_taken(email)
    cx.execute("UPDATE accounts SET email = ? WHERE id = ? AND email = ?", (email, before["account_id"],
                                                                           before["email"]))


@writes
def update_user(cx, account_id, user_id, changes, by, may_touch_owners):
    """Set role, name, email and/or active of the account's user in one transaction. Deactivating ends the user's
    sessions and unspent links in it and unassigns their conversations that are not resolved (the audit
    entry counts them: unassignedConversations). Refuses (nothing changed): NotFound for another account's or an
    unknown user; Forbidden when may_touch_owners is False and the user is or would become
    an owner; Conflict LAST_OWNER when the account would be left without an active owner.
    Returns (user as it is now, {field: [from, to]} of what changed, how many conversations were unassigned)."""
    before = _get_in_tx(cx, account_id, user_id)
    if before is None:
        raise user_not_found()
    if not may_touch_owners and (before["role"] == "owner" or changes.get("role") == "owner"):
        raise Forbidden(OWNERS_ONLY, field="role")
    after = {**before, **changes}
    if before["role"] == "owner" and before["active"] and (after["role"] != "owner" or not after["active"]):
        others = cx.execute("SELECT COUNT(*) FROM users WHERE account_id = ? AND role = 'owner' AND active = 1"
                            " AND id <> ?", (account_id, user_id)).fetchone()[0]
        if not others:
            field = "role" if "role" in changes else "active"
            raise Conflict(f"{field}: {LAST_OWNER}", code="LAST_OWNER", field=field)
    changed = {k: [before[k], v] for k, v in changes.items() if before[k] != v}
    if "email" in changed:
        _move_login_in_tx(cx, before, changes["email"])
    unassigned = 0
    if changed:
        columns = ", ".join(f"{column} = ?" for column in changed)
        cx.execute(f"UPDATE users SET {columns} WHERE id = ? AND account_id = ?",
                   (*(v[1] for v in changed.values()), user_id, account_id))
        shown = {k: [bool(v) for v in pair] if k == "active" else pair for k, pair in changed.items()}
        if "role" in changed:  # a sub-account viewed as this user would keep what the old role gave
            end_view_as_sessions_in_tx(cx, user_id)
        if not after["active"]:
            end_user_sessions_in_tx(cx, user_id)
            cx.execute("DELETE FROM one_time_links WHERE user_id = ? AND used_at IS NULL", (user_id,))
        if "active" in changed and not after["active"]:  # nobody signs in to answer them: back to the queue
            unassigned = unassign_user_in_tx(cx, account_id, user_id)
            if unassigned:
                shown["unassignedConversations"] = unassigned
        record_by(cx, by, account_id=account_id, action="user.updated", subject_id=user_id,
                  detail={"email": before["email"], **shown})
    return _get_in_tx(cx, account_id, user_id), changed, unassigned
