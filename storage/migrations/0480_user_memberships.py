"""A person may be a user of several accounts (issue 36 §5): a user row is one membership, its email unique in its
account only (it was unique on the whole server, so an invitation told any tenant who had an account elsewhere,
and an account could hold an address for good). A removed user keeps its row, for the ids that notes, messages,
conversations and the audit keep, with email, name and password gone and removed_at set. A session remembers
the memberships its sign-in proved (session_accounts): the account switcher offers those only.

SQLite cannot drop the column's UNIQUE: the table is rebuilt, with foreign keys off for the rebuild (the way
SQLite's documentation prescribes; other tables' references to users(id) stay as they are) and checked before
it commits. PostgreSQL drops the constraint instead (the .postgresql.sql beside this file)."""
from __future__ import annotations

from storage.interface import OwnConnection

_USERS = """CREATE TABLE users (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    email TEXT,                              -- the login, unique in the account; NULL once removed
    password_hash TEXT NOT NULL,
    is_owner INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    role TEXT NOT NULL DEFAULT 'admin' CHECK (role IN ('owner', 'admin', 'agent')),
    name TEXT,
    active INTEGER NOT NULL DEFAULT 1,
    removed_at TEXT                          -- removed from the account: email and name erased
)"""
_COLUMNS = "id, account_id, email, password_hash, is_owner, created_at, role, name, active"
SESSION_ACCOUNTS = """CREATE TABLE session_accounts (
    session_hash TEXT NOT NULL REFERENCES sessions(id_hash) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id),
    PRIMARY KEY (session_hash, user_id)
)"""


def _broken_references(cx: OwnConnection) -> set[tuple[tuple[str, str], int]]:
    """{(table, referenced table): how many rows}, as a set of pairs with counts, of rows whose foreign key
    points nowhere."""
    counts: dict[tuple[str, str], int] = {}
    for row in cx.execute("PRAGMA foreign_key_check").fetchall():
        counts[(row[0], row[2])] = counts.get((row[0], row[2]), 0) + 1
    return set(counts.items())


def migrate(cx: OwnConnection) -> list[str]:
    # PRAGMA foreign_keys is a no-op inside a transaction: end the runner's, rebuild in one of our own, and
    # leave a transaction open again for the runner to record this migration in and commit.
    cx.execute("COMMIT")
    enforced = cx.execute("PRAGMA foreign_keys").fetchone()[0]
    cx.execute("PRAGMA foreign_keys=OFF")
    try:
        cx.execute("BEGIN IMMEDIATE")
        try:
            broken_before = _broken_references(cx)
            cx.execute(_USERS.replace("CREATE TABLE users", "CREATE TABLE users_new", 1))
            cx.execute(f"INSERT INTO users_new ({_COLUMNS}) SELECT {_COLUMNS} FROM users")
            cx.execute("DROP TABLE users")
            cx.execute("ALTER TABLE users_new RENAME TO users")
            cx.execute("CREATE INDEX users_account ON users(account_id)")
            cx.execute("CREATE INDEX users_account_role ON users(account_id, role, active)")
            cx.execute("CREATE UNIQUE INDEX users_account_email ON users(account_id, email)")
            cx.execute("CREATE INDEX users_email ON users(email)")  # sign-in finds every membership of an email
            cx.execute(SESSION_ACCOUNTS)
            cx.execute("CREATE INDEX session_accounts_user ON session_accounts(user_id)")
            broken = _broken_references(cx) - broken_before
            if broken:  # what was broken before (a database written with foreign keys off) is not ours to mend
                raise RuntimeError(f"rebuilding users broke foreign keys: {sorted(broken)[:5]}")
            cx.execute("COMMIT")
        except BaseException:
            cx.execute("ROLLBACK")
            raise
    finally:
        cx.execute(f"PRAGMA foreign_keys={'ON' if enforced else 'OFF'}")
        cx.execute("BEGIN IMMEDIATE")
    return ["users: email unique per account; session_accounts added"]
