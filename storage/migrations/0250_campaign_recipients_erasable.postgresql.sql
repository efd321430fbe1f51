-- PostgreSQL form of 0250_campaign_recipients_erasable.sql: drop the foreign key from campaign_recipients.contact_id
-- to contacts (an erased contact's recipient rows stay, anonymised). Its name depends on the table's history
-- (0112 created the table as campaign_recipients_new and renamed it; a rename keeps constraint names).
ALTER TABLE campaign_recipients DROP CONSTRAINT IF EXISTS campaign_recipients_contact_id_fkey;
ALTER TABLE campaign_recipients DROP CONSTRAINT IF EXISTS campaign_recipients_new_contact_id_fkey;
