"""SQL for the website chat widget's row (migration 0640): its public id and its encrypted identity secret."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from storage.audit import record_by
from storage.contacts import fill_blanks_in_tx, get_contact
from storage.db import fetch_all, fetch_one, reads, writes
from storage.interface import Connection, Row

_COLUMNS = "account_id, id, identity_secret, created_at"


@writes
def ensure_widget(cx: Connection, account_id: str, widget_id: str, created_at: str) -> Row | None:
    """The account's widget row, made with widget_id when it has none (two first asks at once make one)."""
    cx.execute("INSERT INTO widgets (account_id, id, created_at) VALUES (?, ?, ?) ON CONFLICT (account_id) DO NOTHING",
               (account_id, widget_id, created_at))
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM widgets WHERE account_id = ?", (account_id,))


@reads
def get_widget(cx: Connection, account_id: str) -> Row | None:
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM widgets WHERE account_id = ?", (account_id,))


@reads
def widget_by_id(cx: Connection, widget_id: str) -> Row | None:
    """The widget with this public id and its account's settings, or None: what a visitor's request needs."""
    return fetch_one(cx, "SELECT w.account_id, w.id, w.identity_secret, a.settings FROM widgets w"
                         " JOIN accounts a ON a.id = w.account_id WHERE w.id = ?", (widget_id,),
                     json_columns=("settings",))


@writes
def set_identity_secret(cx: Connection, account_id: str, widget_id: str, secret: str, created_at: str, by: Mapping[str, Any] | None = None) -> dict[str, str]:
    """secret (encrypted) becomes the widget's identity secret, replacing any; returns it as stored (an
    Idempotency-Key retry is answered from it)."""
    ensure_widget.sync(cx, account_id, widget_id, created_at)
    cx.execute("UPDATE widgets SET identity_secret = ? WHERE account_id = ?", (secret, account_id))
    record_by(cx, by, account_id=account_id, action="widget.identity_secret.rotated")
    return {"secret": secret}


@reads
def visitor_contact_id(cx: Connection, account_id: str, from_id: str) -> str | None:
    """The contact a visitor's fromId ("web:…") maps to, or None before their first message (or after erasure)."""
    row = cx.execute("SELECT contact_id FROM channel_identities WHERE account_id = ? AND from_id = ?",
                     (account_id, from_id)).fetchone()
    return row[0] if row else None


@writes
def add_visitor_identity(cx: Connection, account_id: str, from_id: str, contact_id: str) -> str:
    """The fromId (an identified visitor's) names contact_id too, unless it names a contact already (two
    identifies at once: the first wins). Returns the contact the fromId names."""
    cx.execute("INSERT INTO channel_identities (account_id, from_id, contact_id) VALUES (?, ?, ?)"
               " ON CONFLICT DO NOTHING", (account_id, from_id, contact_id))
    return cx.execute("SELECT contact_id FROM channel_identities WHERE account_id = ? AND from_id = ?",
                      (account_id, from_id)).fetchone()[0]


@reads
def visitor_messages(cx: Connection, account_id: str, contact_id: str, limit: int) -> list[Row]:
    """The contact's newest ``limit`` messages on the widget's channel, oldest first: what the visitor's chat shows
    (messages_account_contact's index, read backwards)."""
    rows = fetch_all(cx, "SELECT id, direction, author, body, media_url, media_content_type, created_at, message_type"
                         " FROM messages"
                         " WHERE account_id = ?"
                         " AND contact_id = ? AND channel = 'web' ORDER BY id DESC LIMIT ?",
                     (account_id, contact_id, limit))
    return rows[::-1]


@reads
def web_identity(cx: Connection, account_id: str, contact_id: str) -> str | None:
    """How the contact is known on the widget: "verified" (an identified visitor), "not verified" (anonymous
    visitors only), or None (never wrote from the widget)."""
    ids = [row[0] for row in cx.execute("SELECT from_id FROM channel_identities WHERE account_id = ? AND contact_id = ?"
                                        " AND from_id LIKE 'web:%'", (account_id, contact_id))]
    if not ids:
        return None
    return "verified" if any(i.startswith("web:id:") for i in ids) else "not verified"


@writes
def fill_visitor_email(cx: Connection, account_id: str, contact_id: str, email: str) -> None:
    """The email a visitor left, on their contact when it has none and no other contact has it (fill_blanks_in_tx's
    rule: another's address is neither taken nor its holder told)."""
    contact = get_contact.sync(cx, account_id, contact_id)
    if contact:
        fill_blanks_in_tx(cx, contact, {"email": email})


@reads
def web_from_ids(cx: Connection, account_id: str, contact_id: str) -> list[str]:
    """The widget visitors' fromIds ("web:…") that map to the contact: who an agent's typing is shown to."""
    return [row[0] for row in cx.execute("SELECT from_id FROM channel_identities WHERE account_id = ? AND contact_id = ?"
                                         " AND from_id LIKE 'web:%' LIMIT 20", (account_id, contact_id))]
