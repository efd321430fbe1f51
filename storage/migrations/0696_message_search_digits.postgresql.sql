-- SQLite's search index only (0696_message_search_digits.sql): PostgreSQL's digits index (messages_digits_trgm)
-- is a partial expression index that costs nothing for a body without a digit.
SELECT 1;
