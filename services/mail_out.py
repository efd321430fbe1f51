"""Parley's own mail (issue 39): invitations and "Forgot password?" links, sent by the account's SMTP server (the
`email` setting, services/email_settings.py) from its address.

A mail is composed here and queued in the transaction that made what it carries (storage/mail.py: an outbox row
of kind 'mail'); the delivery worker (services/delivery.py) sends it after the COMMIT, off the request path, and
gives it what it gives webhooks: a claim per process (several processes on PostgreSQL send each mail once), the
retry schedule for what may pass (a refused connection, a timeout, a 4xx answer), a final failure for what will
not (a 5xx answer, a refused login), every attempt recorded and logged. Settings > Email lists the latest mails
with their state and error. The text is stored sealed with the secret key (it may carry a one-time link, whose
token is otherwise only stored hashed) and only the recipient and subject are shown.

The email channel's replies (an outbox row of kind 'reply' whose channel is `email`) go out here too, with
Parley's own Message-ID, signed (signed_message_id: a reference to it cannot be forged to attach mail to another
thread), In-Reply-To and References of the customer's mail and its subject with "Re:"."""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import mimetypes
import re
from collections.abc import Mapping
from email.message import EmailMessage
from email.utils import formataddr, formatdate
from typing import TYPE_CHECKING, Any

from common.email_channel import SETTING, can_send, server
from common.ids import new_id
from services import agent_mail, email_settings, media, visitor_mail
from services.mail_connect import MailError, send_smtp
from services.webhook_post import Outcome
from services.context import JSONObject
from storage import mail as store
from storage.interface import Store

if TYPE_CHECKING:
    from services.context import Services
    from services.secretbox import SecretBox

NOT_CONFIGURED = "SMTP is not configured (Settings > Email)"
_SIGNED = re.compile(r"^(msg_[A-Za-z0-9_-]+)\.([A-Za-z2-7]{16})@")


def compose(box: SecretBox, account: Mapping[str, Any], *, to: str, subject: str, text: str) -> JSONObject | None:
    """The mail to queue (storage.mail.queue_in_tx), or None when the account has no SMTP server."""
    if not can_send(account["settings"]):
        return None
    return {"id": new_id("mail"), "account_id": account["id"],
            "payload": {"to": to, "subject": subject, "sealed": box.encrypt(text)}}


def invitation(box: SecretBox, account: Mapping[str, Any], *, to: str, url: str, expires_at: str,
               inviter: str | None = None) -> JSONObject | None:
    """An invitation's mail (None without SMTP)."""
    who = f"{inviter} invited you" if inviter else "You are invited"
    text = (f"{who} to {account['name']} on Parley.\n\n"
            f"Choose your password here (the link works once, until {expires_at}):\n\n{url}\n\n"
            "If you did not expect this, ignore this mail.\n")
    return compose(box, account, to=to, subject=f"You are invited to {account['name']} on Parley", text=text)


def password_reset(box: SecretBox, account: Mapping[str, Any], *, to: str, url: str,
                   expires_at: str) -> JSONObject | None:
    """A "Forgot password?" mail (None without SMTP)."""
    text = (f"Someone (hopefully you) asked to reset your password for {account['name']} on Parley.\n\n"
            f"Choose a new password here (the link works once, until {expires_at}; it signs out your other "
            f"sessions):\n\n{url}\n\nIf you did not ask, ignore this mail: your password stays as it is.\n")
    return compose(box, account, to=to, subject=f"Reset your Parley password for {account['name']}", text=text)


def message_of(account: Mapping[str, Any], row: Mapping[str, Any], text: str, key: bytes) -> EmailMessage:
    """The EmailMessage of a queued mail: from the account's address, a Message-ID made of its outbox id (the same on
    every attempt), Auto-Submitted so that auto-responders stay quiet (RFC 3834). A reply mailed to a web visitor
    (services/visitor_mail.py) is a person's: its Message-ID is the reply's signed one (key: message_id_key), which
    the visitor's answer names, and it is not marked automatic."""
    payload = json.loads(row["payload"])
    address = account["settings"][SETTING]["address"]
    message = EmailMessage()
    message["From"] = formataddr((account["name"], address))
    message["To"] = payload["to"]
    message["Subject"] = payload["subject"]
    message["Date"] = formatdate(usegmt=True)
    if "visitorReply" in payload:
        message["Message-ID"] = f"<{signed_message_id(key, account['id'], payload['visitorReply']['messageId'], address)}>"
    else:
        message["Message-ID"] = f"<{row['webhook_id']}@{address.rpartition('@')[2]}>"
        message["Auto-Submitted"] = "auto-generated"
    message.set_content(text)
    return message


async def _text(services: Services, account: Mapping[str, Any], payload: Mapping[str, Any]) -> str | None:
    """A queued mail's text: sealed in the payload (invitations, reset links), or read now from what it is about (an
    agent's mail, a reply to a web visitor); None when that is gone. ValueError when the seal cannot be opened."""
    if "agent" in payload:
        return await agent_mail.text(services, account, payload["agent"])
    if "visitorReply" in payload:
        return await visitor_mail.text(services, account, payload["visitorReply"])
    return services.box.decrypt(payload["sealed"])


