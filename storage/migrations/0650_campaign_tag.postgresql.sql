-- PostgreSQL form of 0650_campaign_tag.py: a campaign's audience is a list or a tag (issue 41). tag is the
-- normalised contact tag snapshotted at start; list_id is NULL for a tag campaign (the service sets exactly one).
ALTER TABLE campaigns ADD COLUMN tag TEXT;
ALTER TABLE campaigns ALTER COLUMN list_id DROP NOT NULL;
