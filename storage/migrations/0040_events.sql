-- Live events (docs/design.md#api-decisions "Inbox (UI) and live events"): one row per change an open page should see, written in
-- the transaction of the change (storage/events.py emit_in_tx) and pushed to the account's WebSockets after the
-- commit. id is the monotonic position a page resumes from. Without AUTOINCREMENT a new id is MAX(id) + 1, so
-- pruning never deletes the newest row (storage/events.prune): ids then never go back, and MIN(id) - 1 is the
-- oldest position a page can still resume from.
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    account_id TEXT NOT NULL,                -- no REFERENCES: a log the hot path appends to, pruned by age
    type TEXT NOT NULL,                      -- message.created, message.status, message.updated, conversation.updated, ...
    data TEXT NOT NULL,                      -- JSON object
    created_at TEXT NOT NULL
);
CREATE INDEX events_account ON events(account_id, id);
