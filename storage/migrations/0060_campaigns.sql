-- Campaigns (docs/design.md#api-decisions "Campaigns"): one message to every contact of a list, paced, exactly once.
--
-- The counts live on the campaign row and change in the same transaction as the recipient rows they
-- count (never recounted): total = pending + queued + sent + failed + skipped + cancelled at every commit.
CREATE TABLE campaigns (
    id TEXT PRIMARY KEY,                     -- cmp_…, time-ordered: the keyset of GET /v1/campaigns
    account_id TEXT NOT NULL REFERENCES accounts(id),
    name TEXT NOT NULL,
    list_id TEXT NOT NULL REFERENCES lists(id),
    campaign_key TEXT NOT NULL,              -- the API's campaignId: on every message and reply payload
    body TEXT NOT NULL,                      -- with {{firstName}}-style placeholders
    channel TEXT,
    rate_per_minute INTEGER NOT NULL CHECK (rate_per_minute > 0),
    status TEXT NOT NULL CHECK (status IN ('scheduled', 'running', 'paused', 'completed', 'cancelled')),
    paused_reason TEXT,                      -- why it paused (a person, or the auto-pause rule)
    start_at TEXT NOT NULL,
    started_at TEXT,                         -- when the list's members were snapshotted
    finished_at TEXT,                        -- when it completed or was cancelled
    created_at TEXT NOT NULL,
    cursor TEXT NOT NULL DEFAULT '',         -- the last recipient (contact id) handed to the outbox
    total INTEGER NOT NULL DEFAULT 0,
    pending INTEGER NOT NULL DEFAULT 0,      -- snapshotted, no message yet
    queued INTEGER NOT NULL DEFAULT 0,       -- message made, delivery not attempted yet
    sent INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,       -- the last attempt failed (a retry may be scheduled)
    skipped INTEGER NOT NULL DEFAULT 0,      -- opted out when its turn came
    cancelled INTEGER NOT NULL DEFAULT 0,    -- never sent: the campaign was cancelled first
    -- The auto-pause rule's counters, since the start or the last resume: first attempts ended, how many
    -- of them failed, and the current run of failed first attempts.
    probe_attempts INTEGER NOT NULL DEFAULT 0,
    probe_failures INTEGER NOT NULL DEFAULT 0,
    failure_streak INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX campaigns_account ON campaigns(account_id, id);
CREATE INDEX campaigns_active ON campaigns(status, start_at) WHERE status IN ('scheduled', 'running');

-- One row per contact of the list at the start: the primary key is what makes "each contact once" hold,
-- and a row gets its message in the transaction that creates the message.
CREATE TABLE campaign_recipients (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id),
    contact_id TEXT NOT NULL REFERENCES contacts(id),
    status TEXT NOT NULL CHECK (status IN ('pending', 'queued', 'sent', 'failed', 'skipped', 'cancelled')),
    message_id TEXT UNIQUE,                  -- the recipient's one message (no FK: retention may prune messages)
    error TEXT,                              -- JSON of the last failed attempt, as on the message
    PRIMARY KEY (campaign_id, contact_id)
) WITHOUT ROWID;
CREATE INDEX campaign_recipients_status ON campaign_recipients(campaign_id, status, contact_id);

-- A campaign's deliveries form their own lane in the outbox: replies and notifications go first, and a
-- campaign's backlog is read per account through its own index (storage/delivery.py due_rows).
ALTER TABLE outbox ADD COLUMN campaign_id TEXT REFERENCES campaigns(id);   -- campaigns.id, not the campaignId label
CREATE INDEX outbox_direct_due ON outbox(next_attempt_at, id) WHERE status = 'pending' AND campaign_id IS NULL;
CREATE INDEX outbox_campaign_due ON outbox(account_id, next_attempt_at, id)
    WHERE status = 'pending' AND campaign_id IS NOT NULL;
CREATE INDEX outbox_campaign ON outbox(campaign_id, status) WHERE campaign_id IS NOT NULL;

-- Answers to a campaign: the contact's latest campaign message, found with one seek on the inbound path.
CREATE INDEX messages_campaign_contact ON messages(account_id, contact_id, id) WHERE author = 'campaign';
