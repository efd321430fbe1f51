-- Users and roles (issue 21): an account's users are owners (everything), admins (everything but owners and
-- keys) or agents (inbox, contacts, lists). The user an account was made with (is_owner) is its owner; any
-- other user before this migration could do everything, so becomes an admin. A deactivated user (active 0)
-- cannot sign in and has no sessions.
ALTER TABLE users ADD COLUMN role TEXT NOT NULL DEFAULT 'admin' CHECK (role IN ('owner', 'admin', 'agent'));
ALTER TABLE users ADD COLUMN name TEXT;
ALTER TABLE users ADD COLUMN active INTEGER NOT NULL DEFAULT 1;
UPDATE users SET role = 'owner' WHERE is_owner = 1;
CREATE INDEX users_account_role ON users(account_id, role, active);
