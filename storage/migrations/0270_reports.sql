-- Reports (issue 22 §2): per-account per-day summaries that the reports worker (services/reports_worker.py)
-- folds new rows into, so that a report reads a few hundred summary rows instead of scanning messages.
-- The fold and the move of its watermark are one transaction: a crash mid-fold leaves both as they were.
CREATE TABLE report_daily (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    day TEXT NOT NULL,                       -- YYYY-MM-DD (UTC), substr(created_at, 1, 10)
    messages_in INTEGER NOT NULL DEFAULT 0,
    messages_out INTEGER NOT NULL DEFAULT 0,
    bot_rule INTEGER NOT NULL DEFAULT 0,     -- bot outcomes, by the day of the inbound message
    bot_provider INTEGER NOT NULL DEFAULT 0,
    bot_handoff INTEGER NOT NULL DEFAULT 0,
    bot_failed INTEGER NOT NULL DEFAULT 0,
    bot_other INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,     -- webhook delivery attempts, by the day of the attempt
    attempts_ok INTEGER NOT NULL DEFAULT 0,
    retries INTEGER NOT NULL DEFAULT 0,      -- attempts after an outbox row's first
    retries_ok INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, day)
);

-- First-response times as a histogram per account, day (of the response) and responder ('bot' or the
-- user id of the person): fixed buckets (common/report_buckets.py), so medians and p90s come from counts.
CREATE TABLE report_response_buckets (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    day TEXT NOT NULL,
    responder TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    responses INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, day, responder, bucket)
);

-- Replies to a campaign, per contact (repliers = rows, replies = the sum).
CREATE TABLE report_campaign_replies (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id),
    contact_id TEXT NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    replies INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, contact_id)
);

-- How far each source has been folded: 'messages' (a message id: every id below it is folded) and
-- 'delivery_attempts' (an attempt id, as text: every id up to it is folded).
CREATE TABLE report_watermarks (
    name TEXT PRIMARY KEY,
    position TEXT NOT NULL
);

-- Every opt-out and opt-in as it happens (contacts keep only the latest): opt-outs per day read this.
CREATE TABLE opt_out_changes (
    id TEXT PRIMARY KEY,                     -- ooc_…, time-ordered
    account_id TEXT NOT NULL REFERENCES accounts(id),
    contact_id TEXT NOT NULL,
    opted_out INTEGER NOT NULL,              -- 1: opted out, 0: back in
    via TEXT,
    at TEXT NOT NULL
);
CREATE INDEX opt_out_changes_account_at ON opt_out_changes(account_id, at);

-- What opted out before this table existed (the latest change of each contact still opted out).
INSERT INTO opt_out_changes (id, account_id, contact_id, opted_out, via, at)
SELECT 'ooc_' || id, account_id, id, 1, opt_out_via, opt_out_at FROM contacts
 WHERE opted_out = 1 AND opt_out_at IS NOT NULL;
