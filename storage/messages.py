"""SQL for custom-channel messages, the fromId -> contact mapping and a message's delivery attempts.
The *_in_tx functions are plain sync functions for composing one transaction (storage/inbound.py,
storage/outbound.py)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from storage.db import fetch_all, fetch_one, reads
from storage.dialect import dialect_of
from storage.interface import Connection, Row, execute_later
from storage.rows import MessageRow
from storage.users import author_sql

_COLUMNS = ("id, account_id, contact_id, direction, status, body, channel, campaign_id, message_type,"
            " external_id, from_id, to_id, media_url, media_content_type, error, author, author_user_id, created_at,"
            " bot_outcome, mail")
_FIELDS = [c.strip() for c in _COLUMNS.split(",")]
# Written on insert, never read back with the message: bot_pending is 1 while the bot owes the message a
# decision; status_at is when an outbound message's status last changed (GET /v1/messages?status=&since=).
_INSERT_FIELDS = _FIELDS + ["bot_pending", "status_at"]


_JSON = ("error", "bot_outcome", "mail")  # columns stored as JSON text


def insert_messages_in_tx(cx: Connection, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Insert messages (dicts with the columns as keys; a missing one is NULL). The statement names only the
    columns some message has a value for: sqlite3 binds each None parameter through its adapter lookup
    (~0.5 µs), and an outbound message leaves half of them NULL. A lone message (every inbound one) skips
    the column-by-column transposition that a campaign's batch pays once for hundreds."""
    if not messages:
        return messages
    if len(messages) == 1:
        message = messages[0]
        columns = tuple(f for f in _INSERT_FIELDS if message.get(f) is not None and (message[f] or f not in _JSON))
        execute_later(cx, _insert_sql(columns),
                      [json.dumps(message[c]) if c in _JSON else message[c] for c in columns])
        return messages
    values = zip(*[[m.get(f) for f in _INSERT_FIELDS] for m in messages])  # column by column
    names: list[str] = []
    kept: list[Sequence[Any]] = []
    for name, column in zip(_INSERT_FIELDS, values):
        if column.count(None) < len(column):
            names.append(name)
            kept.append([json.dumps(v) if v else None for v in column] if name in _JSON else column)
    cx.executemany(_insert_sql(tuple(names)), zip(*kept))
    return messages


_INSERT_SQL: dict[tuple[str, ...], str] = {}


def _insert_sql(columns: tuple[str, ...]) -> str:
    """The INSERT naming these columns, built once per set of columns (a handful of shapes occur)."""
    sql = _INSERT_SQL.get(columns)
    if sql is None:
        sql = _INSERT_SQL[columns] = f"INSERT INTO messages ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    return sql


def insert_message_in_tx(cx: Connection, message: dict[str, Any]) -> dict[str, Any]:
    return insert_messages_in_tx(cx, [message])[0]


def find_by_external_id_in_tx(cx: Connection, account_id: str, external_id: str) -> Row | None:
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM messages WHERE account_id = ? AND external_id = ?",
                     (account_id, external_id), json_columns=_JSON)


find_by_external_id = reads(find_by_external_id_in_tx)


