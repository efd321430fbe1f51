-- Webhook delivery: one row per attempt (the history the UI and GET /v1/messages/{id} show), and the
-- outbox's last error (notifications have no message row to carry it).
CREATE TABLE delivery_attempts (
    id INTEGER PRIMARY KEY,
    outbox_id INTEGER NOT NULL REFERENCES outbox(id),
    account_id TEXT NOT NULL REFERENCES accounts(id),
    at TEXT NOT NULL,                        -- when the attempt started (ISO 8601 UTC)
    http_status INTEGER,                     -- NULL when no answer came (timeout, connection error, refused)
    error TEXT,                              -- NULL on success
    response_excerpt TEXT,                   -- first 1 KB of the receiver's answer
    duration_ms INTEGER NOT NULL
);
CREATE INDEX delivery_attempts_outbox ON delivery_attempts(outbox_id);

ALTER TABLE outbox ADD COLUMN last_error TEXT;   -- JSON {at, httpStatus, error, response, nextAttemptAt}
ALTER TABLE outbox ADD COLUMN sent_at TEXT;
CREATE INDEX outbox_message ON outbox(account_id, message_id) WHERE message_id IS NOT NULL;
