-- PostgreSQL form of 0445_message_status_at.sql (JSON read with ->> instead of json_extract).
ALTER TABLE messages ADD COLUMN status_at TEXT;
UPDATE messages SET status_at = COALESCE(error::json ->> 'at', created_at) WHERE direction = 'outbound';
CREATE INDEX messages_outbound_status ON messages(account_id, status, status_at, id) WHERE direction = 'outbound';
