-- Custom-channel messages (both directions) and the fromId -> contact mapping.
CREATE TABLE messages (
    id TEXT PRIMARY KEY,                     -- msg_…
    account_id TEXT NOT NULL REFERENCES accounts(id),
    contact_id TEXT NOT NULL REFERENCES contacts(id),
    direction TEXT NOT NULL CHECK (direction IN ('inbound', 'outbound')),
    status TEXT NOT NULL,                    -- inbound: customData.status (default 'received');
                                             -- outbound: 'Pending' until delivered, then 'Sent' or 'Failed'
    body TEXT NOT NULL,
    channel TEXT,
    campaign_id TEXT,
    message_type TEXT NOT NULL DEFAULT 'text',
    external_id TEXT,                        -- inbound customData.messageSid (or .id): unique per account
    from_id TEXT,
    to_id TEXT,
    media_url TEXT,                          -- http(s) URL as given, or media:<sha256> for stored data URIs
    media_content_type TEXT,
    error TEXT,                              -- JSON of the last failed delivery: {at, httpStatus, error}
    created_at TEXT NOT NULL
);
CREATE UNIQUE INDEX messages_account_external ON messages(account_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX messages_account_contact ON messages(account_id, contact_id, id);

-- docs/api.md#custom-channel: the same fromId always maps to the same contact.
CREATE TABLE channel_identities (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    from_id TEXT NOT NULL,
    contact_id TEXT NOT NULL REFERENCES contacts(id),
    PRIMARY KEY (account_id, from_id)
) WITHOUT ROWID;
