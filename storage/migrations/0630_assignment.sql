-- Automatic assignment with capacity (issue 40; services/assignment.py). A user is available (their own away
-- switch), takes at most capacity open conversations (NULL: no limit), was last seen with a live page at
-- last_seen_at (any server process writes it: services/assignment.py SeenBeat) and had their last automatic
-- assignment at turn last_assignment_turn (round robin gives the next one to the smallest turn).
ALTER TABLE users ADD COLUMN available INTEGER NOT NULL DEFAULT 1;
ALTER TABLE users ADD COLUMN capacity INTEGER CHECK (capacity IS NULL OR capacity >= 0);
ALTER TABLE users ADD COLUMN last_seen_at TEXT;
ALTER TABLE users ADD COLUMN last_assignment_turn INTEGER;
-- A new or reopened conversation waits here for an agent since queued_at (NULL: not waiting): the queue,
-- oldest first, is read from its own small index.
ALTER TABLE conversations ADD COLUMN queued_at TEXT;
CREATE INDEX conversations_queue ON conversations(account_id, queued_at) WHERE queued_at IS NOT NULL;
-- Each agent's load (open and pending conversations), counted per decision from this index alone (status is a
-- column too: without it SQLite reads every row to check the status again).
CREATE INDEX conversations_load ON conversations(account_id, assignee_user_id, status)
    WHERE assignee_user_id IS NOT NULL AND status IN ('open', 'pending');
