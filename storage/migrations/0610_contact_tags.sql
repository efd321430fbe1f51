-- Contact tags (issue 41): a JSON array of normalised tags (services/contact_fields.py normalize_tags), sorted.
-- Filtering matches the element '"tag"' inside it (storage/contacts.py tag_like): tags hold no quote or backslash.
ALTER TABLE contacts ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
