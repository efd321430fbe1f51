-- The inbox (docs/design.md#api-decisions): one conversation per contact with messages, kept in the transaction of every message
-- insert and outbound status change (storage/conversations.py), so that listing it never counts messages.
CREATE TABLE conversations (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    contact_id TEXT NOT NULL REFERENCES contacts(id),
    last_message_id TEXT NOT NULL,           -- the newest message (ids are time-ordered): the inbox's sort key
    last_message_at TEXT NOT NULL,
    last_direction TEXT NOT NULL,
    last_author TEXT,
    last_preview TEXT NOT NULL,              -- the first characters of its body
    channel TEXT,                            -- the channel of the newest message that has one
    unread_count INTEGER NOT NULL DEFAULT 0 CHECK (unread_count >= 0),   -- inbound messages since last read
    failed_count INTEGER NOT NULL DEFAULT 0 CHECK (failed_count >= 0),   -- outbound messages now Failed
    PRIMARY KEY (account_id, contact_id)
) WITHOUT ROWID;
CREATE INDEX conversations_activity ON conversations(account_id, last_message_id);

-- Existing messages: one conversation per contact, read (unread 0), failed deliveries counted.
INSERT INTO conversations (account_id, contact_id, last_message_id, last_message_at, last_direction, last_author,
                           last_preview, channel, unread_count, failed_count)
SELECT m.account_id, m.contact_id, m.id, m.created_at, m.direction, m.author, substr(m.body, 1, 140),
       (SELECT c.channel FROM messages c WHERE c.account_id = m.account_id AND c.contact_id = m.contact_id
          AND c.channel IS NOT NULL ORDER BY c.id DESC LIMIT 1),
       0,
       (SELECT COUNT(*) FROM messages f WHERE f.account_id = m.account_id AND f.contact_id = m.contact_id
          AND f.direction = 'outbound' AND f.status = 'Failed')
FROM messages m
WHERE m.id = (SELECT MAX(l.id) FROM messages l WHERE l.account_id = m.account_id AND l.contact_id = m.contact_id);
