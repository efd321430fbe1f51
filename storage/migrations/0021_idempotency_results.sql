-- Idempotency-Key on every mutating endpoint (storage/idempotency.py): a key now remembers the result
-- of the write it protected (JSON), from which the service answers a retry exactly as it answered the
-- first request. The credits endpoint's rows (its answer body is its write's result) carry over as
-- they are. Rows older than 24 h are no longer read, and retention deletes them.
ALTER TABLE idempotency_keys RENAME COLUMN response TO result;
DROP INDEX idempotency_keys_age;
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
