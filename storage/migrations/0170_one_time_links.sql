-- One-time links (docs/design.md#wave-3-contracts Day two): the first-run setup link, reset-password's sign-in link, an agency's
-- reset of a sub-account. The link carries a random token; this table keeps only its SHA-256, so a copy
-- of the table opens nothing. A link is spent once (used_at) and dead after expires_at.
CREATE TABLE one_time_links (
    token_hash TEXT PRIMARY KEY,             -- hex SHA-256 of the token in the URL
    purpose TEXT NOT NULL,                   -- 'setup' | 'reset'
    user_id TEXT NOT NULL REFERENCES users(id),
    account_id TEXT NOT NULL REFERENCES accounts(id),
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,                -- ISO 8601 UTC
    used_at TEXT                             -- set in the transaction that spends it
) WITHOUT ROWID;
CREATE INDEX one_time_links_user ON one_time_links(user_id, purpose);
