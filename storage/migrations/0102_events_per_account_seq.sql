-- Live event positions per account (issue 18, item 10): a page sees its own account's sequence number
-- (seq: 1, 2, 3, ... per account), never the global id, so the gaps between two events it sees tell it
-- nothing of other accounts' traffic. id stays the hub's internal, global reading position.
-- emit_in_tx numbers each event MAX(seq) + 1 of its account in the same INSERT, and pruning never deletes
-- an account's newest event, so an account's numbers never go back.
ALTER TABLE events ADD COLUMN seq INTEGER;
UPDATE events SET seq = numbered.n
  FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY account_id ORDER BY id) AS n FROM events) AS numbered
 WHERE numbered.id = events.id;
DROP INDEX events_account;
CREATE UNIQUE INDEX events_account_seq ON events(account_id, seq);
