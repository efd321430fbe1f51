-- CSAT (issue 41; services/csat.py): a resolved conversation asks its contact once how we did. One row per ask,
-- written in the resolution's transaction (with the ask's outbound message), answered once. agent_user_id: who
-- had the conversation when it was resolved. token_hash: SHA-256 of the one-question page's token (asks on a
-- channel other than the website chat widget's); the token itself is only ever in the link sent.
CREATE TABLE csat_asks (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    contact_id TEXT NOT NULL,
    agent_user_id TEXT,
    channel TEXT NOT NULL,
    message_id TEXT,
    question TEXT NOT NULL,
    token_hash TEXT UNIQUE,
    asked_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    answered_at TEXT,
    rating INTEGER CHECK (rating BETWEEN 1 AND 5),
    comment TEXT
);
-- The 24-hour rule reads a contact's newest ask; the widget its open one.
CREATE INDEX csat_asks_contact ON csat_asks(account_id, contact_id, asked_at);
-- The Reports read answers by day.
CREATE INDEX csat_asks_answered ON csat_asks(account_id, answered_at) WHERE answered_at IS NOT NULL;
