-- A deactivated user keeps no conversation that still waits for an answer (storage/users.py update_user does
-- this at the deactivation from now on): what users deactivated before this release still hold, open, pending
-- or snoozed, returns to the unassigned queue. Resolved ones keep their assignee, as history.
UPDATE conversations SET assignee_user_id = NULL
    WHERE status IN ('open', 'pending', 'snoozed')
      AND assignee_user_id IN (SELECT id FROM users WHERE active = 0);
