"""SQL for Parley's own mail (services/mail_out.py): a mail is an outbox row of kind 'mail' (migration 0670),
written in the transaction that made what it announces (an invitation's user and link, a reset link), and sent,
retried and recorded by the delivery worker like a webhook."""
from __future__ import annotations

import json
from datetime import timedelta
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from common.email_channel import server
from common.ids import iso, new_id, parse_iso
from storage.bot_state import HUMAN_AUTHORS
from storage.db import fetch_all, fetch_one, reads, writes
from storage.interface import Connection
from storage.one_time_links import insert_link
from storage.outbox import enqueue_in_tx, enqueue_many_in_tx
from storage.user_states import signs_in


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


_STATUS_COLUMNS = ("error", "since", "last_error", "error_at", "checked_at", "imported_at", "imported_count", "idle")


@writes
def record_import_status(cx: Connection, account_id: str, fields: Mapping[str, Any]) -> None:
    """Update the account's import state: fields, a subset of error (in words, None: it works), since (when error
    last changed), last_error and error_at (the latest failure, kept once it works again), checked_at (the folder
    looked at successfully), imported_at and imported_count (mail stored by the last look that stored any), idle."""
    names = [name for name in _STATUS_COLUMNS if name in fields]
    if not names:
        return
    updated = list(names)
    if "since" not in fields:  # a first row needs one: the time of what is written (kept by later updates)
        fields = {**fields, "since": fields.get("checked_at") or fields.get("error_at")}
        names.append("since")
    cx.execute(f"INSERT INTO mail_import_status (account_id, {', '.join(names)})"
               f" VALUES (?, {', '.join('?' for _ in names)}) ON CONFLICT (account_id) DO UPDATE SET"
               f" {', '.join(f'{name} = excluded.{name}' for name in updated)}",
               (account_id, *(fields[name] for name in names)))


@reads
def import_status(cx: Connection, account_id: str) -> dict[str, Any] | None:
    """The account's import state (record_import_status's columns) with its checkpoint (mailbox, uidvalidity,
    last_uid, checkpoint_at), or None before its first look."""
    return fetch_one(cx, "SELECT s.error, s.since, s.last_error, s.error_at, s.checked_at, s.imported_at,"
                         " s.imported_count, s.idle, c.mailbox, c.uidvalidity, c.last_uid, c.updated_at AS checkpoint_at"
                         " FROM mail_import_status s LEFT JOIN mail_checkpoints c ON c.account_id = s.account_id"
                         " WHERE s.account_id = ?", (account_id,))


# ---- Parley's mail to its agents (services/agent_mail.py) -----------------------------------------

# The mails an agent may choose (services/agent_mail.py), and the users column that holds each choice.
NEW_CONVERSATION, HANDOFF, ASSIGNED = "newConversation", "handoff", "assigned"
COLUMNS = {NEW_CONVERSATION: "email_new_conversation", HANDOFF: "email_handoff", ASSIGNED: "email_assigned"}
_SUBJECTS = {NEW_CONVERSATION: "New conversation", HANDOFF: "A conversation needs a person",
             ASSIGNED: "A conversation was assigned to you"}

def agent_recipients_in_tx(cx: Connection, account_id: str, preference: str, user_ids: Sequence[str] | None,
                           exclude: str | None) -> list[tuple[str, str]]:
    """[(user id, email)] of the account's users who chose this mail (preference: a users column), can sign in
    (active, not removed, the invitation accepted) and are among user_ids (None: any), but exclude."""
    if preference not in COLUMNS.values():
        raise ValueError(f"no such preference: {preference}")
    sql = (f"SELECT id, email FROM users WHERE account_id = ? AND {preference} = 1 AND {signs_in()}"
           " AND id IS DISTINCT FROM ?")
    args: list[Any] = [account_id, exclude]
    if user_ids is not None:
        if not user_ids:
            return []
        sql += f" AND id IN ({', '.join('?' for _ in user_ids)})"
        args += list(user_ids)
    return [(row[0], row[1]) for row in cx.execute(sql + " ORDER BY id", args)]


def assignee_in_tx(cx: Connection, account_id: str, contact_id: str) -> str | None:
    row = cx.execute("SELECT assignee_user_id FROM conversations WHERE account_id = ? AND contact_id = ?",
                     (account_id, contact_id)).fetchone()
    return row[0] if row else None


def assignees_in_tx(cx: Connection, account_id: str, contact_ids: Sequence[str]) -> dict[str, str | None]:
    """{contact id: assignee user id or None} of the account's conversations with these contacts."""
    if not contact_ids:
        return {}
    rows = cx.execute(f"SELECT contact_id, assignee_user_id FROM conversations WHERE account_id = ? AND contact_id"
                      f" IN ({', '.join('?' for _ in contact_ids)})", (account_id, *contact_ids)).fetchall()
    return {row[0]: row[1] for row in rows}


def had_inbound_in_tx(cx: Connection, account_id: str, contact_id: str) -> bool:
    """Whether the contact wrote before (its conversation has an inbound message)."""
    return cx.execute("SELECT 1 FROM conversations WHERE account_id = ? AND contact_id = ? AND last_inbound_id IS NOT"
                      " NULL", (account_id, contact_id)).fetchone() is not None


def mail_account_in_tx(cx: Connection, account_id: str) -> tuple[str, dict[str, Any]] | None:
    """(name, settings) of the account, or None."""
    row = cx.execute("SELECT name, settings FROM accounts WHERE id = ?", (account_id,)).fetchone()
    return (row[0], json.loads(row[1])) if row else None


