"""A second UI user in an account, written straight into the database (invites are the team-users branch's):
for the team-inbox tests, in-process (add_user) and against a running server's file (add_user_to_file)."""
from common.ids import new_id, now_iso
from services.keys import hash_password
from storage.db import writes
from tests import db_direct


@writes
def _insert_user(cx, account_id, email, password_hash):
    user_id = new_id("usr")
    cx.execute("INSERT INTO users (id, account_id, email, password_hash, is_owner, created_at)"
               " VALUES (?, ?, ?, ?, 0, ?)", (user_id, account_id, email, password_hash, now_iso()))
    return user_id


async def add_user(services, account_id, email, password="correct horse battery staple"):
    """The new user's id."""
    return await _insert_user(services.db, account_id, email, hash_password(password))


def add_user_to_file(db_path, account_id, email, password):
    """db_path: a running server's SQLite file (on PostgreSQL: its data directory's database)."""
    cx = db_direct.connect(db_path)
    try:
        cx.execute("BEGIN IMMEDIATE")
        user_id = _insert_user.sync(cx, account_id, email, hash_password(password))
        cx.execute("COMMIT")
        return user_id
    finally:
        cx.close()
