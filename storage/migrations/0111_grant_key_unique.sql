-- A grant's Idempotency-Key is unique per agency for good (issue 18 item 11, docs/design.md#wave-3-contracts): an auto-recharge
-- notification is retried for ~30 h while Idempotency-Key answers are kept 24 h, so the grant history, which
-- is never pruned, is what answers a key seen before (the first answer, replayed), whenever it comes again.
--
-- Grants made twice under one key before this index existed (the bug it closes) keep their rows: the
-- balance holds them. The later ones lose the key (noted in their description), so the index can exist.
UPDATE credit_transactions
   SET description = COALESCE(description || ' ', '') || '[granted again under Idempotency-Key '
                     || idempotency_key || ' before keys were unique]',
       idempotency_key = NULL
 WHERE kind = 'grant' AND idempotency_key IS NOT NULL
   AND id > (SELECT MIN(first.id) FROM credit_transactions first
              WHERE first.kind = 'grant' AND first.granted_by = credit_transactions.granted_by
                AND first.idempotency_key = credit_transactions.idempotency_key);
CREATE UNIQUE INDEX credit_grants_key ON credit_transactions(granted_by, idempotency_key)
    WHERE kind = 'grant' AND idempotency_key IS NOT NULL;
