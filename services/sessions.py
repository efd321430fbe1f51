"""Admin UI sessions, kept server-side so that they can be ended: sign-in starts one (the cookie carries
its random id), sign-out ends it, and a new API key or password ends the account's others."""
from datetime import timedelta

from common.ids import iso, utcnow
from services import keys
from storage import sessions as store

SESSION_DAYS = 7


async def start(db, user, now=None, viewer_user_id=None):
    """A new session for the UI user {id, account_id}; returns the id for the cookie (shown nowhere else).
    viewer_user_id: an agency user viewing a sub-account as its user (works only beside that user's session)."""
    session_id = keys.new_session_id()
    now = now or utcnow()
    await store.insert_session(db, {"id_hash": keys.hash_token(session_id), "user_id": user["id"],
                                    "account_id": user["account_id"], "created_at": iso(now),
                                    "expires_at": iso(now + timedelta(days=SESSION_DAYS)),
                                    "viewer_user_id": viewer_user_id})
    return session_id


async def user_for(db, session_id):
    """The UI user {id, account_id, email, account_type} of a live session id, or None."""
    if not session_id:
        return None
    return await store.get_session_user(db, keys.hash_token(session_id), iso(utcnow()))


async def end(db, session_id):
    if session_id:
        await store.delete_session(db, keys.hash_token(session_id))


def session_hash(session_id):
    """What the store knows a session by (for "end the others, keep this one")."""
    return keys.hash_token(session_id) if session_id else None
