-- The search index without its per-row column sizes (columnsize=0): they serve only bm25 ranking, which search
-- never uses (it walks matches newest first: storage/search.py), and writing them is a share of what the index
-- costs every inbound write (bench/README.md "Search"). The same table otherwise (0600_message_search.sql), made
-- anew and filled from the messages; the triggers are made again since they name it.
DROP TRIGGER message_search_insert;
DROP TRIGGER message_search_delete;
DROP TABLE message_search;

CREATE VIRTUAL TABLE message_search USING fts5(body, digits, content = '', columnsize = 0, tokenize = 'trigram');

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

INSERT INTO message_search (rowid, body, digits)
    SELECT rowid, body, CASE WHEN body GLOB '*[0-9]*' THEN replace(replace(replace(replace(replace(replace(replace(
        body, ' ', ''), '(', ''), ')', ''), '+', ''), '-', ''), '.', ''), '/', '') ELSE '' END FROM messages;
