"""Campaign drafts (issue 43 item 7): a campaign may be a `draft` (made, nothing sent, nothing snapshotted)
until a person starts or schedules it. The status CHECK of campaigns gains 'draft'.

SQLite cannot alter a CHECK, and rebuilding campaigns is not possible in a migration's transaction: outbox
and campaign_recipients refer to it, and foreign_keys cannot be turned off inside a transaction (dropping the
old table would then violate them). Widening a CHECK changes nothing stored, so this uses SQLite's documented
procedure for such changes (https://www.sqlite.org/lang_altertable.html#otheralter): the table's CREATE
statement is rewritten in sqlite_master and schema_version moved on, in this transaction. PostgreSQL runs
0437_campaign_drafts.postgresql.sql instead."""
from __future__ import annotations

from storage.interface import OwnConnection
from storage.migrate import rewrite_sqlite_table

OLD = "CHECK (status IN ('scheduled', 'running', 'paused', 'completed', 'cancelled'))"
NEW = "CHECK (status IN ('draft', 'scheduled', 'running', 'paused', 'completed', 'cancelled'))"


def migrate(cx: OwnConnection) -> list[str]:
    rewrite_sqlite_table(cx, "campaigns", OLD, NEW, "status CHECK")
    return ["campaigns.status may be 'draft'"]
