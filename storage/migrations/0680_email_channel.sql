-- The email channel (issue 39; services/mail_in.py, services/mail_out.py). messages.mail: JSON of an email
-- message's own parts, {subject, messageId, references, quoted, automatic}: the subject shown and answered with
-- "Re:", the Message-IDs a reply names in In-Reply-To and References, the quoted history trimmed off the body
-- for display (body + quoted is the whole text). NULL on every other channel.
ALTER TABLE messages ADD COLUMN mail TEXT;
-- Where an account's mailbox import stands: the folder it read (host, user, folder: another one starts afresh),
-- its UIDVALIDITY and the highest UID imported. The checkpoint moves only once the mails up to it are stored, so
-- a restart imports from there: nothing twice (each mail's Message-ID is its messageSid besides), none missed.
CREATE TABLE mail_checkpoints (
    account_id TEXT PRIMARY KEY REFERENCES accounts(id),
    mailbox TEXT NOT NULL,
    uidvalidity BIGINT NOT NULL,
    last_uid BIGINT NOT NULL,
    updated_at TEXT NOT NULL
);
-- How the import of an account's mailbox goes, for Settings > Email: the last connection failure in words and
-- since when (NULL: it works), and when it last looked at the folder. Written only when that changes.
CREATE TABLE mail_import_status (
    account_id TEXT PRIMARY KEY REFERENCES accounts(id),
    error TEXT,
    since TEXT NOT NULL
);
