-- Each agent's load kept as a counter (issue 40: inbound throughput with automatic assignment): users.open_load is
-- how many of the account's conversations are assigned to the user and open or pending (the inbox's "Mine"), so
-- that an assignment reads it instead of counting them (storage/assignment.py). Triggers keep it in the same
-- transaction as every change of a conversation's status or assignee, its insert and its delete, whatever
-- statement makes it (a message's upsert, a person's change, a merge, an erasure, an account's deletion).
ALTER TABLE users ADD COLUMN open_load INTEGER NOT NULL DEFAULT 0;
UPDATE users SET open_load = (SELECT COUNT(*) FROM conversations v WHERE v.account_id = users.account_id
    AND v.assignee_user_id = users.id AND v.status IN ('open', 'pending'));

-- A conversation is inserted with an assignee only by automatic assignment (a new contact's message assigned on
-- its write: services/assignment.py): the agent also takes the account's next turn, in the same statement.
CREATE TRIGGER conversations_load_insert AFTER INSERT ON conversations
    WHEN new.assignee_user_id IS NOT NULL AND new.status IN ('open', 'pending') BEGIN
    UPDATE users SET open_load = open_load + 1, last_assignment_turn = (SELECT COALESCE(MAX(t.last_assignment_turn),
        0) + 1 FROM users t WHERE t.account_id = new.account_id)
        WHERE id = new.assignee_user_id AND account_id = new.account_id;
END;

CREATE TRIGGER conversations_load_delete AFTER DELETE ON conversations
    WHEN old.assignee_user_id IS NOT NULL AND old.status IN ('open', 'pending') BEGIN
    UPDATE users SET open_load = open_load - 1 WHERE id = old.assignee_user_id AND account_id = old.account_id;
END;

-- Every inbound message's upsert names status: the WHEN leaves those that change nothing counted at one test.
CREATE TRIGGER conversations_load_update AFTER UPDATE OF status, assignee_user_id ON conversations
    WHEN old.assignee_user_id IS NOT new.assignee_user_id OR (old.assignee_user_id IS NOT NULL
        AND (old.status IN ('open', 'pending')) <> (new.status IN ('open', 'pending'))) BEGIN
    UPDATE users SET open_load = open_load - 1 WHERE id = old.assignee_user_id AND account_id = old.account_id
        AND old.status IN ('open', 'pending');
    UPDATE users SET open_load = open_load + 1 WHERE id = new.assignee_user_id AND account_id = new.account_id
        AND new.status IN ('open', 'pending');
END;

-- The load is read from the users row now: the index that counted it goes. The claim walks the account's users in
-- the order of its mode (round robin: the oldest turn, never assigned first; balanced: the fewest open, then so)
-- and stops at the first who may take one; the turns' MAX is read from users_turn's end.
DROP INDEX conversations_load;
CREATE INDEX users_turn ON users(account_id, last_assignment_turn, id);
CREATE INDEX users_load ON users(account_id, open_load, last_assignment_turn, id);
