-- Admin UI sessions, kept here so that they can be ended (sign-out, a new API key, a new password): the
-- cookie carries a random id, this table only its SHA-256, so a copy of the table signs nobody in.
CREATE TABLE sessions (
    id_hash TEXT PRIMARY KEY,                -- hex SHA-256 of the id in the cookie
    user_id TEXT NOT NULL REFERENCES users(id),
    account_id TEXT NOT NULL REFERENCES accounts(id),
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL                 -- ISO 8601 UTC; the session is over once this has passed
) WITHOUT ROWID;
CREATE INDEX sessions_account ON sessions(account_id);
CREATE INDEX sessions_expires ON sessions(expires_at);
