-- Inbox triage (issue 43 §8): the newest message the contact wrote that was not an opt-out or opt-in keyword
-- (NULL: the contact never wrote, a campaign-only conversation). Needs reply is "this is the last message",
-- Unassigned wants one: a STOP reply or a campaign's send alone puts a conversation in neither.
ALTER TABLE conversations ADD COLUMN last_inbound_id TEXT;
-- Existing conversations: the default keywords (an account's own keyword lists are not known to SQL here).
UPDATE conversations SET last_inbound_id = (
    SELECT MAX(m.id) FROM messages m
    WHERE m.account_id = conversations.account_id AND m.contact_id = conversations.contact_id
      AND m.direction = 'inbound' AND UPPER(TRIM(m.body)) NOT IN ('STOP', 'UNSUBSCRIBE', 'START'));
