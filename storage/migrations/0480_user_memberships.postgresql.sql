-- A person may be a user of several accounts (issue 36 §5; 0480_user_memberships.py says why and what SQLite does):
-- the email is unique in its account only, NULL once the user is removed; a session remembers the memberships
-- its sign-in proved.
ALTER TABLE users DROP CONSTRAINT users_email_key;
ALTER TABLE users ALTER COLUMN email DROP NOT NULL;
ALTER TABLE users ADD COLUMN removed_at TEXT;
CREATE UNIQUE INDEX users_account_email ON users(account_id, email);
CREATE INDEX users_email ON users(email);
CREATE TABLE session_accounts (
    session_hash TEXT NOT NULL REFERENCES sessions(id_hash) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id),
    PRIMARY KEY (session_hash, user_id)
);
CREATE INDEX session_accounts_user ON session_accounts(user_id);
