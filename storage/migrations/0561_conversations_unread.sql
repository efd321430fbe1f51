-- The navigation's unread count (storage/conversations.py nav_counts), read on every page and pushed to open
-- pages after each live round: from the conversations that have unread messages only.
CREATE INDEX conversations_unread ON conversations(account_id) WHERE unread_count > 0;
