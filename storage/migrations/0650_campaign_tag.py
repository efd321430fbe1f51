"""A campaign's audience is a list or a tag (issue 41): campaigns gain `tag` (the normalised contact tag whose
contacts are snapshotted at start) and list_id may be NULL (a tag campaign has no list); the service lets exactly
one of them be set.

SQLite cannot drop a NOT NULL in place and campaigns cannot be rebuilt in a migration's transaction (see
0437_campaign_drafts.py): removing a NOT NULL constraint is one of the changes SQLite documents as safe through
the table's CREATE statement in sqlite_master (https://www.sqlite.org/lang_altertable.html#otheralter).
PostgreSQL runs 0650_campaign_tag.postgresql.sql instead."""
from __future__ import annotations

from storage.interface import OwnConnection
from storage.migrate import rewrite_sqlite_table

OLD = "list_id TEXT NOT NULL REFERENCES lists(id)"
NEW = "list_id TEXT REFERENCES lists(id)"


def migrate(cx: OwnConnection) -> list[str]:
    cx.execute("ALTER TABLE campaigns ADD COLUMN tag TEXT")
    rewrite_sqlite_table(cx, "campaigns", OLD, NEW, "list_id")
    return ["campaigns.tag added; campaigns.list_id may be NULL (a tag campaign)"]
