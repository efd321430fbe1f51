-- Credits (docs/api.md#sub-account-credits-agency-accounts, docs/design.md#api-decisions "Credits"): a balance per account, its history, and the answers
-- remembered for the optional Idempotency-Key header.
--
-- Amounts are INTEGER hundredths of a credit (1.5 credits = 150), never REAL: 0.1 + 0.2 is exactly 30
-- hundredths, sums and comparisons are exact, and PostgreSQL's BIGINT holds the same values. The API
-- accepts at most two decimal places and shows plain numbers (150 -> 1.5). The CHECK makes a negative
-- balance impossible whatever the caller does; the upper bound (10^12 credits) keeps every balance
-- exactly representable as a JSON/IEEE double (< 2^53 hundredths).
ALTER TABLE accounts ADD COLUMN credit_hundredths INTEGER NOT NULL DEFAULT 0
    CHECK (credit_hundredths >= 0 AND credit_hundredths <= 100000000000000);
-- GET /v1/subaccounts: an agency's sub-accounts in id (keyset) order without a sort.
CREATE INDEX accounts_agency_subaccounts ON accounts(parent_agency_id, id);

-- One row per change of a balance, written in the same transaction as the change: SUM(amount) over an
-- account equals its balance, and balance_after is the balance right after this row.
CREATE TABLE credit_transactions (
    id INTEGER PRIMARY KEY,                  -- in commit order: the history's strict order
    account_id TEXT NOT NULL REFERENCES accounts(id),   -- whose balance changed
    kind TEXT NOT NULL CHECK (kind IN ('grant', 'spend')),
    amount INTEGER NOT NULL CHECK ((kind = 'grant' AND amount > 0) OR (kind = 'spend' AND amount < 0)),
    balance_after INTEGER NOT NULL CHECK (balance_after >= 0),
    description TEXT,                        -- grant: the caller's note; spend: the reason
    granted_by TEXT REFERENCES accounts(id), -- grant: the agency that granted
    idempotency_key TEXT,                    -- grant: the Idempotency-Key header, when sent
    created_at TEXT NOT NULL
);
CREATE INDEX credit_transactions_account ON credit_transactions(account_id, id);

-- Idempotency-Key answers (24 h), per calling account. request_hash covers the endpoint and the
-- normalized parameters: a retry with the same hash gets response back unchanged; another hash is 422.
CREATE TABLE idempotency_keys (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    key TEXT NOT NULL,
    request_hash TEXT NOT NULL,              -- hex SHA-256
    response TEXT NOT NULL,                  -- the JSON body first answered
    created_at TEXT NOT NULL,
    PRIMARY KEY (account_id, key)
);
CREATE INDEX idempotency_keys_age ON idempotency_keys(account_id, created_at);
