-- Private notes (issue 21): the team's notes in a contact's thread. Their own table, never messages: a note
-- is never sent (no outbox row), never counted (no conversation counter) and never a reply payload. A note
-- is about its contact: erasing the contact erases its notes (ON DELETE CASCADE).
CREATE TABLE notes (
    id TEXT PRIMARY KEY,                     -- note_…, time-ordered like message ids
    account_id TEXT NOT NULL REFERENCES accounts(id),
    contact_id TEXT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    body TEXT NOT NULL,
    author TEXT NOT NULL,                    -- 'user' (the UI) or 'api' (an API key)
    author_user_id TEXT REFERENCES users(id),
    created_at TEXT NOT NULL
);
CREATE INDEX notes_thread ON notes(account_id, contact_id, id);
