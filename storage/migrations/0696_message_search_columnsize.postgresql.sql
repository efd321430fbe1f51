-- SQLite's search index only (0696_message_search_columnsize.sql): PostgreSQL's pg_trgm indexes are unchanged.
SELECT 1;
