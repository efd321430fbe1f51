-- Retention (services/retention.py): media files are deleted only when no message names them; this
-- finds the messages that name a file without a scan. Partial: messages without media (most of them,
-- and every one on the inbound hot path) cost nothing here.
CREATE INDEX messages_media ON messages(media_url) WHERE media_url IS NOT NULL;
