-- Business hours and SLA (issue 40). The business hours are a setting (accounts.settings "businessHours");
-- these are what a conversation keeps of them:
--   sla_due_at        when a person must answer the contact's waiting message (first or next response, counted
--                     in business minutes); NULL when nothing waits for a person, or the account has no SLA
--   sla_breached      1 once that time passed unanswered (conversation.sla_breached fired, exactly once)
--   sla_target_id     the sla_targets row of that wait (the Reports' "within SLA")
--   first_response_at a person's first reply: before it the target is the first response's, after it the next's
--   outside_hours_until the closed period whose outside-hours message the conversation got (its next opening;
--                     'never' when no opening is known): one message per conversation per closed period
ALTER TABLE conversations ADD COLUMN sla_due_at TEXT;
ALTER TABLE conversations ADD COLUMN sla_breached INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN sla_target_id TEXT;
ALTER TABLE conversations ADD COLUMN first_response_at TEXT;
ALTER TABLE conversations ADD COLUMN outside_hours_until TEXT;
UPDATE conversations SET first_response_at = (
    SELECT MIN(m.created_at) FROM messages m
    WHERE m.account_id = conversations.account_id AND m.contact_id = conversations.contact_id
      AND m.direction = 'outbound' AND m.author IN ('user', 'api'));
-- The SLA watcher's next due time, and its breaches, across every account.
CREATE INDEX conversations_sla_watch ON conversations(sla_due_at) WHERE sla_due_at IS NOT NULL AND sla_breached = 0;
-- The inbox's "Due soon" view and badge of one account.
CREATE INDEX conversations_sla_due ON conversations(account_id, sla_due_at) WHERE sla_due_at IS NOT NULL;

-- One row per wait for a person's answer (no contact: an erasure leaves the Reports' counts as they were).
-- Met: responded_at <= due_at. user_id: who answered, or for a breach not yet answered, the assignee then.
CREATE TABLE sla_targets (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    kind TEXT NOT NULL CHECK (kind IN ('first', 'next')),
    started_at TEXT NOT NULL,
    due_at TEXT NOT NULL,
    responded_at TEXT,
    user_id TEXT,
    breached INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sla_targets_account_started ON sla_targets(account_id, started_at);
