-- Campaign state (issue 18 item 12).
--
-- (a) A recipient whose delivery failed with a retry scheduled is `retrying`, counted apart from `failed`,
-- which is now final failures only (a cancel stops the retries: they become failed). The recipients table
-- is rebuilt for its CHECK; the recipients failed with a retry still pending move to retrying, and the two
-- counts are set from the recipients (total = pending + queued + sent + failed + retrying + skipped +
-- cancelled, as before).
--
-- (c) Cancel and retry-failed touch every recipient: the request's own write only marks the campaign
-- (pending_action) and the campaign runner does the rest in bounded batches on the writer's background lane,
-- resuming after a restart from action_cursor (the last recipient done, in contact-id order). action_at and
-- action_done space a retry's deliveries at the campaign's rate across batches.
ALTER TABLE campaigns ADD COLUMN retrying INTEGER NOT NULL DEFAULT 0;
ALTER TABLE campaigns ADD COLUMN pending_action TEXT CHECK (pending_action IN ('cancel', 'retry'));
ALTER TABLE campaigns ADD COLUMN action_cursor TEXT NOT NULL DEFAULT '';
ALTER TABLE campaigns ADD COLUMN action_at TEXT;
ALTER TABLE campaigns ADD COLUMN action_done INTEGER NOT NULL DEFAULT 0;
CREATE INDEX campaigns_pending_action ON campaigns(pending_action) WHERE pending_action IS NOT NULL;

CREATE TABLE campaign_recipients_new (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id),
    contact_id TEXT NOT NULL REFERENCES contacts(id),
    status TEXT NOT NULL CHECK (status IN ('pending', 'queued', 'sent', 'failed', 'retrying', 'skipped',
                                           'cancelled')),
    message_id TEXT UNIQUE,                  -- the recipient's one message (no FK: retention may prune messages)
    error TEXT,                              -- JSON of the last failed attempt, as on the message
    PRIMARY KEY (campaign_id, contact_id)
) WITHOUT ROWID;
INSERT INTO campaign_recipients_new (campaign_id, contact_id, status, message_id, error)
SELECT r.campaign_id, r.contact_id,
       CASE WHEN r.status = 'failed' AND EXISTS (
                SELECT 1 FROM outbox o WHERE o.account_id = (SELECT account_id FROM campaigns c WHERE c.id = r.campaign_id)
                   AND o.message_id = r.message_id AND o.status = 'pending')  -- index outbox_message
            THEN 'retrying' ELSE r.status END,
       r.message_id, r.error
  FROM campaign_recipients r;
DROP TABLE campaign_recipients;
ALTER TABLE campaign_recipients_new RENAME TO campaign_recipients;
CREATE INDEX campaign_recipients_status ON campaign_recipients(campaign_id, status, contact_id);

UPDATE campaigns
   SET retrying = (SELECT COUNT(*) FROM campaign_recipients r WHERE r.campaign_id = campaigns.id
                      AND r.status = 'retrying'),
       failed = (SELECT COUNT(*) FROM campaign_recipients r WHERE r.campaign_id = campaigns.id AND r.status = 'failed')
 WHERE failed > 0;
