"""SQL for admin UI sessions (migration 0010): started at sign-in, ended by sign-out or a credential change."""
from storage.db import fetch_one, reads, writes


@writes
def insert_session(cx, session):
    """Store a new session; sessions past their expiry (of anyone) are deleted on the way."""
    cx.execute("DELETE FROM sessions WHERE expires_at <= ?", (session["created_at"],))
    cx.execute("INSERT INTO sessions (id_hash, user_id, account_id, created_at, expires_at, viewer_user_id)"
               " VALUES (?, ?, ?, ?, ?, ?)",
               (session["id_hash"], session["user_id"], session["account_id"], session["created_at"],
                session["expires_at"], session.get("viewer_user_id")))


@reads
def get_session_user(cx, id_hash, now):
    """The UI user {id, account_id, email, account_type, account_name, viewer_user_id} of a live session, or
    None (the account's type decides which UI pages it has; viewer_user_id: an agency's view-as session)."""
    return fetch_one(cx, "SELECT u.id, u.account_id, u.email, a.type AS account_type, a.name AS account_name,"
                         " s.viewer_user_id FROM sessions s"
                         " JOIN users u ON u.id = s.user_id JOIN accounts a ON a.id = u.account_id"
                         " WHERE s.id_hash = ? AND s.expires_at > ?", (id_hash, now))


@reads
def live_sessions(cx, id_hashes, now):
    """The ones among id_hashes that are sessions still live at ``now``."""
    live = set()
    for start in range(0, len(id_hashes), 500):
        chunk = id_hashes[start:start + 500]
        live.update(r[0] for r in cx.execute(
            f"SELECT id_hash FROM sessions WHERE id_hash IN ({', '.join('?' * len(chunk))}) AND expires_at > ?",
            (*chunk, now)))
    return live


@writes
def delete_session(cx, id_hash):
    cx.execute("DELETE FROM sessions WHERE id_hash = ?", (id_hash,))


def end_account_sessions_in_tx(cx, account_id, keep_id_hash=None):
    """End every session of the account but the one that asked (None: every one)."""
    cx.execute("DELETE FROM sessions WHERE account_id = ? AND id_hash IS DISTINCT FROM ?", (account_id, keep_id_hash))


def end_user_sessions_in_tx(cx, user_id):
    """End every session of the UI user (a one-time sign-in link was used)."""
    cx.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,))
