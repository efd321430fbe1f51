-- "View as" is never more than the viewer (issue 36 §1, §2): a view-as session now belongs to the agency user
-- (user_id) acting in the sub-account (account_id), lives only as long as the viewer's own session named here
-- (viewer_session_hash) and the role it started with (viewer_role). The view-as sessions from before (the
-- sub-account owner's, tied to nothing) end.
DELETE FROM sessions WHERE viewer_user_id IS NOT NULL;
ALTER TABLE sessions ADD COLUMN viewer_session_hash TEXT;
ALTER TABLE sessions ADD COLUMN viewer_role TEXT;
CREATE INDEX sessions_viewer_session ON sessions(viewer_session_hash);
