-- What the writer process committed (storage/db.py, storage/writer.py). Every transaction the writer
-- commits also records here the number of its batch, per Database (one per server or ops-command run),
-- and which calls of that batch rolled back. When the writer dies after a COMMIT and before its answer
-- reached the server, the server reads this row to tell the callers of that batch "stored" from
-- "nothing was written", instead of guessing.
CREATE TABLE writer_batches (
    writer TEXT PRIMARY KEY,                 -- the Database's random token
    batch INTEGER NOT NULL,                  -- the number of its last committed batch
    failed TEXT,                             -- JSON list of the calls of that batch that rolled back; NULL: none
    at INTEGER NOT NULL                      -- unix seconds of that commit (retention drops dead writers' rows)
) WITHOUT ROWID;
