-- Retention of CSAT asks (services/retention.py): the cleanup deletes asks never answered once their link has
-- expired, oldest first; this index keeps that a seek instead of a scan of every ask.
CREATE INDEX csat_asks_unanswered ON csat_asks(expires_at) WHERE answered_at IS NULL;
