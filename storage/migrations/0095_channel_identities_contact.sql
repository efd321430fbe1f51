-- Where a reply to a contact goes when it has no inbound message with a fromId (storage/messages.py
-- reply_targets_in_tx): its first channel identity. The primary key (account_id, from_id) could only find it
-- by scanning every identity of the account, once per recipient of a campaign: a 20,000-contact campaign to
-- a list half of whose contacts had written in took 1.1 ms per recipient instead of 0.27 (bench/README.md,
-- Campaigns), and the cost grows with the account's identities.
CREATE INDEX channel_identities_contact ON channel_identities(account_id, contact_id, from_id);
