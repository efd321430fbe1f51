-- The bot's work as state (issue 18, item 13): bot_pending is 1 from the inbound write that found the bot
-- active for the message until its outcome is recorded (storage/bot_state.set_outcome_in_tx clears it in the
-- same conditional UPDATE). Restart recovery picks these rows by state, oldest first, whatever their age;
-- the partial index holds only the messages the bot still owes a decision, so it stays small.
ALTER TABLE messages ADD COLUMN bot_pending INTEGER;
CREATE INDEX messages_bot_pending ON messages(id) WHERE bot_pending = 1;
