-- The website chat widget (issue 38, docs/guide.md "Website chat widget"): one per account, made when the account
-- first asks for its snippet. Its public id (wid_…) names it in the embed line and the visitors' URLs; the
-- identity secret (encrypted with the secret key, like the webhook signing secret) checks visitors' identify
-- hashes. Visitors themselves are not stored: their token is sealed by the server, and a visitor's contact is
-- made by their first message like any inbound sender's (channel_identities, fromId "web:…").
CREATE TABLE widgets (
    account_id TEXT PRIMARY KEY REFERENCES accounts(id),
    id TEXT NOT NULL UNIQUE,                 -- wid_…
    identity_secret TEXT,                    -- encrypted; null until one is made
    created_at TEXT NOT NULL
);
