"""SQL for custom-channel messages, the fromId -> contact mapping and a message's delivery attempts.
The *_in_tx functions are plain sync functions for composing one transaction in services/messaging.py."""
import json

from storage.db import fetch_all, fetch_one, reads

_COLUMNS = ("id, account_id, contact_id, direction, status, body, channel, campaign_id, message_type,"
            " external_id, from_id, to_id, media_url, media_content_type, error, author, author_user_id, created_at,"
            " bot_outcome")
_FIELDS = [c.strip() for c in _COLUMNS.split(",")]


_JSON = ("error", "bot_outcome")  # columns stored as JSON text


def insert_message_in_tx(cx, message):
    cx.execute(f"INSERT INTO messages ({_COLUMNS}) VALUES ({', '.join('?' * len(_FIELDS))})",
               tuple(json.dumps(message[f]) if f in _JSON and message.get(f) else message.get(f)
                     for f in _FIELDS))
    return message


def find_by_external_id_in_tx(cx, account_id, external_id):
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM messages WHERE account_id = ? AND external_id = ?",
                     (account_id, external_id), json_columns=_JSON)


find_by_external_id = reads(find_by_external_id_in_tx)


def identity_contact_id_in_tx(cx, account_id, from_id):
    """The contact a fromId maps to (spec §2 rule 3), or None on first sight."""
    row = cx.execute("SELECT contact_id FROM channel_identities WHERE account_id = ? AND from_id = ?",
                     (account_id, from_id)).fetchone()
    return row[0] if row else None


def insert_identity_in_tx(cx, account_id, from_id, contact_id):
    cx.execute("INSERT INTO channel_identities (account_id, from_id, contact_id) VALUES (?, ?, ?)",
               (account_id, from_id, contact_id))


def reply_target_in_tx(cx, account_id, contact_id):
    """Where a reply to this contact goes: (from_id, channel) of its latest inbound message, else its
    first channel identity with no channel, else None."""
    row = cx.execute("SELECT from_id, channel FROM messages WHERE account_id = ? AND contact_id = ?"
                     " AND direction = 'inbound' AND from_id IS NOT NULL ORDER BY id DESC LIMIT 1",
                     (account_id, contact_id)).fetchone()
    if row:
        return row[0], row[1]
    row = cx.execute("SELECT from_id FROM channel_identities WHERE account_id = ? AND contact_id = ?"
                     " ORDER BY from_id LIMIT 1", (account_id, contact_id)).fetchone()
    return (row[0], None) if row else None


@reads
def get_message(cx, account_id, message_id):
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM messages WHERE account_id = ? AND id = ?",
                     (account_id, message_id), json_columns=_JSON)


@reads
def list_contact_messages(cx, account_id, contact_id, after=None, limit=50):
    """Oldest first; ``after`` is the last id of the previous page. Returns limit + 1 rows at most,
    so the caller can tell whether another page exists."""
    return _contact_messages(cx, f"SELECT {_COLUMNS} FROM messages m", _JSON, account_id, contact_id,
                             after=after or "", limit=limit)


def _contact_messages(cx, select, json_columns, account_id, contact_id, *, before=None, after=None, limit):
    """A page of a contact's messages: with ``after``, up to limit + 1 after that id, oldest first; otherwise
    the newest up to limit + 1 before ``before`` (or of all), newest first."""
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
def list_delivery_attempts(cx, account_id, message_id):
    """Every delivery attempt of an outbound message (delivery_attempts, migration 0005), oldest first."""
    rows = cx.execute("SELECT a.at, a.http_status, a.error FROM outbox o JOIN delivery_attempts a"
                      " ON a.outbox_id = o.id WHERE o.account_id = ? AND o.message_id = ?"
                      " ORDER BY a.at, a.id", (account_id, message_id))
    return [dict(r) for r in rows]


# ---- the inbox's thread ------------------------------------------------------------------------

_THREAD_SELECT = (f"SELECT {', '.join('m.' + f for f in _FIELDS)}, m.bot_outcome, u.email AS author_email"
                  " FROM messages m LEFT JOIN users u ON u.id = m.author_user_id AND u.account_id = m.account_id")
_THREAD_JSON = ("error", "bot_outcome")


@reads
def thread_page(cx, account_id, contact_id, *, before=None, after=None, limit=50):
    """A contact's messages for the thread, with the bot's outcome and the email of the user who wrote a
    reply. With ``after``: up to limit + 1 messages after that id, oldest first (what a live page lacks).
    Otherwise the newest up to limit + 1 before ``before`` (or the newest of all), newest first."""
    return _contact_messages(cx, _THREAD_SELECT, _THREAD_JSON, account_id, contact_id, before=before, after=after,
                             limit=limit)


@reads
def get_thread_message(cx, account_id, message_id):
    """One message shaped like thread_page's rows, or None."""
    return fetch_one(cx, f"{_THREAD_SELECT} WHERE m.account_id = ? AND m.id = ?", (account_id, message_id),
                     json_columns=_THREAD_JSON)


@reads
def referenced_media(cx, media_urls):
    """The ones among ``media_urls`` (media:<sha256>) that some message names (any account's)."""
    if not media_urls:
        return set()
    return {row[0] for row in cx.execute(
        f"SELECT DISTINCT media_url FROM messages WHERE media_url IN ({', '.join('?' * len(media_urls))})",
        list(media_urls))}
