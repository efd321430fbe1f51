-- Issue 44 §2: every reply payload carries a per-contact sequence, so a receiver can restore the order of
-- replies that arrive out of order (a retry overtaken by later replies). The contact holds the last number
-- given; the transaction that creates an outbound message takes the next one (row lock: commit order).
ALTER TABLE contacts ADD COLUMN reply_sequence INTEGER NOT NULL DEFAULT 0;
