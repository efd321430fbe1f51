-- Scale-out (issue 20): several server processes on one database share the background work.
-- An outbox row being delivered is claimed by one process until claimed_until (a lease): another process
-- takes it over only after that, so a process killed mid-delivery delays its rows, never loses them.
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
ALTER TABLE outbox ADD COLUMN claimed_until TEXT;
-- One owner at a time per background job (campaigns, imports, retention, snoozes, reports, bot recovery):
-- the owner renews its row before `until`; once it lapses (the owner died) another process takes it.
CREATE TABLE worker_leases (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    until TEXT NOT NULL
);
-- The API rate limit shared by every process on PostgreSQL: per key, GCRA's theoretical arrival time
-- (seconds since the epoch, PostgreSQL's clock) and whether the last request was allowed. SQLite (one
-- process) keeps it in memory and never writes here.
CREATE TABLE rate_limits (
    key TEXT PRIMARY KEY,
    tat DOUBLE PRECISION NOT NULL,
    allowed INTEGER NOT NULL DEFAULT 1
);
-- Facts every process of one database must agree on: 'secret_key_fingerprint' (a process started with
-- another --secret-key-file refuses to start, instead of failing every cookie and stored secret).
CREATE TABLE shared_facts (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