def inbound_context_in_tx(cx: Connection, account_id: str, external_id: str, from_id: str, campaigns_since: str, with_keywords: bool) -> tuple[bool, str | None, str | None, str | None, tuple[Any, ...], tuple[str | None, str | None], str | None]:
    """What storing an inbound message needs to know first, in one statement (on PostgreSQL one round trip, not
    five): (whether a message with this messageSid is stored already, the contact the fromId maps to or None,
    the campaignId of that contact's latest campaign message if made at or after campaigns_since (as
    storage.campaigns.latest_campaign_key_in_tx), the account's stored bot as JSON text or None, its
    (optOutKeywords, optInKeywords), None where not set or not with_keywords: SQLite parses the settings JSON
    again for each field it extracts, so only a body that may be a keyword pays for those two), and its
    (businessHours, sla) settings as JSON text or None, and its automatic assignment setting (assignment) as
    JSON text or None)."""
    field = dialect_of(cx).json_field
    row = cx.execute(
        "SELECT EXISTS (SELECT 1 FROM messages e WHERE e.account_id = a.id AND e.external_id = ?), i.contact_id,"
        " (SELECT CASE WHEN k.created_at >= ? THEN k.campaign_id END FROM messages k WHERE k.account_id = a.id"
        " AND k.contact_id = i.contact_id AND k.author = 'campaign' ORDER BY k.id DESC LIMIT 1),"
        f" {field('a.settings', 'bot')}, {field('a.settings', 'assignment')},"
        f" CASE WHEN ? = 1 THEN {field('a.settings', 'optOutKeywords')} END,"
        f" CASE WHEN ? = 1 THEN {field('a.settings', 'optInKeywords')} END,"
        f" {field('a.settings', 'businessHours')}, {field('a.settings', 'sla')}"
        " FROM accounts a LEFT JOIN channel_identities i ON i.account_id = a.id AND i.from_id = ?"
        " WHERE a.id = ?", (external_id, campaigns_since, int(with_keywords), int(with_keywords), from_id,
                            account_id)).fetchone()
    if row is None:
        return False, None, None, None, (None, None), (None, None), None
    return (bool(row[0]), row[1], row[2], row[3], tuple(json.loads(value) if value else None for value in row[5:7]),
            (row[7], row[8]), row[4])


def identity_contact_id_in_tx(cx: Connection, account_id: str, from_id: str) -> str | None:
    """The contact a fromId maps to (docs/api.md#custom-channel), or None on first sight."""
    row = cx.execute("SELECT contact_id FROM channel_identities WHERE account_id = ? AND from_id = ?",
                     (account_id, from_id)).fetchone()
    return row[0] if row else None


def lock_identity_in_tx(cx: Connection, account_id: str, from_id: str) -> bool:
    """Hold the fromId until COMMIT (storage/dialect.py lock): its first sight makes one contact. True when a
    lock was taken (then look again: another transaction may have mapped it meanwhile)."""
    return dialect_of(cx).lock(cx, f"identity:{account_id}:{from_id}")


def insert_identity_in_tx(cx: Connection, account_id: str, from_id: str, contact_id: str) -> None:
    cx.execute("INSERT INTO channel_identities (account_id, from_id, contact_id) VALUES (?, ?, ?)",
               (account_id, from_id, contact_id))


