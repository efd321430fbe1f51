"""SQL for Parley's own mail (services/mail_out.py): a mail is an outbox row of kind 'mail' (migration 0670),
written in the transaction that made what it announces (an invitation's user and link, a reset link), and sent,
retried and recorded by the delivery worker like a webhook."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from storage.db import fetch_all, fetch_one, reads, writes
from storage.interface import Connection
from storage.one_time_links import insert_link
from storage.outbox import enqueue_in_tx


def queue_in_tx(cx: Connection, mail: Mapping[str, Any]) -> None:
    """mail: {id (its outbox webhook_id, the Message-ID's left part), account_id, payload}."""
    enqueue_in_tx(cx, account_id=mail["account_id"], kind="mail", payload=mail["payload"], webhook_id=mail["id"])


def forget_recipient_in_tx(cx: Connection, account_id: str, email: str, now: str) -> None:
    """A removed user's address leaves the account's mail: their mails (sent or not) are deleted with their attempts,
    but for one being sent at this moment (its attempt records itself; the cleanup takes it later)."""
    rows = cx.execute("SELECT id, payload FROM outbox WHERE account_id = ? AND kind = 'mail' AND payload LIKE ?"
                      " AND (claimed_until IS NULL OR claimed_until < ?)",
                      (account_id, f"%{json.dumps(email)}%", now)).fetchall()
    ids = [row[0] for row in rows if json.loads(row[1])["to"] == email]
    if ids:
        marks = ", ".join("?" for _ in ids)
        cx.execute(f"DELETE FROM delivery_attempts WHERE outbox_id IN ({marks})", ids)
        cx.execute(f"DELETE FROM outbox WHERE id IN ({marks})", ids)


@writes
def insert_links_with_mail(cx: Connection, pairs: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> None:
    """One-time links, each with the mail that carries it (or None), in one transaction."""
    for link, mail in pairs:
        insert_link.sync(cx, link)
        if mail is not None:
            queue_in_tx(cx, mail)


@reads
def recent(cx: Connection, account_id: str, limit: int = 5) -> list[dict[str, Any]]:
    """The account's newest mails, newest first: {id, to, subject, status, attempts, last_error, sent_at,
    created_at} (never the text: it may carry a one-time link)."""
    rows = fetch_all(cx, "SELECT webhook_id, payload, status, attempts, last_error, sent_at, created_at FROM outbox"
                         " WHERE account_id = ? AND kind = 'mail' ORDER BY id DESC LIMIT ?", (account_id, limit),
                     json_columns=("last_error",))
    return [{"id": row["webhook_id"], "to": json.loads(row["payload"])["to"],
             "subject": json.loads(row["payload"])["subject"], "status": row["status"], "attempts": row["attempts"],
             "last_error": row["last_error"], "sent_at": row["sent_at"], "created_at": row["created_at"]} for row in rows]


# ---- the email channel's import (services/mail_in.py) -------------------------------------------

@reads
def mailbox_accounts(cx: Connection) -> list[tuple[str, dict[str, Any]]]:
    """The accounts whose settings name an IMAP server: [(id, settings)] (the importer keeps one connection each)."""
    rows = cx.execute("SELECT id, settings FROM accounts WHERE settings LIKE ?", ('%"imap"%',)).fetchall()
    return [(row[0], json.loads(row[1])) for row in rows]


@reads
def checkpoint(cx: Connection, account_id: str) -> dict[str, Any] | None:
    """{mailbox, uidvalidity, last_uid, updated_at} of the account's import, or None before its first."""
    return fetch_one(cx, "SELECT mailbox, uidvalidity, last_uid, updated_at FROM mail_checkpoints WHERE account_id = ?",
                     (account_id,))


@writes
def set_checkpoint(cx: Connection, account_id: str, mailbox: str, uidvalidity: int, last_uid: int, now: str) -> None:
    cx.execute("INSERT INTO mail_checkpoints (account_id, mailbox, uidvalidity, last_uid, updated_at)"
               " VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id) DO UPDATE SET mailbox = excluded.mailbox,"
               " uidvalidity = excluded.uidvalidity, last_uid = excluded.last_uid, updated_at = excluded.updated_at",
               (account_id, mailbox, uidvalidity, last_uid, now))


@writes
def mark_bounced(cx: Connection, account_id: str, message_id: str, error: Mapping[str, Any], now: str) -> bool:
    """A bounce for an outbound email message: the message is Failed with the bounce's reason (final: no retry),
    its delivery row too. Returns True when the account has such a message (an unknown one changes nothing)."""
    from storage.delivery import set_message_status_in_tx
    found = cx.execute("SELECT id FROM messages WHERE account_id = ? AND id = ? AND direction = 'outbound'"
                       " AND channel = 'email'", (account_id, message_id)).fetchone()
    if found is None:
        return False
    cx.execute("UPDATE outbox SET status = 'failed', last_error = ? WHERE account_id = ? AND message_id = ?"
               " AND status <> 'pending'", (json.dumps(error), account_id, message_id))
    set_message_status_in_tx(cx, account_id, message_id, "Failed", json.dumps(error), now)
    return True


@writes
def set_import_status(cx: Connection, account_id: str, error: str | None, now: str) -> None:
    """The import's state changed: error (in words) since now, or None (it works again, since now)."""
    cx.execute("INSERT INTO mail_import_status (account_id, error, since) VALUES (?, ?, ?)"
               " ON CONFLICT (account_id) DO UPDATE SET error = excluded.error, since = excluded.since",
               (account_id, error, now))


@reads
def import_status(cx: Connection, account_id: str) -> dict[str, Any] | None:
    """{error, since} of the account's import, or None before its first look."""
    return fetch_one(cx, "SELECT error, since FROM mail_import_status WHERE account_id = ?", (account_id,))
