-- The search index's digits column (0600_message_search.sql) only for a body where separators join digits (a
-- digit, one to three of ' ()+-./', a digit: "555-0199", "(415) 555"): only there does taking the separators out
-- make a run of digits that the body itself lacks. Every other body's digit runs are in its body column already,
-- and a digits query looks in both columns (storage/search.py). Before, any body with a digit ("at 5 pm", an order
-- number) was indexed twice over, a cost on every inbound write (bench/README.md "Search").
DROP TRIGGER message_search_insert;
DROP TRIGGER message_search_delete;

-- Messages indexed under the old rule that the new one leaves out: their digits entries go (a contentless
-- delete names the values it indexed), and they are indexed again with an empty digits column.
CREATE TEMP TABLE digits_redone AS SELECT rowid AS id, body FROM messages
    WHERE body GLOB '*[0-9]*' AND NOT (body GLOB '*[0-9][ ()+./-][0-9]*' OR body GLOB '*[0-9][ ()+./-][ ()+./-][0-9]*'
            OR body GLOB '*[0-9][ ()+./-][ ()+./-][ ()+./-][0-9]*');
INSERT INTO message_search (message_search, rowid, body, digits)
    SELECT 'delete', id, body, replace(replace(replace(replace(replace(replace(replace(body, ' ', ''), '(', ''), ')', ''), '+', ''), '-', ''), '.', ''), '/', '') FROM digits_redone;
INSERT INTO message_search (rowid, body, digits) SELECT id, body, '' FROM digits_redone;
DROP TABLE digits_redone;

CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN
    INSERT INTO message_search (rowid, body, digits) VALUES (new.rowid, new.body,
        CASE WHEN (new.body GLOB '*[0-9][ ()+./-][0-9]*' OR new.body GLOB '*[0-9][ ()+./-][ ()+./-][0-9]*'
            OR new.body GLOB '*[0-9][ ()+./-][ ()+./-][ ()+./-][0-9]*')
        THEN replace(replace(replace(replace(replace(replace(replace(new.body, ' ', ''), '(', ''), ')', ''), '+', ''), '-', ''), '.', ''), '/', '') ELSE '' END);
END;

CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN
    INSERT INTO message_search (message_search, rowid, body, digits) VALUES ('delete', old.rowid, old.body,
        CASE WHEN (old.body GLOB '*[0-9][ ()+./-][0-9]*' OR old.body GLOB '*[0-9][ ()+./-][ ()+./-][0-9]*'
            OR old.body GLOB '*[0-9][ ()+./-][ ()+./-][ ()+./-][0-9]*')
        THEN replace(replace(replace(replace(replace(replace(replace(old.body, ' ', ''), '(', ''), ')', ''), '+', ''), '-', ''), '.', ''), '/', '') ELSE '' END);
END;
