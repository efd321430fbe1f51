-- The search index (0600, 0696, 0705) scoped by account (SQLite): a third column, account, holds one trigram that
-- stands for the message's account (its code in message_search_accounts, as three CJK characters: one trigram, the
-- same width for every account, so that no account's token is part of another's), and a search asks for it beside
-- its words. Before, the index held every account's messages unscoped, and a search walked the matches of every
-- account newest first, keeping its own: an account searching a word that another account uses a lot walked all
-- of the other's (61 ms for 100 messages beside 300,000, growing with the file). FTS5 now intersects the account's
-- entries with the word's. Contentless FTS5 tables take no new column: the index is built again here, from every
-- message (9 us a message of ~60 characters, measured: ~9 s for a million, once).
-- The account's token: char(19968 + code / 20000^2 % 20000, 19968 + code / 20000 % 20000, 19968 + code % 20000)
-- (U+4E00..U+9C1F); storage/search.py ACCOUNT_TOKEN is the same expression.
-- (0705's insert trigger, which notes a message pending, stays as it is.)
DROP TRIGGER IF EXISTS message_search_delete;
DROP TABLE IF EXISTS message_search;
DROP TABLE IF EXISTS message_search_accounts;

-- code: an INTEGER PRIMARY KEY, so that no VACUUM renumbers it (the index holds it).
CREATE TABLE message_search_accounts (code INTEGER PRIMARY KEY, account_id TEXT NOT NULL UNIQUE);
INSERT INTO message_search_accounts (account_id) SELECT DISTINCT account_id FROM messages ORDER BY account_id;

CREATE VIRTUAL TABLE message_search USING fts5(body, digits, account, content = '', tokenize = 'trigram');

INSERT INTO message_search (rowid, body, digits, account)
    SELECT m.rowid, m.body,
        CASE WHEN (m.body GLOB '*[0-9][ ()+./-][0-9]*' OR m.body GLOB '*[0-9][ ()+./-][ ()+./-][0-9]*'
            OR m.body GLOB '*[0-9][ ()+./-][ ()+./-][ ()+./-][0-9]*')
        THEN replace(replace(replace(replace(replace(replace(replace(m.body, ' ', ''), '(', ''), ')', ''), '+', ''), '-', ''), '.', ''), '/', '') ELSE '' END,
        char(19968 + a.code / 400000000 % 20000, 19968 + a.code / 20000 % 20000, 19968 + a.code % 20000)
    FROM messages m JOIN message_search_accounts a ON a.account_id = m.account_id;
DELETE FROM message_search_pending;  -- every message is indexed above

CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN
    INSERT INTO message_search (message_search, rowid, body, digits, account)
        SELECT 'delete', old.rowid, old.body,
            CASE WHEN (old.body GLOB '*[0-9][ ()+./-][0-9]*' OR old.body GLOB '*[0-9][ ()+./-][ ()+./-][0-9]*'
                OR old.body GLOB '*[0-9][ ()+./-][ ()+./-][ ()+./-][0-9]*')
            THEN replace(replace(replace(replace(replace(replace(replace(old.body, ' ', ''), '(', ''), ')', ''), '+', ''), '-', ''), '.', ''), '/', '') ELSE '' END,
            char(19968 + a.code / 400000000 % 20000, 19968 + a.code / 20000 % 20000, 19968 + a.code % 20000)
        FROM message_search_accounts a
        WHERE a.account_id = old.account_id
            AND NOT EXISTS (SELECT 1 FROM message_search_pending WHERE message_rowid = old.rowid);
    DELETE FROM message_search_pending WHERE message_rowid = old.rowid;
END;
