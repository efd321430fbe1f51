"""Parley's own mail (issue 39): an outbox row may be a `mail` (an invitation or a "Forgot password?" link sent by
the account's SMTP server), delivered, retried and recorded by the same worker, claims and attempts as webhooks.
The kind CHECK of outbox gains 'mail'.

Widening a CHECK changes nothing stored, so this uses SQLite's documented procedure (storage.migrate
rewrite_sqlite_table; outbox cannot be rebuilt in a migration's transaction, as 0437_campaign_drafts.py says of
campaigns). PostgreSQL runs 0670_outbox_mail.postgresql.sql instead."""
from __future__ import annotations

from storage.interface import OwnConnection
from storage.migrate import rewrite_sqlite_table

OLD = "CHECK (kind IN ('reply', 'notification'))"
NEW = "CHECK (kind IN ('reply', 'notification', 'mail'))"


def migrate(cx: OwnConnection) -> list[str]:
    rewrite_sqlite_table(cx, "outbox", OLD, NEW, "kind CHECK")
    return ["outbox.kind may be 'mail'"]
