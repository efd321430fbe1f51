-- Erasing a contact (storage/erasure.py) keeps its campaign recipient rows, anonymised under an id that names
-- nobody, so that each campaign's counts still add up: the recipient's contact_id can no longer be a foreign
-- key to contacts (like message_id, which never was one). The table is rebuilt without it (SQLite cannot drop
-- a constraint); PostgreSQL drops the constraint instead (the .postgresql.sql beside this file).
CREATE TABLE campaign_recipients_new (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id),
    contact_id TEXT NOT NULL,                -- the contact's id, or erased_… once the contact was erased
    status TEXT NOT NULL CHECK (status IN ('pending', 'queued', 'sent', 'failed', 'retrying', 'skipped',
                                           'cancelled')),
    message_id TEXT UNIQUE,                  -- the recipient's one message (no FK: retention may prune messages)
    error TEXT,                              -- JSON of the last failed attempt, as on the message
    PRIMARY KEY (campaign_id, contact_id)
) WITHOUT ROWID;
INSERT INTO campaign_recipients_new (campaign_id, contact_id, status, message_id, error)
SELECT campaign_id, contact_id, status, message_id, error FROM campaign_recipients;
DROP TABLE campaign_recipients;
ALTER TABLE campaign_recipients_new RENAME TO campaign_recipients;
CREATE INDEX campaign_recipients_status ON campaign_recipients(campaign_id, status, contact_id);
