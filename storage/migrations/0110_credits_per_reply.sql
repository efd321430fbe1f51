-- A sub-account's price per bot reply (issue 18 item 4) is the agency's to set, so it lives on the account
-- row, written only through the agency's API (PATCH /v1/subaccounts/{id}) and its Agency pages, and no
-- longer in the sub-account's own bot settings (which its own key can change). Integer hundredths like
-- balances; NULL = the default of 1 credit. A price a sub-account once set itself in bot.creditsPerReply is
-- not carried over: it may be the 0 this closes; the agency sets the price again where it differs.
ALTER TABLE accounts ADD COLUMN credits_per_reply INTEGER
    CHECK (credits_per_reply IS NULL OR (credits_per_reply >= 0 AND credits_per_reply <= 100000));
