"""SQL for Parley's own mail (services/mail_out.py): a mail is an outbox row of kind 'mail' (migration 0670),
written in the transaction that made what it announces (an invitation's user and link, a reset link), and sent,
retried and recorded by the delivery worker like a webhook."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from storage.db import fetch_all, reads, writes
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