def reply_targets_in_tx(cx: Connection, account_id: str, contact_ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    """Where a reply to each of these contacts goes: {contact id: (from_id, channel)} of its latest inbound
    message, else (its first channel identity, None); a contact with neither is left out. Two statements
    whatever the number of contacts (a campaign's batch asks for hundreds)."""
    if not contact_ids:
        return {}
    ids = json.dumps(list(contact_ids))
    each = dialect_of(cx).json_list()
    # Scalar subqueries, one index seek each (messages_account_contact), not a join: PostgreSQL's planner may
    # hash-join the list with every message of the table instead.
    latest = ("FROM messages l WHERE l.account_id = ? AND l.contact_id = j.value AND l.direction = 'inbound'"
              " AND l.from_id IS NOT NULL ORDER BY l.id DESC LIMIT 1")
    targets = {row[0]: (row[1], row[2]) for row in cx.execute(
        f"SELECT j.value, (SELECT l.from_id {latest}), (SELECT l.channel {latest}) FROM {each}",
        (account_id, account_id, ids)) if row[1] is not None}
    if len(targets) < len(contact_ids):
        # channel_identities_contact (migration 0095): one seek per contact, not a scan of the account's identities
        targets.update((row[0], (row[1], None)) for row in cx.execute(
            "SELECT j.value, (SELECT i.from_id FROM channel_identities i WHERE i.account_id = ?"
            f" AND i.contact_id = j.value ORDER BY i.from_id LIMIT 1) FROM {each}",
            (account_id, json.dumps([c for c in contact_ids if c not in targets]))) if row[1] is not None)
    return targets


def reply_target_in_tx(cx: Connection, account_id: str, contact_id: str) -> tuple[str, str | None] | None:
    """reply_targets_in_tx for one contact: (from_id, channel), or None."""
    return reply_targets_in_tx(cx, account_id, [contact_id]).get(contact_id)


def channel_target_in_tx(cx: Connection, account_id: str, contact_id: str, channel: str) -> str | None:
    """The from_id of the contact's latest inbound message on this channel, or None."""
    row = cx.execute("SELECT from_id FROM messages WHERE account_id = ? AND contact_id = ? AND direction = 'inbound'"
                     " AND from_id IS NOT NULL AND channel = ? ORDER BY id DESC LIMIT 1",
                     (account_id, contact_id, channel)).fetchone()
    return row[0] if row else None


def last_inbound_mail_in_tx(cx: Connection, account_id: str, contact_id: str) -> dict[str, Any] | None:
    """The `mail` column (subject, Message-IDs) of the contact's latest inbound email written by a person (an
    out-of-office after it is not what a reply answers), else of its latest automatic one, or None."""
    rows = [json.loads(row[0]) for row in cx.execute(
        "SELECT mail FROM messages WHERE account_id = ? AND contact_id = ? AND direction = 'inbound'"
        " AND channel = 'email' AND mail IS NOT NULL ORDER BY id DESC LIMIT 5", (account_id, contact_id))]
    return next((mail for mail in rows if not mail.get("automatic")), rows[0] if rows else None)


@reads
def reply_channel(cx: Connection, account_id: str, contact_id: str) -> str | None:
    """The channel a reply to the contact goes out on by default (reply_target_in_tx's), or None."""
    return (reply_target_in_tx(cx, account_id, contact_id) or (None, None))[1]


@reads
def get_message(cx: Connection, account_id: str, message_id: str) -> MessageRow | None:
    return cast("MessageRow | None", fetch_one(cx, f"SELECT {_COLUMNS} FROM messages WHERE account_id = ? AND id = ?",
                                               (account_id, message_id), json_columns=_JSON))


@reads
def list_contact_messages(cx: Connection, account_id: str, contact_id: str, after: str | None = None, limit: int = 50) -> list[MessageRow]:
    """Oldest first; ``after`` is the last id of the previous page. Returns limit + 1 rows at most,
    so the caller can tell whether another page exists."""
    return cast("list[MessageRow]", _contact_messages(cx, f"SELECT {_COLUMNS} FROM messages m", _JSON, account_id,
                                                      contact_id, after=after or "", limit=limit))


def all_contact_messages_in_tx(cx: Connection, account_id: str, contact_id: str) -> list[MessageRow]:
    """Every message of the contact, oldest first (a person's data export)."""
    return cast("list[MessageRow]", fetch_all(
        cx, f"SELECT {_COLUMNS} FROM messages WHERE account_id = ? AND contact_id = ? ORDER BY id",
        (account_id, contact_id), json_columns=_JSON))


@reads
def list_outbound_by_status(cx: Connection, account_id: str, status: str, since: str | None, after: tuple[str, str] | None, limit: int) -> list[Row]:
    """Outbound messages with this status, by the time it was reached (status_at) then id, oldest first: those
    at or after ``since`` and after ``after`` ((status_at, id) of the previous page's last), limit + 1 at most.
    Rows carry status_at for the cursor."""
    sql, args = f"SELECT {_COLUMNS}, status_at FROM messages WHERE account_id = ? AND direction = 'outbound'" \
                " AND status = ?", [account_id, status]
    if since is not None:
        sql += " AND status_at >= ?"
        args.append(since)
    if after is not None:
        sql += " AND (status_at > ? OR (status_at = ? AND id > ?))"
        args += [after[0], after[0], after[1]]
    return fetch_all(cx, sql + " ORDER BY status_at, id LIMIT ?", (*args, limit + 1), json_columns=_JSON)


def _contact_messages(cx: Connection, select: str, json_columns: Sequence[str], account_id: str, contact_id: str, *, before: str | None = None, after: str | None = None, limit: int) -> list[Row]:
    """A page of a contact's messages: with ``after``, up to limit + 1 after that id, oldest first; otherwise
    the newest up to limit + 1 before ``before`` (or of all), newest first."""
    args: list[Any]  # ids, and the limit
    sql, args = f"{select} WHERE m.account_id = ? AND m.contact_id = ?", [account_id, contact_id]
    if after is not None:
        sql += " AND m.id > ? ORDER BY m.id LIMIT ?"
        args += [after, limit + 1]
    else:
        if before is not None:
            sql += " AND m.id < ?"
            args.append(before)
        sql += " ORDER BY m.id DESC LIMIT ?"
        args.append(limit + 1)
    return fetch_all(cx, sql, args, json_columns=json_columns)


@reads
def list_delivery_attempts(cx: Connection, account_id: str, message_id: str) -> list[Row]:
    """Every delivery attempt of an outbound message (delivery_attempts, migration 0005), oldest first."""
    rows = cx.execute("SELECT a.at, a.http_status, a.error FROM outbox o JOIN delivery_attempts a"
                      " ON a.outbox_id = o.id WHERE o.account_id = ? AND o.message_id = ?"
                      " ORDER BY a.at, a.id", (account_id, message_id))
    return [dict(r) for r in rows]


# ---- the inbox's thread ------------------------------------------------------------------------

_AUTHOR, _AUTHOR_JOINS = author_sql("m")
_THREAD_SELECT = (f"SELECT {', '.join('m.' + f for f in _FIELDS)}, m.bot_outcome, {_AUTHOR}"
                  f" FROM messages m{_AUTHOR_JOINS}")
_THREAD_JSON = ("error", "bot_outcome", "mail")


@reads
def thread_page(cx: Connection, account_id: str, contact_id: str, *, before: str | None = None, after: str | None = None, limit: int = 50) -> list[Row]:
    """A contact's messages for the thread, with the bot's outcome and the email of the user who wrote a
    reply. With ``after``: up to limit + 1 messages after that id, oldest first (what a live page lacks).
    Otherwise the newest up to limit + 1 before ``before`` (or the newest of all), newest first."""
    return _contact_messages(cx, _THREAD_SELECT, _THREAD_JSON, account_id, contact_id, before=before, after=after,
                             limit=limit)


@reads
def get_thread_message(cx: Connection, account_id: str, message_id: str) -> Row | None:
    """One message shaped like thread_page's rows, or None."""
    return fetch_one(cx, f"{_THREAD_SELECT} WHERE m.account_id = ? AND m.id = ?", (account_id, message_id),
                     json_columns=_THREAD_JSON)


@reads
def referenced_media(cx: Connection, media_urls: Sequence[str]) -> set[str]:
    """The ones among ``media_urls`` (media:<sha256>) that some message names (any account's)."""
    if not media_urls:
        return set()
    return {row[0] for row in cx.execute(
        f"SELECT DISTINCT media_url FROM messages WHERE media_url IN ({', '.join('?' * len(media_urls))})",
        list(media_urls))}


@reads
def count_contact_messages(cx: Connection, account_id: str, contact_id: str) -> int:
    """How many messages the contact has, both directions (the contact page's count; index
    messages_account_contact)."""
    return cx.execute("SELECT COUNT(*) FROM messages WHERE account_id = ? AND contact_id = ?",
                      (account_id, contact_id)).fetchone()[0]


@reads
def messages_by_ids(cx: Connection, account_id: str, message_ids: Sequence[str]) -> list[Row]:
    """The account's messages among these ids (the event stream fills its message events in with them), in
    chunks of at most 500 ids a statement."""
    found = []
    for start in range(0, len(message_ids), 500):
        chunk = message_ids[start:start + 500]
        found += fetch_all(cx, f"SELECT {_COLUMNS} FROM messages WHERE account_id = ? AND id IN"
                               f" ({', '.join('?' * len(chunk))})", (account_id, *chunk), json_columns=_JSON)
    return found
