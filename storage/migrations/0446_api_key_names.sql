-- Issue 44 §4: several named API keys per account, each with an id (for DELETE /v1/account/api-keys/{id}), a
-- name and when it was last used (written at most once a minute per key and process, not per request). The key
-- an account has today stays live as one of them, named "Default".
ALTER TABLE api_keys ADD COLUMN id TEXT;
ALTER TABLE api_keys ADD COLUMN name TEXT;
ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;
UPDATE api_keys SET id = 'key_' || lower(hex(randomblob(13))), name = 'Default';
CREATE UNIQUE INDEX api_keys_id ON api_keys(id);
