-- Canned replies (issue 21): saved replies of an account, offered in the thread's reply box by their short
-- code (/thanks). The code is unique per account without case (code_key), so that /Thanks and /thanks
-- never name two replies.
CREATE TABLE canned_replies (
    id TEXT PRIMARY KEY,                     -- cr_…
    account_id TEXT NOT NULL REFERENCES accounts(id),
    code TEXT NOT NULL,                      -- as typed: letters, digits, - and _
    code_key TEXT NOT NULL,                  -- lower(code)
    body TEXT NOT NULL,                      -- may hold {{firstName}}-style placeholders, as a campaign's body
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX canned_replies_code ON canned_replies(account_id, code_key);
