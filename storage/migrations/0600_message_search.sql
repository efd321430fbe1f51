-- Search over message text (GET /v1/search, storage/search.py): an FTS5 index with the trigram tokenizer, so that
-- any substring of 3+ characters is found (words, prefixes, scripts written without spaces), in every language.
-- It holds no copy of the text (contentless, content=''): rows are the messages' rowids, the text is read from
-- messages by rowid. Not external content (content=messages): it would read a column digits that messages lacks
-- whenever something scans the table (a dump, a backup tool). Column digits is the body with
-- the separators a phone number is written with taken out (' ()+-./'), so "4155550199" finds "+1 (415) 555-0199";
-- empty for a body without a digit. The triggers keep it in the transaction that inserts or deletes a message
-- (every path: inbound, replies, campaigns, the bot, erasure); bodies are never updated. SEARCH_DIGITS in
-- storage/search.py is the same expression: a contentless FTS5 delete must name the values it indexed.
CREATE VIRTUAL TABLE message_search USING fts5(body, digits, content = '', tokenize = 'trigram');

CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN
    INSERT INTO message_search (rowid, body, digits) VALUES (new.rowid, new.body,
        CASE WHEN new.body GLOB '*[0-9]*' THEN replace(replace(replace(replace(replace(replace(replace(new.body,
            ' ', ''), '(', ''), ')', ''), '+', ''), '-', ''), '.', ''), '/', '') ELSE '' END);
END;

CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN
    INSERT INTO message_search (message_search, rowid, body, digits) VALUES ('delete', old.rowid, old.body,
        CASE WHEN old.body GLOB '*[0-9]*' THEN replace(replace(replace(replace(replace(replace(replace(old.body,
            ' ', ''), '(', ''), ')', ''), '+', ''), '-', ''), '.', ''), '/', '') ELSE '' END);
END;

-- The messages stored before this migration.
INSERT INTO message_search (rowid, body, digits)
    SELECT rowid, body, CASE WHEN body GLOB '*[0-9]*' THEN replace(replace(replace(replace(replace(replace(replace(
        body, ' ', ''), '(', ''), ')', ''), '+', ''), '-', ''), '.', ''), '/', '') ELSE '' END FROM messages;
