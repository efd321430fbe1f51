-- Bulk contact imports (issue 14): one row per CSV import job. The counts and the position in the file
-- are updated in the transaction that writes the batch of contacts they cover, so a crash never leaves
-- a row imported but not counted (or counted but not imported).
CREATE TABLE contact_imports (
    id TEXT PRIMARY KEY,                    -- imp_…
    account_id TEXT NOT NULL REFERENCES accounts(id),
    status TEXT NOT NULL,                   -- uploaded | queued | running | completed | cancelled | failed | interrupted
    runner TEXT NOT NULL,                   -- 'server' (UI uploads) or 'cli:<host>:<pid>' (import-contacts)
    file_name TEXT NOT NULL,                -- as uploaded or given to the CLI (shown, never opened)
    file_path TEXT NOT NULL,                -- where the bytes are: imports/<id>.csv in the data dir, or the CLI's file
    file_bytes INTEGER NOT NULL,
    delimiter TEXT NOT NULL,
    header TEXT NOT NULL,                   -- JSON list of the header row's cells
    data_start INTEGER NOT NULL,            -- byte offset of the first row after the header
    mapping TEXT NOT NULL,                  -- JSON {firstName|lastName|phone|email: column index or null}
    default_region TEXT,                    -- ISO 3166 code for phones without "+" (NULL: they fail, as in the API)
    list_id TEXT REFERENCES lists(id),
    new_list_name TEXT,                     -- a list to create when the import starts (drafts only)
    position INTEGER NOT NULL,              -- byte offset after the last committed row
    row_number INTEGER NOT NULL DEFAULT 1,  -- records consumed up to position, the header being row 1
    rows_read INTEGER NOT NULL DEFAULT 0,   -- = created + matched + failed
    created INTEGER NOT NULL DEFAULT 0,
    matched INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    errors_bytes INTEGER NOT NULL DEFAULT 0, -- committed length of the error report (longer after a crash: cut back)
    run_started_at TEXT,                    -- this run's start, rows and position: the rate and the time left
    run_start_rows INTEGER NOT NULL DEFAULT 0,
    run_start_position INTEGER NOT NULL DEFAULT 0,
    resumed INTEGER NOT NULL DEFAULT 0,     -- runs resumed after a restart
    message TEXT,                           -- why it stopped, for failed / interrupted / cancelled
    created_by TEXT REFERENCES users(id),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX contact_imports_account ON contact_imports(account_id, id);
CREATE INDEX contact_imports_status ON contact_imports(status);
