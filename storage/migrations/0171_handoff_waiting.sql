-- A handoff waits for a person (issue 25 §3, §4): set by the bot's handoff, cleared by the next reply a person
-- (the inbox, or the API) sends to the contact. The inbox's "Needs a person" count and "Needs reply" view.
ALTER TABLE conversations ADD COLUMN handoff_waiting_since TEXT;
CREATE INDEX conversations_handoff_waiting ON conversations(account_id) WHERE handoff_waiting_since IS NOT NULL;
