-- Contacts: phone stored E.164, email case-folded. At most one contact per phone per account.
CREATE TABLE contacts (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    first_name TEXT,
    last_name TEXT,
    phone TEXT,
    email TEXT,
    created_at TEXT NOT NULL
);
CREATE UNIQUE INDEX contacts_account_phone ON contacts(account_id, phone) WHERE phone IS NOT NULL;
CREATE INDEX contacts_account_email ON contacts(account_id, email) WHERE email IS NOT NULL;
