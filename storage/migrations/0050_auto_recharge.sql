-- Auto-recharge (docs/design.md#api-decisions "Auto-recharge"), per sub-account: the agency's threshold and the amount its
-- notification asks for (integer hundredths, like balances; both NULL = off), and the episode state.
--
-- auto_recharge_key is the idempotency_key of the subaccount.auto_recharge notification that is
-- outstanding: set, in the spend's transaction, when a spend leaves the balance below the threshold and
-- a notification is queued; cleared when a grant brings the balance back to at least the threshold (or
-- the setting changes so that the balance is no longer below it). While it is set no spend queues
-- another notification: one per episode, however many spends race (the single writer serializes them
-- and each sees the previous one's key).
ALTER TABLE accounts ADD COLUMN auto_recharge_threshold INTEGER
    CHECK (auto_recharge_threshold IS NULL OR auto_recharge_threshold > 0);
ALTER TABLE accounts ADD COLUMN auto_recharge_amount INTEGER
    CHECK ((auto_recharge_amount IS NULL AND auto_recharge_threshold IS NULL)
           OR (auto_recharge_amount IS NOT NULL AND auto_recharge_amount > 0
               AND auto_recharge_threshold IS NOT NULL));  -- spelled out: a NULL would pass a CHECK
ALTER TABLE accounts ADD COLUMN auto_recharge_key TEXT;
ALTER TABLE accounts ADD COLUMN auto_recharge_notified_at TEXT;
