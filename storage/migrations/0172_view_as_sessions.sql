-- An agency views a sub-account's UI (issue 25 §5): a session of the sub-account's user that only works next
-- to the live session of the agency user named here (handlers.base.session_user); NULL for ordinary sessions.
ALTER TABLE sessions ADD COLUMN viewer_user_id TEXT REFERENCES users(id);
