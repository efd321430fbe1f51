-- Reports read their own account's rows only (issue 36 §4): the messages and delivery attempts past the
-- watermarks are a range seek per account, not the tail of every account filtered afterwards.
CREATE INDEX messages_account_id ON messages(account_id, id);
CREATE INDEX delivery_attempts_account_id ON delivery_attempts(account_id, id);

-- Messages folded while the bot still owed them a decision: the fold no longer waits for it (one pending
-- decision held every account's summaries back for up to an hour); the outcome is counted when it comes.
CREATE TABLE report_bot_pending (
    message_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    day TEXT NOT NULL                        -- the message's day, the outcome's in the summaries
);
CREATE INDEX report_bot_pending_account ON report_bot_pending(account_id);
