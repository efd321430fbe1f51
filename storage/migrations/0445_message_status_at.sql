-- Issue 44 §1: GET /v1/messages?status=Failed&since= lists outbound messages by the time their status last
-- changed (a reply created at 10:00 may fail for good at 20:00, after its retries), keyset-paged on
-- (status_at, id). Existing outbound messages: the time of their last failed attempt, else their creation.
ALTER TABLE messages ADD COLUMN status_at TEXT;
UPDATE messages SET status_at = COALESCE(json_extract(error, '$.at'), created_at) WHERE direction = 'outbound';
CREATE INDEX messages_outbound_status ON messages(account_id, status, status_at, id) WHERE direction = 'outbound';