async def deliver(services: Services, account: Mapping[str, Any], row: Mapping[str, Any]) -> Outcome:
    """One attempt at a queued mail (the delivery worker's): an Outcome, never an exception for what the server
    or the network did."""
    smtp = server(account["settings"], "smtp")
    if smtp is None:
        return Outcome(error=NOT_CONFIGURED)
    try:
        text = await _text(services, account, json.loads(row["payload"]))
        password = email_settings.password(services.box, smtp)
    except ValueError as exc:
        return Outcome(error=str(exc))
    if text is None:
        return Outcome(error="not sent: what it was about is gone (the contact erased or opted out, the message "
                             "erased, or the user can no longer sign in)")
    try:
        await send_smtp(smtp, password, message_of(account, row, text, message_id_key(services.box)),
                        timeout=services.settings.mail_timeout_seconds,
                        allow_private=services.settings.allow_private_webhooks)
    except MailError as exc:
        return Outcome(error=str(exc), retryable=exc.retryable)
    return Outcome()


# ---- the email channel's replies ---------------------------------------------------------------

def message_id_key(box: SecretBox) -> bytes:
    return bytes.fromhex(box.derive("mail-message-ids"))


def _signature(key: bytes, account_id: str, message_id: str) -> str:
    mac = hmac.new(key, f"{account_id}\n{message_id}".encode(), hashlib.sha256).digest()
    return base64.b32encode(mac[:10]).decode().lower()


def signed_message_id(key: bytes, account_id: str, message_id: str, address: str) -> str:
    """Parley's Message-ID of an outbound email message (without angle brackets): its message id and an HMAC of it
    with the account (so one account's id does not verify for another), at the domain of the account's address."""
    return f"{message_id}.{_signature(key, account_id, message_id)}@{address.rpartition('@')[2]}"


def verified_message_id(key: bytes, account_id: str, header_id: str | None) -> str | None:
    """The Parley message id a Message-ID names when it is one of ours for this account, else None."""
    found = _SIGNED.match(header_id or "")
    if found is None or not hmac.compare_digest(found[2], _signature(key, account_id, found[1])):
        return None
    return found[1]


_STORED_MEDIA = re.compile(r"/v1/media/([0-9a-f]{64})\?")


def _attachment(services: Services, payload: Mapping[str, Any]) -> tuple[bytes, str] | None:
    """(bytes, content type) of the reply's stored file, read from the media directory, or None: a file given by URL
    is named in the text instead. Blocking: run in a thread."""
    found = _STORED_MEDIA.search(payload.get("mediaUrl") or "")
    if found is None:
        return None
    try:
        return (media.media_dir(services.settings) / found[1]).read_bytes(), payload["mediaContentType"]
    except OSError:
        return None


def reply_message_of(services: Services, account: Mapping[str, Any], payload: Mapping[str, Any],
                     attachment: tuple[bytes, str] | None = None) -> EmailMessage:
    """The EmailMessage of an email reply's delivery (its outbox payload), with its file attached."""
    address = account["settings"][SETTING]["address"]
    mail = payload.get("mail") or {}
    message = EmailMessage()
    message["From"] = formataddr((account["name"], address))
    message["To"] = payload["toId"]
    message["Subject"] = mail.get("subject") or f"Your message to {account['name']}"
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = f"<{signed_message_id(message_id_key(services.box), account['id'], payload['messageId'], address)}>"
    if mail.get("inReplyTo"):
        message["In-Reply-To"] = f"<{mail['inReplyTo']}>"
    if mail.get("references"):
        message["References"] = " ".join(f"<{ref}>" for ref in mail["references"])
    if payload.get("author") in ("bot", "auto"):
        message["Auto-Submitted"] = "auto-replied"  # RFC 3834: the customer's auto-responder stays quiet
    text = payload["body"]
    if payload.get("mediaUrl") and attachment is None:
        text += f"\n\n{payload['mediaUrl']}"
    message.set_content(text)
    if attachment is not None:
        data, content_type = attachment
        maintype, _, subtype = content_type.partition("/")
        extension = mimetypes.guess_extension(content_type) or ""
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=f"attachment{extension}")
    return message


async def deliver_reply(services: Services, account: Mapping[str, Any], payload: Mapping[str, Any]) -> Outcome:
    """One attempt at an email reply (the delivery worker's): an Outcome, never an exception for what the server or
    the network did."""
    smtp = server(account["settings"], "smtp")
    if smtp is None:
        return Outcome(error=NOT_CONFIGURED)
    try:
        password = email_settings.password(services.box, smtp)
    except ValueError as exc:
        return Outcome(error=str(exc))
    attachment = await asyncio.to_thread(_attachment, services, payload) if payload.get("mediaUrl") else None
    try:
        await send_smtp(smtp, password, reply_message_of(services, account, payload, attachment),
                        timeout=services.settings.mail_timeout_seconds,
                        allow_private=services.settings.allow_private_webhooks)
    except MailError as exc:
        return Outcome(error=str(exc), retryable=exc.retryable)
    return Outcome()


async def recent(db: Store, account_id: str) -> list[dict[str, Any]]:
    """The account's latest mails with their state, newest first (Settings > Email)."""
    return await store.recent(db, account_id)
