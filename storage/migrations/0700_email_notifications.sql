-- Parley's mail to its agents (issue 39; services/agent_mail.py): each user chooses whether to be emailed on a new
-- conversation, on a handoff (the bot hands a conversation to a person) and on a conversation assigned to them.
-- Off by default; the mail goes out only when the account has SMTP set (Settings > Email).
ALTER TABLE users ADD COLUMN email_new_conversation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN email_handoff INTEGER NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN email_assigned INTEGER NOT NULL DEFAULT 0;
-- The mailbox import's state for GET /v1/account and Settings > Email (services/mail_in.py): besides the error and
-- since when (0680), when the last failure happened (error_at, kept after it works again: last_error), when the
-- folder was last looked at successfully (checked_at), when mail was last imported and how many that look brought
-- (imported_at, imported_count), and whether the server's IDLE is used (1) or the folder is polled (0).
ALTER TABLE mail_import_status ADD COLUMN last_error TEXT;
ALTER TABLE mail_import_status ADD COLUMN error_at TEXT;
ALTER TABLE mail_import_status ADD COLUMN checked_at TEXT;
ALTER TABLE mail_import_status ADD COLUMN imported_at TEXT;
ALTER TABLE mail_import_status ADD COLUMN imported_count INTEGER;
ALTER TABLE mail_import_status ADD COLUMN idle INTEGER;
