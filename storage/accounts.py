"""SQL for accounts, UI users and API keys."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from common.errors import Conflict, NotFound
from storage.audit import record_by
from storage.db import fetch_all, fetch_one, reads, writes
from storage.dialect import dialect_of
from storage.interface import Connection, Row
from storage.one_time_links import end_user_links_in_tx
from storage.sessions import end_account_sessions_in_tx, end_user_sessions_in_tx

_ACCOUNT_COLUMNS = ("id, name, email, type, parent_agency_id, rate_limit_per_minute, settings, "
                    "webhook_secret, previous_webhook_secret, previous_secret_expires_at, created_at")


_JSON = ("settings",)  # columns stored as JSON text


def email_taken(email: str) -> Conflict:
    return Conflict(f"an account with email {email} already exists", code="CONFLICT")


@writes
def insert_account(cx: Connection, account: Mapping[str, Any], user: Mapping[str, Any] | None, key_row: Mapping[str, Any], shown: str | None = None, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Insert an account with its owner user (optional) and its first API key, in one transaction.
    Conflict, writing nothing, when an account already has the email (checked here, in the writer, so that
    concurrent creations with one email give one account and no IntegrityError). A user of another account may
    have it: the owner user is a membership of the new account only (migration 0480).
    shown: what the answer shows once (the key, the password), encrypted by the caller; it is not stored
    with the account, only returned, so that an Idempotency-Key retry is answered with the same.
    Returns {id, name, email, type, parent_agency_id, created_at, shown}."""
    emails = (account["email"], user["email"] if user else account["email"])
    for email in sorted(set(emails)):  # concurrent creations with one email take turns (storage/dialect.py lock)
        dialect_of(cx).lock(cx, f"email:{email}")
    if cx.execute("SELECT 1 FROM accounts WHERE email = ?", (account["email"],)).fetchone():
        raise email_taken(account["email"])
    cx.execute(
        "INSERT INTO accounts (id, name, email, type, parent_agency_id, rate_limit_per_minute, settings,"
        " webhook_secret, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (account["id"], account["name"], account["email"], account["type"], account["parent_agency_id"],
         account.get("rate_limit_per_minute"), json.dumps(account.get("settings", {})),
         account["webhook_secret"], account["created_at"]))
    if user is not None:
        cx.execute("INSERT INTO users (id, account_id, email, password_hash, is_owner, role, created_at)"
                   " VALUES (?, ?, ?, ?, 1, 'owner', ?)",
                   (user["id"], account["id"], user["email"], user["password_hash"], account["created_at"]))
    _insert_key(cx, account["id"], key_row)
    if account["parent_agency_id"]:  # the agency's audit list has its sub-accounts' creation
        record_by(cx, by, account_id=account["parent_agency_id"], action="subaccount.created",
                  subject_id=account["id"], detail={"name": account["name"], "email": account["email"]})
    return {**{k: account[k] for k in ("id", "name", "email", "type", "parent_agency_id", "created_at")},
            "shown": shown}


def _insert_key(cx: Connection, account_id: str, key_row: Mapping[str, Any]) -> None:
    cx.execute("INSERT INTO api_keys (id, key_hash, account_id, name, prefix, created_at) VALUES (?, ?, ?, ?, ?, ?)",
               (key_row["id"], key_row["key_hash"], account_id, key_row["name"], key_row["prefix"],
                key_row["created_at"]))


_KEY_COLUMNS = "id, name, prefix, created_at, last_used_at"


@reads
def list_api_keys(cx: Connection, account_id: str) -> list[Row]:
    """The account's keys (never their hashes), oldest first."""
    return fetch_all(cx, f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE account_id = ? ORDER BY created_at, id",
                     (account_id,))


