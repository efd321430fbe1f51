-- PostgreSQL form of 0437_campaign_drafts.py: campaigns.status may be 'draft' (made, nothing sent or
-- snapshotted until a person starts or schedules it). The inline CHECK of the baseline is campaigns_status_check.
ALTER TABLE campaigns DROP CONSTRAINT campaigns_status_check;
ALTER TABLE campaigns ADD CONSTRAINT campaigns_status_check
    CHECK (status IN ('draft', 'scheduled', 'running', 'paused', 'completed', 'cancelled'));
