"""SQL for admin UI sessions (migration 0010): started at sign-in, ended by sign-out or a credential change.

A "View as" session (migration 0436) is the agency user's (user_id) in a sub-account of their agency
(account_id), started from their own session (viewer_session_hash) with the role they had then (viewer_role):
it is live only while that session is, the user is active, keeps that role and the sub-account is still
their agency's. Every read below checks this, so nothing else has to end it in time."""
from storage.audit import record_by
from storage.db import fetch_one, reads, writes

# A view-as row s (joined with its viewer u and the viewer's own session p) that is still allowed to work.
_VIEW_AS_HOLDS = ("p.expires_at > ? AND p.user_id = s.user_id AND p.viewer_session_hash IS NULL"
                  " AND COALESCE(u.role, 'admin') = s.viewer_role")


@writes
def insert_session(cx, session, by=None):
    """Store a new session; sessions past their expiry (of anyone) are deleted on the way. A view-as one is
    audited by ``by`` as view_as.started, in the sub-account and in the agency."""
    cx.execute("DELETE FROM sessions WHERE expires_at <= ?", (session["created_at"],))
    cx.execute("INSERT INTO sessions (id_hash, user_id, account_id, created_at, expires_at, viewer_user_id,"
               " viewer_session_hash, viewer_role) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (session["id_hash"], session["user_id"], session["account_id"], session["created_at"],
                session["expires_at"], session.get("viewer_user_id"), session.get("viewer_session_hash"),
                session.get("viewer_role")))
    if session.get("viewer_session_hash"):
        _audit_view_as(cx, by, "view_as.started", session["user_id"], session["account_id"])


def _audit_view_as(cx, by, action, user_id, sub_id):
    agency_id = cx.execute("SELECT account_id FROM users WHERE id = ?", (user_id,)).fetchone()[0]
    record_by(cx, by, account_id=sub_id, action=action, subject_id=user_id, detail={"agencyId": agency_id})
    record_by(cx, by, account_id=agency_id, action=action, subject_id=sub_id)


@reads
def get_session_user(cx, id_hash, now):
    """The UI user {id, account_id, email, name, role, account_type, account_name} of a live session of an
    active user, or None (the role and the account's type decide which UI pages it has). A view-as session
    is not one (get_view_as_user reads those)."""
    return fetch_one(cx, "SELECT u.id, u.account_id, u.email, u.name, u.role, a.type AS account_type,"
                         " a.name AS account_name FROM sessions s"
                         " JOIN users u ON u.id = s.user_id JOIN accounts a ON a.id = u.account_id"
                         " WHERE s.id_hash = ? AND s.expires_at > ? AND u.active = 1"
                         " AND s.viewer_session_hash IS NULL", (id_hash, now))


@reads
def get_view_as_user(cx, id_hash, viewer_session_hash, now):
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
def live_sessions(cx, id_hashes, now):
    """{id_hash: the user's role now} of the ones among id_hashes that are sessions still live at ``now``."""
    live = {}
    for start in range(0, len(id_hashes), 500):
        chunk = id_hashes[start:start + 500]
        live.update((r[0], r[1]) for r in cx.execute(
            "SELECT s.id_hash, COALESCE(u.role, 'admin') FROM sessions s JOIN users u ON u.id = s.user_id"
            " LEFT JOIN sessions p ON p.id_hash = s.viewer_session_hash"
            f" WHERE s.id_hash IN ({', '.join('?' * len(chunk))}) AND s.expires_at > ? AND u.active = 1"
            f" AND (s.viewer_session_hash IS NULL OR ({_VIEW_AS_HOLDS}))", (*chunk, now, now)))
    return live


@writes
def delete_session(cx, id_hash, by=None):
    """End a session and the view-as sessions started from it; ending a view-as one is audited by ``by`` as
    view_as.ended."""
    view = cx.execute("SELECT user_id, account_id FROM sessions WHERE id_hash = ? AND viewer_session_hash IS NOT"
                      " NULL", (id_hash,)).fetchone()
    if view is not None:
        _audit_view_as(cx, by, "view_as.ended", view[0], view[1])
    cx.execute("DELETE FROM sessions WHERE id_hash = ? OR viewer_session_hash = ?", (id_hash, id_hash))


def end_account_sessions_in_tx(cx, account_id, keep_id_hash=None):
    """End every session of the account but the one that asked (None: every one), and the view-as sessions
    started from them."""
    cx.execute("DELETE FROM sessions WHERE viewer_session_hash IN (SELECT id_hash FROM sessions"
               " WHERE account_id = ? AND id_hash IS DISTINCT FROM ?)", (account_id, keep_id_hash))
    cx.execute("DELETE FROM sessions WHERE account_id = ? AND id_hash IS DISTINCT FROM ?", (account_id, keep_id_hash))


def end_user_sessions_in_tx(cx, user_id):
    """End every session of the UI user (a one-time sign-in link was used), view-as ones included."""
    cx.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,))


def end_view_as_sessions_in_tx(cx, user_id):
    """End the UI user's view-as sessions (their role changed: what they may do in a sub-account changed)."""
    cx.execute("DELETE FROM sessions WHERE user_id = ? AND viewer_session_hash IS NOT NULL", (user_id,))
