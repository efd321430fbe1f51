"""SQL for one-time links (migration 0170): stored hashed, spent once, dead after their expiry."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from storage.db import fetch_one, reads, writes
from storage.interface import Connection, Row
from storage.sessions import end_user_sessions_in_tx


@writes
def insert_link(cx: Connection, link: Mapping[str, Any]) -> None:
    """Store a new link; the user's earlier unspent links of the same purpose die with it (the newest one
    is the only one that works), and expired links of anyone are deleted on the way."""
    cx.execute("DELETE FROM one_time_links WHERE expires_at <= ?", (link["created_at"],))
    cx.execute("DELETE FROM one_time_links WHERE user_id = ? AND purpose = ? AND used_at IS NULL",
               (link["user_id"], link["purpose"]))
    cx.execute("INSERT INTO one_time_links (token_hash, purpose, user_id, account_id, created_at, expires_at)"
               " VALUES (?, ?, ?, ?, ?, ?)",
               (link["token_hash"], link["purpose"], link["user_id"], link["account_id"], link["created_at"],
                link["expires_at"]))


def end_user_links_in_tx(cx: Connection, user_id: str) -> None:
    """A password change, by any path, kills the user's unspent links of every kind: each one sets the
    password, so a reset link issued before the change would undo it (issue 36 §11)."""
    cx.execute("DELETE FROM one_time_links WHERE user_id = ? AND used_at IS NULL", (user_id,))


_LIVE = ("SELECT l.purpose, l.user_id, l.account_id, l.expires_at, u.email, u.name, u.role, a.type AS account_type,"
         " a.name AS account_name"
         " FROM one_time_links l JOIN users u ON u.id = l.user_id JOIN accounts a ON a.id = l.account_id"
         " WHERE l.token_hash = ? AND l.purpose = ? AND l.used_at IS NULL AND l.expires_at > ? AND u.active = 1")


@reads
def get_live_link(cx: Connection, token_hash: str, purpose: str, now: str) -> Row | None:
    """{purpose, user_id, account_id, expires_at, email, account_type} of an unspent, unexpired link, or None."""
    return fetch_one(cx, _LIVE, (token_hash, purpose, now))


@writes
def spend_link(cx: Connection, token_hash: str, purpose: str, now: str, password_hash: str) -> dict[str, Any] | None:
    """Spend the link and set its user's password in one transaction, ending every session of that user:
    of two uses at once, one wins. Returns the link's user {id, account_id, email, account_type}, or None
    when the link is spent, expired or unknown (nothing changed)."""
    link = fetch_one(cx, _LIVE, (token_hash, purpose, now))
    if link is None or not cx.execute("UPDATE one_time_links SET used_at = ? WHERE token_hash = ? AND used_at IS NULL",
                                      (now, token_hash)).rowcount:
        return None
    cx.execute("UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, link["user_id"]))
    end_user_links_in_tx(cx, link["user_id"])
    end_user_sessions_in_tx(cx, link["user_id"])
    return {"id": link["user_id"], "account_id": link["account_id"], "email": link["email"], "name": link["name"],
            "role": link["role"], "account_type": link["account_type"], "account_name": link["account_name"]}
