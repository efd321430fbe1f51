"""Campaign drafts (issue 43 item 7): a campaign may be a `draft` (made, nothing sent, nothing snapshotted)
until a person starts or schedules it. The status CHECK of campaigns gains 'draft'.

SQLite cannot alter a CHECK, and rebuilding campaigns is not possible in a migration's transaction: outbox
and campaign_recipients refer to it, and foreign_keys cannot be turned off inside a transaction (dropping the
old table would then violate them). Widening a CHECK changes nothing stored, so this uses SQLite's documented
procedure for such changes (https://www.sqlite.org/lang_altertable.html#otheralter): the table's CREATE
statement is rewritten in sqlite_master and schema_version moved on, in this transaction. PostgreSQL runs
0437_campaign_drafts.postgresql.sql instead."""

OLD = "CHECK (status IN ('scheduled', 'running', 'paused', 'completed', 'cancelled'))"
NEW = "CHECK (status IN ('draft', 'scheduled', 'running', 'paused', 'completed', 'cancelled'))"


def migrate(cx):
    sql = cx.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'campaigns'").fetchone()[0]
    if sql.count(OLD) != 1:
        raise RuntimeError(f"campaigns' status CHECK is not the one this migration widens: {sql}")
    version = cx.execute("PRAGMA schema_version").fetchone()[0]
    cx.execute("PRAGMA writable_schema = ON")
    try:
        cx.execute("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'campaigns'",
                   (sql.replace(OLD, NEW),))
        cx.execute(f"PRAGMA schema_version = {version + 1}")
    finally:
        cx.execute("PRAGMA writable_schema = OFF")
    return ["campaigns.status may be 'draft'"]