def queue_agent_mail_in_tx(cx: Connection, account_id: str, kind: str, contact_id: str, *,
                           to: Sequence[str] | None = None, actor: str | None = None) -> int:
    """In the event's transaction: queue the mail of this kind about the conversation with contact_id to each user
    who chose it, among ``to`` (user ids; None: anyone) but the ``actor`` (the user whose action it is, or None).
    Costs one read of the users who chose it (none: nothing more); nothing is queued without SMTP. Returns how
    many mails were queued."""
    if kind == HANDOFF and to is None:
        assignee = assignee_in_tx(cx, account_id, contact_id)
        to = [assignee] if assignee else None
    recipients = agent_recipients_in_tx(cx, account_id, COLUMNS[kind], to, actor)
    if not recipients:
        return 0
    found = mail_account_in_tx(cx, account_id)
    if found is None or server(found[1], "smtp") is None:
        return 0
    name = found[0]
    for user_id, email in recipients:
        queue_in_tx(cx, {"id": new_id("mail"), "account_id": account_id, "payload": {
            "to": email, "subject": f"{_SUBJECTS[kind]} ({name})",
            "agent": {"kind": kind, "contactId": contact_id, "userId": user_id}}})
    return len(recipients)


def agents_assigned_in_tx(cx: Connection, account_id: str, assigned: Iterable[tuple[str, str | None]],
                          actor: str | None = None) -> int:
    """Conversations assigned in this transaction, [(contact id, user id)]: the mail to each assignee who chose it,
    unless they assigned it themselves (actor: the user id whose action it is)."""
    return sum(queue_agent_mail_in_tx(cx, account_id, ASSIGNED, contact_id, to=[user_id], actor=actor)
               for contact_id, user_id in assigned if user_id)


@reads
def agent_mail_facts(cx: Connection, account_id: str, contact_id: str, user_id: str) -> dict[str, Any] | None:
    """What an agent's mail says, read when it is sent (so an erased contact is never mailed): the contact's names,
    phone and email, its conversation's latest inbound message (body, channel), and whether the user can still
    sign in; None when the contact is gone (erased, merged away) or the user is not the account's."""
    row = fetch_one(cx, "SELECT c.first_name, c.last_name, c.phone, c.email, m.body AS last_body,"
                        " m.channel AS last_channel, (SELECT COUNT(*) FROM users u WHERE u.id = ? AND u.account_id = ?"
                        f" AND {signs_in('u')}) AS user_ok"
                        " FROM contacts c LEFT JOIN conversations v ON v.account_id = c.account_id"
                        " AND v.contact_id = c.id LEFT JOIN messages m ON m.account_id = c.account_id"
                        " AND m.id = v.last_inbound_id WHERE c.account_id = ? AND c.id = ?",
                    (user_id, account_id, account_id, contact_id))
    return row


# ---- a web visitor's replies by mail (services/visitor_mail.py) ------------------------------------

def visitor_mail_id(message_id: str) -> str:
    """The outbox webhook_id of the mail that carries this reply to a web visitor: one per reply, found by it."""
    return f"vmail_{message_id}"


VISITOR_MAIL_DELAY = timedelta(seconds=60)  # a reply no chat of the visitor showed within this is mailed
VISITOR_MAIL_AUTHORS = HUMAN_AUTHORS  # a person's reply is mailed: the visitor's chat shows the bot's answers live


def queue_visitor_mail_in_tx(cx: Connection, account_id: str, message: Mapping[str, Any],
                             contact: Mapping[str, Any]) -> bool:
    """In the reply's transaction: queue its mail when the reply is a person's, on the widget's channel, to a contact
    with an email who has not opted out, and the account has SMTP set. Returns whether it was queued."""
    if message["author"] not in VISITOR_MAIL_AUTHORS or not contact.get("email") or contact.get("opted_out"):
        return False
    found = mail_account_in_tx(cx, account_id)
    if found is None or server(found[1], "smtp") is None:
        return False
    enqueue_many_in_tx(cx, [{
        "account_id": account_id, "kind": "mail", "webhook_id": visitor_mail_id(message["id"]),
        "due_at": iso(parse_iso(message["created_at"]) + VISITOR_MAIL_DELAY),
        "payload": {"to": contact["email"], "subject": f"Your chat with {found[0]}",
                    "visitorReply": {"messageId": message["id"], "contactId": contact["id"]}}}])
    return True


@writes
def drop_visitor_mails(cx: Connection, account_id: str, message_ids: Sequence[str], now: str) -> int:
    """The visitor's chat showed these replies: their mails, not yet being sent, are not needed (deleted: never
    sent, nothing kept). A mail already claimed by a delivery goes. Returns how many were dropped."""
    if not message_ids:
        return 0
    ids = [visitor_mail_id(m) for m in message_ids]
    rows = cx.execute(f"SELECT id FROM outbox WHERE account_id = ? AND kind = 'mail' AND status = 'pending'"
                      f" AND attempts = 0 AND (claimed_until IS NULL OR claimed_until < ?)"
                      f" AND webhook_id IN ({', '.join('?' for _ in ids)})", (account_id, now, *ids)).fetchall()
    found = [row[0] for row in rows]
    if found:
        cx.execute(f"DELETE FROM outbox WHERE id IN ({', '.join('?' for _ in found)})", found)
    return len(found)
