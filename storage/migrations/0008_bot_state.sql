-- The bot's state per contact (docs/design.md#api-decisions "Bot"), shared by the bot and the inbox: a pause (a handoff keyword,
-- or a human reply, stops the bot for that contact until paused_until) and, on each inbound message, what
-- the bot did with it (JSON {outcome, detail}; NULL while it did nothing).
CREATE TABLE bot_pauses (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    contact_id TEXT NOT NULL REFERENCES contacts(id),
    paused_until TEXT NOT NULL,              -- ISO 8601 UTC; the pause is over once this has passed
    reason TEXT NOT NULL,                    -- 'handoff' | 'human_reply'
    created_at TEXT NOT NULL,
    PRIMARY KEY (account_id, contact_id)
) WITHOUT ROWID;
ALTER TABLE messages ADD COLUMN bot_outcome TEXT;
