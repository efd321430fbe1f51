-- The search index (0600, 0696) written off the message's own transaction, in batches: a message's insert only
-- notes its rowid in message_search_pending, and the writer indexes the pending messages INDEX_BATCH at a time
-- between its batches (storage/search.py index_pending, storage/writer.py). FTS5 flushed its pending terms into a
-- new segment at every COMMIT: a cost per transaction (~34 us) on top of the trigrams' own (~27 us a message),
-- and with a few messages a group commit the index cost inbound 14.8 % of its throughput (bench/HISTORY.md).
-- A search reads the index and, by LIKE, the messages still pending (a few hundred at most): every message is
-- found from its own commit on, as before. A message deleted (erasure) while pending leaves nothing to delete in
-- the index; once indexed, the contentless delete names the values the indexer wrote (the same expression).
-- Written to run again over itself (a test re-runs the search migrations in order).
CREATE TABLE IF NOT EXISTS message_search_pending (message_rowid INTEGER PRIMARY KEY);

DROP TRIGGER IF EXISTS message_search_insert;
DROP TRIGGER IF EXISTS message_search_delete;

CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN
    INSERT INTO message_search_pending (message_rowid) VALUES (new.rowid);
END;

CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN
    INSERT INTO message_search (message_search, rowid, body, digits)
        SELECT 'delete', old.rowid, old.body,
            CASE WHEN (old.body GLOB '*[0-9][ ()+./-][0-9]*' OR old.body GLOB '*[0-9][ ()+./-][ ()+./-][0-9]*'
                OR old.body GLOB '*[0-9][ ()+./-][ ()+./-][ ()+./-][0-9]*')
            THEN replace(replace(replace(replace(replace(replace(replace(old.body, ' ', ''), '(', ''), ')', ''), '+', ''), '-', ''), '.', ''), '/', '') ELSE '' END
        WHERE NOT EXISTS (SELECT 1 FROM message_search_pending WHERE message_rowid = old.rowid);
    DELETE FROM message_search_pending WHERE message_rowid = old.rowid;
END;
