-- The delivery worker picks due webhooks a few per account (so that one account's backlog cannot hold
-- back the others). With a backlog of bot replies, ranking every pending row per account on each pick cost
-- a scan of the whole backlog (bench/README.md, the bot scenario); this index over pending rows only lets
-- each account's oldest due rows be read with one seek.
CREATE INDEX outbox_pending_by_account ON outbox(account_id, next_attempt_at, id) WHERE status = 'pending';
