-- Each agent's load kept as a counter (issue 40; as 0690_assignment_load.sql, which says why): users.open_load,
-- kept by a trigger in the transaction of every insert, delete, and change of status or assignee of a
-- conversation. The increment takes the user's row lock until COMMIT: an automatic assignment that claims the
-- agent under the same lock (storage/assignment.py) sees every committed change of their load.
ALTER TABLE users ADD COLUMN open_load INTEGER NOT NULL DEFAULT 0;
UPDATE users SET open_load = (SELECT COUNT(*) FROM conversations v WHERE v.account_id = users.account_id
    AND v.assignee_user_id = users.id AND v.status IN ('open', 'pending'));

CREATE FUNCTION conversations_load() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.assignee_user_id IS NOT NULL AND OLD.status IN ('open', 'pending') THEN
        UPDATE users SET open_load = open_load - 1 WHERE id = OLD.assignee_user_id AND account_id = OLD.account_id;
    END IF;
    IF TG_OP = 'INSERT' THEN  -- only automatic assignment inserts one with an assignee: their next turn too
        UPDATE users SET open_load = open_load + 1, last_assignment_turn = (SELECT COALESCE(MAX(t.last_assignment_turn),
            0) + 1 FROM users t WHERE t.account_id = NEW.account_id)
            WHERE id = NEW.assignee_user_id AND account_id = NEW.account_id;
    ELSIF TG_OP = 'UPDATE' AND NEW.assignee_user_id IS NOT NULL AND NEW.status IN ('open', 'pending') THEN
        UPDATE users SET open_load = open_load + 1 WHERE id = NEW.assignee_user_id AND account_id = NEW.account_id;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER conversations_load_insert AFTER INSERT ON conversations FOR EACH ROW
    WHEN (NEW.assignee_user_id IS NOT NULL AND NEW.status IN ('open', 'pending'))
    EXECUTE FUNCTION conversations_load();
CREATE TRIGGER conversations_load_delete AFTER DELETE ON conversations FOR EACH ROW
    WHEN (OLD.assignee_user_id IS NOT NULL AND OLD.status IN ('open', 'pending'))
    EXECUTE FUNCTION conversations_load();
CREATE TRIGGER conversations_load_update AFTER UPDATE OF status, assignee_user_id ON conversations FOR EACH ROW
    WHEN (OLD.assignee_user_id IS DISTINCT FROM NEW.assignee_user_id OR (OLD.assignee_user_id IS NOT NULL
        AND (OLD.status IN ('open', 'pending')) <> (NEW.status IN ('open', 'pending'))))
    EXECUTE FUNCTION conversations_load();

DROP INDEX conversations_load;
CREATE INDEX users_turn ON users(account_id, last_assignment_turn NULLS FIRST, id);
CREATE INDEX users_load ON users(account_id, open_load, last_assignment_turn NULLS FIRST, id);
