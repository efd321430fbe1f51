-- The delivery worker picks due webhooks a few per account, so that one account's backlog cannot hold back
-- the others. For replies and notifications (the direct lane) that ranked every pending row per account on
-- each pick: with a bot answering a burst, a scan of the whole backlog a third of the server's time
-- (bench/README.md, the rule bot). Like the campaign lane's outbox_campaign_due, this index lets each
-- account's oldest due rows be read with one seek. Numbered after 0060, which adds outbox.campaign_id, and
-- outside every branch's range (the bot's is 0030-0039).
CREATE INDEX outbox_direct_by_account ON outbox(account_id, next_attempt_at, id)
    WHERE status = 'pending' AND campaign_id IS NULL;
