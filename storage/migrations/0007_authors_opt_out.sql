-- Who wrote each message (docs/design.md#api-decisions "Inbox"): 'contact' (inbound), 'api' (POST send_custom_channel_message),
-- 'bot', 'user' (typed in the inbox; author_user_id says who) or 'campaign'. And the contact's opt-out
-- (docs/design.md#api-decisions "Campaigns"): campaigns skip an opted-out contact and the bot does not answer it.
ALTER TABLE messages ADD COLUMN author TEXT;
ALTER TABLE messages ADD COLUMN author_user_id TEXT REFERENCES users(id);
UPDATE messages SET author = CASE direction WHEN 'inbound' THEN 'contact' ELSE 'api' END;
ALTER TABLE contacts ADD COLUMN opted_out INTEGER NOT NULL DEFAULT 0;