@writes
def add_api_key(cx: Connection, account_id: str, key_row: Mapping[str, Any], max_keys: int, shown: str | None, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One more live key for the account (the others stay live). Conflict when it has max_keys already.
    shown: the secret, encrypted by the caller, returned with the row (never stored with it)."""
    dialect_of(cx).lock(cx, f"api_keys:{account_id}")  # two creations at once cannot both pass the count
    count = cx.execute("SELECT COUNT(*) FROM api_keys WHERE account_id = ?", (account_id,)).fetchone()[0]
    if count >= max_keys:
        raise Conflict(f"this account has {count} API keys, the most it may have: revoke one first",
                       code="CONFLICT")
    _insert_key(cx, account_id, key_row)
    record_by(cx, by, account_id=account_id, action="api_key.created", subject_id=key_row["id"],
              detail={"name": key_row["name"], "prefix": key_row["prefix"]})
    key = cast(Row, fetch_one(cx, f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = ?", (key_row["id"],)))  # inserted above
    return {**key, "shown": shown}


@writes
def revoke_api_key(cx: Connection, account_id: str, key_id: str, by: Mapping[str, Any] | None = None) -> Row:
    """Delete one of the account's keys: dead at commit, in every process (KEYS_CHANNEL). NotFound for
    another account's or an unknown key; Conflict for the account's last key (it would lock the API out)."""
    dialect_of(cx).lock(cx, f"api_keys:{account_id}")
    row = fetch_one(cx, f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE account_id = ? AND id = ?", (account_id, key_id))
    if row is None:
        raise NotFound(f"no API key with id {key_id}", code="NOT_FOUND")
    if cx.execute("SELECT COUNT(*) FROM api_keys WHERE account_id = ?", (account_id,)).fetchone()[0] == 1:
        raise Conflict(f"API key {key_id} is the account's last key: create another one before revoking it",
                       code="CONFLICT")
    cx.execute("DELETE FROM api_keys WHERE account_id = ? AND id = ?", (account_id, key_id))
    record_by(cx, by, account_id=account_id, action="api_key.revoked", subject_id=key_id,
              detail={"name": row["name"], "prefix": row["prefix"]})
    dialect_of(cx).notify(cx, KEYS_CHANNEL)  # other processes forget the key at once
    return row


@writes
def mark_keys_used(cx: Connection, used: Mapping[str, str]) -> None:
    """last_used_at of keys ({key hash: time}), never moved back."""
    cx.executemany("UPDATE api_keys SET last_used_at = ? WHERE key_hash = ? AND (last_used_at IS NULL OR"
                   " last_used_at < ?)", [(at, key_hash, at) for key_hash, at in used.items()])


# Other server processes forget their cached keys when a key changes (storage/pg_listen.py listens).
KEYS_CHANNEL = "parley_keys"


@writes
def replace_api_key(cx: Connection, account_id: str, key_row: Mapping[str, Any], keep_session_hash: str | None = None, by: Mapping[str, Any] | None = None) -> None:
    """Delete every key of the account and insert the new one: the old key is dead at commit. The
    account's UI sessions end with it, but for the one that asked (keep_session_hash)."""
    cx.execute("DELETE FROM api_keys WHERE account_id = ?", (account_id,))
    record_by(cx, by, account_id=account_id, action="api_key.rotated", detail={"prefix": key_row["prefix"]})
    _insert_key(cx, account_id, key_row)
    end_account_sessions_in_tx(cx, account_id, keep_session_hash)
    dialect_of(cx).notify(cx, KEYS_CHANNEL)  # other processes forget the old key at once


@writes
def set_password(cx: Connection, user_id: str, password_hash: str, keep_session_hash: str | None, by: Mapping[str, Any] | None = None) -> None:
    """A new password for the UI user; the user's other sessions and unspent one-time links end in the same
    transaction (the account's other users keep theirs). Audited as password.changed by ``by``."""
    cx.execute("UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user_id))
    end_user_links_in_tx(cx, user_id)
    account_id = cx.execute("SELECT account_id FROM users WHERE id = ?", (user_id,)).fetchone()[0]
    record_by(cx, by, account_id=account_id, action="password.changed", subject_id=user_id)
    end_user_sessions_in_tx(cx, user_id, keep_session_hash)


@writes
def upgrade_password_hash(cx: Connection, user_id: str, old_hash: str, new_hash: str) -> None:
    """The same password's hash in today's scheme: not a password change (sessions and links live on), and
    only while the hash is still the one that was verified (a change made meanwhile wins)."""
    cx.execute("UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?", (new_hash, user_id, old_hash))


@reads
def count_accounts(cx: Connection) -> int:
    return cx.execute("SELECT COUNT(*) FROM accounts").fetchone()[0]


@reads
def get_account(cx: Connection, account_id: str) -> Row | None:
    return fetch_one(cx, f"SELECT {_ACCOUNT_COLUMNS} FROM accounts WHERE id = ?",
                     (account_id,), json_columns=_JSON)


@writes
def rename_account(cx: Connection, account_id: str, name: str, by: Mapping[str, Any] | None = None) -> Row | None:
    """The account's new name (the audit list keeps from and to); the account as it is now, None when there is no
    such account (nothing written)."""
    before = get_account.sync(cx, account_id)
    if before is None:
        return None
    if before["name"] != name:
        cx.execute("UPDATE accounts SET name = ? WHERE id = ?", (name, account_id))
        record_by(cx, by, account_id=account_id, action="account.renamed", detail={"name": [before["name"], name]})
    return get_account.sync(cx, account_id)


@reads
def get_account_by_email(cx: Connection, email: str) -> Row | None:
    return fetch_one(cx, f"SELECT {_ACCOUNT_COLUMNS} FROM accounts WHERE email = ?",
                     (email,), json_columns=_JSON)


@reads
def get_account_by_key_hash(cx: Connection, key_hash: str) -> Row | None:
    return fetch_one(cx, f"SELECT {', '.join('a.' + c.strip() for c in _ACCOUNT_COLUMNS.split(','))}"
                     " FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = ?",
                     (key_hash,), json_columns=_JSON)


@reads
def get_key_prefix(cx: Connection, account_id: str) -> Row | None:
    """The account's oldest live key (what GET /v1/account shows as its key)."""
    return fetch_one(cx, "SELECT prefix, created_at FROM api_keys WHERE account_id = ? ORDER BY created_at, id LIMIT 1",
                     (account_id,))


@reads
def get_owner_user_id(cx: Connection, account_id: str) -> str | None:
    """The account's first owner (the user it was made with), or while that one is removed, its oldest owner."""
    row = cx.execute("SELECT id FROM users WHERE account_id = ? AND removed_at IS NULL ORDER BY is_owner DESC,"
                     " CASE role WHEN 'owner' THEN 0 ELSE 1 END, created_at LIMIT 1", (account_id,)).fetchone()
    return row[0] if row else None


@reads
def get_users_by_email(cx: Connection, email: str) -> list[Row]:
    """Every active membership of the email (a deactivated or removed one signs in no more), each {id,
    account_id, account_name, email, password_hash}, oldest first."""
    return fetch_all(cx, "SELECT u.id, u.account_id, a.name AS account_name, u.email, u.password_hash FROM users u"
                         " JOIN accounts a ON a.id = u.account_id WHERE u.email = ? AND u.active = 1"
                         " ORDER BY u.created_at, u.id", (email,))


@reads
def get_user(cx: Connection, user_id: str) -> Row | None:
    """{id, account_id, email, role, account_type}: the account's type decides which UI pages it has (Agency)."""
    return fetch_one(cx, "SELECT u.id, u.account_id, u.email, u.role, a.type AS account_type FROM users u"
                     " JOIN accounts a ON a.id = u.account_id WHERE u.id = ?", (user_id,))


@reads
def get_password_hash(cx: Connection, user_id: str) -> str | None:
    row = cx.execute("SELECT password_hash FROM users WHERE id = ?", (user_id,)).fetchone()
    return row[0] if row else None


def get_settings_in_tx(cx: Connection, account_id: str) -> dict[str, Any] | None:
    """The account's settings object (None for an unknown account)."""
    row = cx.execute("SELECT settings FROM accounts WHERE id = ?", (account_id,)).fetchone()
    return json.loads(row[0]) if row else None


def set_settings_in_tx(cx: Connection, account_id: str, settings: Mapping[str, Any]) -> None:
    cx.execute("UPDATE accounts SET settings = ? WHERE id = ?", (json.dumps(settings), account_id))


@writes
def save_settings(cx: Connection, account_id: str, values: Mapping[str, Any], merged_from: Mapping[str, Any],
                  by: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Set these settings of the account (values: name -> the new value, None removes it) in one transaction, with the
    audit entry; returns the whole settings object. merged_from: for each setting whose new value the caller merged
    into the stored one (a merge patch: services/accounts.py update_settings), the stored value it merged into; when
    another write changed one of them since, nothing is written and None is returned (the caller merges again), so
    that concurrent PATCHes never lose an update. The account's lock is held to COMMIT (PostgreSQL)."""
    dialect_of(cx).lock(cx, f"settings:{account_id}")
    settings = cast(dict[str, Any], get_settings_in_tx(cx, account_id))  # the caller's account: it exists
    if any(settings.get(name) != stored for name, stored in merged_from.items()):
        return None
    record_by(cx, by, account_id=account_id, action="settings.updated", detail={"changed": sorted(values)})
    for name, value in values.items():
        if value is None:
            settings.pop(name, None)
        else:
            settings[name] = value
    set_settings_in_tx(cx, account_id, settings)
    return settings


def delivery_context_in_tx(cx: Connection, account_id: str) -> dict[str, Any] | None:
    """What an outbound message needs inside its transaction: {settings, owner_user_id} (the owner is the
    payload's userId, docs/api.md#webhook-delivery), or None for an unknown account."""
    row = cx.execute("SELECT settings, (SELECT id FROM users WHERE account_id = a.id"
                     " ORDER BY is_owner DESC, created_at LIMIT 1) FROM accounts a WHERE id = ?",
                     (account_id,)).fetchone()
    return {"settings": json.loads(row[0]), "owner_user_id": row[1]} if row else None


@writes
def rotate_webhook_secret(cx: Connection, account_id: str, secret: str, previous_expires_at: str | None, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``secret`` (encrypted) becomes the signing secret; the current one becomes the previous one, which
    signs too until previous_expires_at. Returns {secret, previous_expires_at} as stored; NotFound for
    an unknown account."""
    if not cx.execute("UPDATE accounts SET previous_webhook_secret = webhook_secret, webhook_secret = ?,"
                      " previous_secret_expires_at = ? WHERE id = ?",
                      (secret, previous_expires_at, account_id)).rowcount:
        raise NotFound("account not found")
    record_by(cx, by, account_id=account_id, action="webhook_secret.rotated")
    return {"secret": secret, "previous_expires_at": previous_expires_at}


@writes
def set_rate_limit(cx: Connection, account_id: str, per_minute: int | None, by: Mapping[str, Any] | None = None) -> None:
    """The account's own requests-per-minute limit (None: the server's --rate-limit), audited; other processes
    forget their cached keys (the limit is cached with them)."""
    cx.execute("UPDATE accounts SET rate_limit_per_minute = ? WHERE id = ?", (per_minute, account_id))
    record_by(cx, by, account_id=account_id, action="account.rate_limit_changed", detail={"perMinute": per_minute})
    dialect_of(cx).notify(cx, KEYS_CHANNEL)
