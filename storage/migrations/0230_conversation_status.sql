-- Team inbox (issue 21): a conversation's status and assignee. A snoozed conversation wakes (back to open) at
-- snoozed_until (services/conversation_status.py SnoozeWaker); an inbound message reopens a resolved or snoozed
-- one in the conversation upsert of its insert (storage/conversations.py on_messages_in_tx).
ALTER TABLE conversations ADD COLUMN status TEXT NOT NULL DEFAULT 'open'
    CHECK (status IN ('open', 'pending', 'resolved', 'snoozed'));
ALTER TABLE conversations ADD COLUMN snoozed_until TEXT;          -- set while status is snoozed, else NULL
ALTER TABLE conversations ADD COLUMN assignee_user_id TEXT REFERENCES users(id);  -- a user of the same account
CREATE INDEX conversations_snoozed ON conversations(snoozed_until) WHERE status = 'snoozed';
CREATE INDEX conversations_assignee ON conversations(account_id, assignee_user_id, last_message_id)
    WHERE assignee_user_id IS NOT NULL;
