-- PostgreSQL form of 0670_outbox_mail.py: an outbox row may be a 'mail' (Parley's own mail, issue 39). The
-- inline CHECK of the baseline is outbox_kind_check.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('reply', 'notification', 'mail'));
