-- Accounts, their UI users and API keys, and the durable outbox every webhook delivery goes through.
CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL CHECK (type IN ('standard', 'agency', 'subaccount')),
    parent_agency_id TEXT REFERENCES accounts(id),
    rate_limit_per_minute INTEGER,
    settings TEXT NOT NULL DEFAULT '{}',
    webhook_secret TEXT NOT NULL,            -- encrypted with data/secret.key
    previous_webhook_secret TEXT,            -- encrypted; still signs until previous_secret_expires_at
    previous_secret_expires_at TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX accounts_parent_agency ON accounts(parent_agency_id);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    is_owner INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE INDEX users_account ON users(account_id);

-- One live key per account: generating a new key deletes the old row in the same transaction.
CREATE TABLE api_keys (
    key_hash TEXT PRIMARY KEY,               -- hex SHA-256 of the key; the key itself is never stored
    account_id TEXT NOT NULL REFERENCES accounts(id),
    prefix TEXT NOT NULL,                    -- first characters, for display
    created_at TEXT NOT NULL
);
CREATE INDEX api_keys_account ON api_keys(account_id);

-- Every webhook (reply or notification) is a row here, written in the same transaction as what caused it.
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    kind TEXT NOT NULL CHECK (kind IN ('reply', 'notification')),
    event_type TEXT,                         -- notifications: contact.created, contact.tagged, ...
    message_id TEXT,                         -- replies: the outbound message
    webhook_id TEXT NOT NULL UNIQUE,         -- Standard Webhooks id, the same on every retry
    payload TEXT NOT NULL,                   -- JSON body as it will be sent
    status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX outbox_due ON outbox(status, next_attempt_at);
