-- PostgreSQL form of 0446_api_key_names.sql (random ids from md5 instead of randomblob).
ALTER TABLE api_keys ADD COLUMN id TEXT;
ALTER TABLE api_keys ADD COLUMN name TEXT;
ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;
UPDATE api_keys SET id = 'key_' || substr(md5(random()::text || key_hash), 1, 26), name = 'Default';
CREATE UNIQUE INDEX api_keys_id ON api_keys(id);
