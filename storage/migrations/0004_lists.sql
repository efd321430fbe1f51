-- Contact lists and their members. A membership is one row per (list, contact): adding twice is a no-op.
CREATE TABLE lists (
    id TEXT PRIMARY KEY,                     -- lst_…, time-ordered: the keyset of GET /v1/lists
    account_id TEXT NOT NULL REFERENCES accounts(id),
    name TEXT NOT NULL,
    contact_count INTEGER NOT NULL DEFAULT 0, -- kept in the transaction that adds a member
    created_at TEXT NOT NULL
);
CREATE INDEX lists_account ON lists(account_id, id);

CREATE TABLE list_members (
    list_id TEXT NOT NULL REFERENCES lists(id),
    contact_id TEXT NOT NULL REFERENCES contacts(id),
    added_at TEXT NOT NULL,
    PRIMARY KEY (list_id, contact_id)        -- also the keyset of GET /v1/lists/{id}/contacts
) WITHOUT ROWID;
CREATE INDEX list_members_contact ON list_members(contact_id);
