-- The audit list (issue 21): who changed settings, keys, users, credits or erased a contact, and when. Written
-- in the transaction of the change it records (storage/audit.py), so an entry exists exactly when the change does.
CREATE TABLE audit_log (
    id TEXT PRIMARY KEY,                     -- aud_…: time-ordered, the keyset of the newest-first pages
    account_id TEXT NOT NULL REFERENCES accounts(id),
    at TEXT NOT NULL,                        -- ISO 8601 UTC
    actor TEXT NOT NULL,                     -- a user id, 'api-key' or 'operator' (the CLI)
    actor_label TEXT,                        -- the user's email at the time; NULL for a key or the operator
    action TEXT NOT NULL,                    -- user.invited, settings.updated, api_key.rotated, ...
    subject_id TEXT,                         -- what the action was on: a user, a sub-account, a contact
    detail TEXT                              -- JSON object: what changed (setting names, role from/to), never secrets
);
CREATE INDEX audit_log_account ON audit_log(account_id, id);
