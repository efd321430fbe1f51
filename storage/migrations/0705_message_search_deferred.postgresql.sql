-- SQLite's search index only (0705_message_search_deferred.sql): PostgreSQL's trigram indexes are the messages'
-- own (0600_message_search.postgresql.sql), kept by the database itself.
SELECT 1;
