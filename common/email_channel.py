"""The email channel's pure rules, shared by services (services/email_settings.py, services/mail_out.py) and the
writer's transactions (storage/mail.py, storage/outbound.py): where an account's settings keep its mail servers,
whether it can send, and the threading headers of a reply. No I/O."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SETTING = "email"  # the account setting that holds the address and the IMAP and SMTP servers
CHANNEL = "email"  # the messages' channel of the email channel
MAX_REFERENCES = 20  # References keeps the thread's first and latest ids: a long thread's header stays short


def server(settings: Mapping[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The configured IMAP or SMTP server of an account's settings (username defaulting to the address), or None."""
    email = (settings or {}).get(SETTING) or {}
    found = email.get(kind)
    if not found or not found.get("host"):
        return None
    return {**found, "username": found.get("username") or email.get("address")}


def can_send(settings: Mapping[str, Any] | None) -> bool:
    """Whether the account's settings have an SMTP server (and the address mail comes from)."""
    return server(settings, "smtp") is not None


def reply_subject(subject: str | None) -> str | None:
    subject = " ".join((subject or "").split())
    if not subject:
        return None
    return subject if re.match(r"(?i)^(re|aw|sv|antw)\s*:", subject) else f"Re: {subject}"


def reply_mail(last_inbound_mail: Mapping[str, Any] | None) -> dict[str, Any]:
    """The `mail` part of an outbound email message, from the customer's latest email (its `mail` column, or None):
    {subject, inReplyTo, references}; subject None without one (the delivery says "Your message to <account>")."""
    last = last_inbound_mail or {}
    references = list(reversed(last.get("references") or []))  # stored newest first, sent oldest first
    if last.get("messageId"):
        references.append(last["messageId"])
    if len(references) > MAX_REFERENCES:
        references = references[:1] + references[-(MAX_REFERENCES - 1):]
    return {"subject": reply_subject(last.get("subject")),
            "inReplyTo": last.get("messageId"), "references": references}
