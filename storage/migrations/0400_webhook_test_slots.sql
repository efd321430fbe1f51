-- Send test event (POST /v1/account/webhook-test) holds one of the account's outbound slots while its request
-- runs, shared by every process on one database: a row per test in flight, until `until` (a process that died
-- mid-test leaves a row that lapses). Counted with the account's claimed outbox rows (storage/webhook_tests.py).
CREATE TABLE webhook_test_slots (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    until TEXT NOT NULL
);
CREATE INDEX webhook_test_slots_by_account ON webhook_test_slots (account_id, until);
-- The account's deliveries in flight, counted per test without reading its pending backlog: claims are
-- cleared when an attempt's outcome is recorded, so this index holds only rows being delivered.
CREATE INDEX outbox_claimed ON outbox (account_id, claimed_until) WHERE claimed_until IS NOT NULL;
