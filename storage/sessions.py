"""SQL for admin UI sessions (migration 0010): started at sign-in, ended by sign-out or a credential change.

A "View as" session (migration 0436) is the agency user's (user_id) in a sub-account of their agency
(account_id), started from their own session (viewer_session_hash) with the role they had then (viewer_role):
it is live only while that session is, the user is active, keeps that role and the sub-account is still
their agency's. Every read below checks this, so nothing else has to end it in time.

A session is in one account at a time (its user_id, a membership: storage/users.py). session_accounts (migration
0480) holds the memberships its sign-in proved the password of, which the account switcher offers: switching
starts a new session in the chosen one (switch_session) and ends this one."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from storage.audit import record_by
from storage.db import fetch_all, fetch_one, reads, writes
from storage.interface import Connection, Row

# A view-as row s (joined with its viewer u and the viewer's own session p) that is still allowed to work.
_VIEW_AS_HOLDS = ("p.expires_at > ? AND p.user_id = s.user_id AND p.viewer_session_hash IS NULL"
                  " AND COALESCE(u.role, 'admin') = s.viewer_role")


@writes
def insert_session(cx: Connection, session: Mapping[str, Any], by: Mapping[str, Any] | None = None, choices: Iterable[str] = ()) -> None:
    """Store a new session; sessions past their expiry (of anyone) are deleted on the way. A view-as one is
    audited by ``by`` as view_as.started, in the sub-account and in the agency. choices: the user ids of the
    memberships it may switch to (its own among them), when there is more than its own."""
    cx.execute("DELETE FROM sessions WHERE expires_at <= ?", (session["created_at"],))
    cx.execute("INSERT INTO sessions (id_hash, user_id, account_id, created_at, expires_at, viewer_user_id,"
               " viewer_session_hash, viewer_role) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (session["id_hash"], session["user_id"], session["account_id"], session["created_at"],
                session["expires_at"], session.get("viewer_user_id"), session.get("viewer_session_hash"),
                session.get("viewer_role")))
    cx.executemany("INSERT INTO session_accounts (session_hash, user_id) VALUES (?, ?)",
                   [(session["id_hash"], user_id) for user_id in choices])
    if session.get("viewer_session_hash"):
        _audit_view_as(cx, by, "view_as.started", session["user_id"], session["account_id"])


def _audit_view_as(cx: Connection, by: Mapping[str, Any] | None, action: str, user_id: str, sub_id: str) -> None:
    agency_id = cx.execute("SELECT account_id FROM users WHERE id = ?", (user_id,)).fetchone()[0]
    record_by(cx, by, account_id=sub_id, action=action, subject_id=user_id, detail={"agencyId": agency_id})
    record_by(cx, by, account_id=agency_id, action=action, subject_id=sub_id)


@reads
def get_session_user(cx: Connection, id_hash: str, now: str) -> Row | None:
    """The UI user {id, account_id, email, name, role, available, account_type, email_new_conversation, email_handoff,
    email_assigned (the mail they chose: services/agent_mail.py), account_name, account_choices (how many
    memberships the switcher offers; 0 or 1: none)} of a live session of an active user, or None (the role and the account's type decide which UI pages it has). A view-as session
    is not one (get_view_as_user reads those)."""
    return fetch_one(cx, "SELECT u.id, u.account_id, u.email, u.name, u.role, u.available, a.type AS account_type,"
                         " u.email_new_conversation, u.email_handoff, u.email_assigned,"
                         " a.name AS account_name, (SELECT COUNT(*) FROM session_accounts c"
                         " WHERE c.session_hash = s.id_hash) AS account_choices FROM sessions s"
                         " JOIN users u ON u.id = s.user_id JOIN accounts a ON a.id = u.account_id"
                         " WHERE s.id_hash = ? AND s.expires_at > ? AND u.active = 1"
                         " AND s.viewer_session_hash IS NULL", (id_hash, now))


@reads
def get_view_as_user(cx: Connection, id_hash: str, viewer_session_hash: str, now: str) -> Row | None:
    """The agency user of a live view-as session started from viewer_session_hash, in the sub-account it views:
    {id, email, name, role (their own), account_id, account_type, account_name (the sub-account's),
    viewer_account_id, viewer_account_name (the agency's)}, or None."""
    return fetch_one(cx, "SELECT u.id, s.account_id, u.email, u.name, COALESCE(u.role, 'admin') AS role,"
                         " a.type AS account_type, a.name AS account_name, u.account_id AS viewer_account_id,"
                         " va.name AS viewer_account_name FROM sessions s"
                         " JOIN sessions p ON p.id_hash = s.viewer_session_hash"
                         " JOIN users u ON u.id = s.user_id JOIN accounts a ON a.id = s.account_id"
                         " JOIN accounts va ON va.id = u.account_id"
                         " WHERE s.id_hash = ? AND s.viewer_session_hash = ? AND s.expires_at > ? AND u.active = 1"
                         f" AND a.parent_agency_id = u.account_id AND {_VIEW_AS_HOLDS}",
                     (id_hash, viewer_session_hash, now, now))


@reads
def live_sessions(cx: Connection, id_hashes: Sequence[str], now: str) -> dict[str, str]:
    """{id_hash: the user's role now} of the ones among id_hashes that are sessions still live at ``now``."""
    live: dict[str, str] = {}
    for start in range(0, len(id_hashes), 500):
        chunk = id_hashes[start:start + 500]
        live.update((r[0], r[1]) for r in cx.execute(
            "SELECT s.id_hash, COALESCE(u.role, 'admin') FROM sessions s JOIN users u ON u.id = s.user_id"
            " LEFT JOIN sessions p ON p.id_hash = s.viewer_session_hash"
            f" WHERE s.id_hash IN ({', '.join('?' * len(chunk))}) AND s.expires_at > ? AND u.active = 1"
            f" AND (s.viewer_session_hash IS NULL OR ({_VIEW_AS_HOLDS}))", (*chunk, now, now)))
    return live


@writes
def delete_session(cx: Connection, id_hash: str, by: Mapping[str, Any] | None = None) -> None:
    """End a session and the view-as sessions started from it; ending a view-as one is audited by ``by`` as
    view_as.ended."""
    view = cx.execute("SELECT user_id, account_id FROM sessions WHERE id_hash = ? AND viewer_session_hash IS NOT"
                      " NULL", (id_hash,)).fetchone()
    if view is not None:
        _audit_view_as(cx, by, "view_as.ended", view[0], view[1])
    cx.execute("DELETE FROM sessions WHERE id_hash = ? OR viewer_session_hash = ?", (id_hash, id_hash))


def end_account_sessions_in_tx(cx: Connection, account_id: str, keep_id_hash: str | None = None) -> None:
    """End every session of the account but the one that asked (None: every one), and the view-as sessions
    started from them."""
    cx.execute("DELETE FROM sessions WHERE viewer_session_hash IN (SELECT id_hash FROM sessions"
               " WHERE account_id = ? AND id_hash IS DISTINCT FROM ?)", (account_id, keep_id_hash))
    cx.execute("DELETE FROM sessions WHERE account_id = ? AND id_hash IS DISTINCT FROM ?", (account_id, keep_id_hash))


def end_user_sessions_in_tx(cx: Connection, user_id: str, keep_id_hash: str | None = None) -> None:
    """End every session of the UI user (a one-time sign-in link was used, a new password, deactivated, removed)
    but keep_id_hash, view-as ones included; and sessions in other accounts that could switch to it no longer
    can (that takes the password it has now: a new sign-in)."""
    cx.execute("DELETE FROM sessions WHERE user_id = ? AND id_hash IS DISTINCT FROM ?", (user_id, keep_id_hash))
    cx.execute("DELETE FROM session_accounts WHERE user_id = ? AND session_hash IS DISTINCT FROM ?",
               (user_id, keep_id_hash))


def end_view_as_sessions_in_tx(cx: Connection, user_id: str) -> None:
    """End the UI user's view-as sessions (their role changed: what they may do in a sub-account changed)."""
    cx.execute("DELETE FROM sessions WHERE user_id = ? AND viewer_session_hash IS NOT NULL", (user_id,))


@reads
def session_accounts(cx: Connection, id_hash: str, now: str) -> list[Row]:
    """The memberships the live session (not a view-as one) may switch to, {user_id, account_id, account_name,
    account_type, role}, by account name; [] when it has only its own."""
    return fetch_all(cx, "SELECT u.id AS user_id, u.account_id, a.name AS account_name, a.type AS account_type,"
                         " u.role FROM session_accounts c JOIN sessions s ON s.id_hash = c.session_hash"
                         " JOIN users u ON u.id = c.user_id JOIN accounts a ON a.id = u.account_id"
                         " WHERE c.session_hash = ? AND s.expires_at > ? AND s.viewer_session_hash IS NULL"
                         " AND u.active = 1 ORDER BY a.name, a.id", (id_hash, now))


@writes
def switch_session(cx: Connection, id_hash: str, new_session: Mapping[str, Any], now: str) -> bool:
    """Move a live session to another of its memberships (new_session: {id_hash, user_id, created_at,
    expires_at}): the new session, in the membership's account, gets the same choices and this one's expiry
    at the latest; this one and the view-as sessions started from it end. False (nothing changed) when the
    session is not live or may not switch to that user."""
    row = cx.execute("SELECT s.expires_at, u.account_id FROM sessions s JOIN session_accounts c"
                     " ON c.session_hash = s.id_hash JOIN users u ON u.id = c.user_id"
                     " WHERE s.id_hash = ? AND c.user_id = ? AND s.expires_at > ? AND s.viewer_session_hash IS NULL"
                     " AND u.active = 1", (id_hash, new_session["user_id"], now)).fetchone()
    if row is None:
        return False
    choices = [r[0] for r in cx.execute("SELECT user_id FROM session_accounts WHERE session_hash = ?", (id_hash,))]
    cx.execute("DELETE FROM sessions WHERE id_hash = ? OR viewer_session_hash = ?", (id_hash, id_hash))
    insert_session.sync(cx, {**new_session, "account_id": row[1],
                             "expires_at": min(row[0], new_session["expires_at"])}, choices=choices)
    return True
