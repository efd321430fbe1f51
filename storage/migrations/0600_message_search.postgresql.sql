-- Search over message text (GET /v1/search, storage/search.py): trigram GIN indexes (pg_trgm, shipped with
-- PostgreSQL's contrib and a trusted extension: the database's owner may create it) that ILIKE '%...%' uses.
-- The second indexes the body with the separators a phone number is written with taken out (' ()+-./'), for a
-- query of digits, only for bodies with a digit. Indexes are kept by every insert and delete by themselves.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX messages_body_trgm ON messages USING gin (body gin_trgm_ops);
CREATE INDEX messages_digits_trgm ON messages USING gin (translate(body, ' ()+-./', '') gin_trgm_ops)
    WHERE body ~ '[0-9]';
