-- SQLite's search index only (0706_message_search_accounts.sql): PostgreSQL's trigram indexes are on messages,
-- and a search's account_id = ? narrows them itself.
SELECT 1;
