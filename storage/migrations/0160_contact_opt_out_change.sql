-- Who and when last opted a contact out or back in (issue 25 §1): via 'reply' (a keyword the contact sent;
-- by = the keyword), 'user' (by hand in the UI; by = the user's email) or 'api' (PATCH /v1/contacts/{id}).
ALTER TABLE contacts ADD COLUMN opt_out_at TEXT;
ALTER TABLE contacts ADD COLUMN opt_out_via TEXT;
ALTER TABLE contacts ADD COLUMN opt_out_by TEXT;
