"""A web visitor who left their email gets the agents' replies by email (issue 39; docs/guide.md "Replies by email
to a visitor who left"): the widget keeps the email on the visitor's contact (services/widget.py give_email,
identify). When a person (an agent in the inbox, or the API) replies on the widget's channel to a contact with an
email who has not opted out, and the account has SMTP set, the reply's mail is queued in the reply's own
transaction (storage/mail.py queue_visitor_mail_in_tx; one per reply: its outbox webhook_id is made of the message
id), due VISITOR_MAIL_DELAY later.

"Not connected" is decided by what the visitor's chat did, not by a guess at the sockets: the reply is mailed
when no chat of the visitor showed it within VISITOR_MAIL_DELAY. A chat that is open (the frame's WebSocket or long-poll, on
any process) receives the reply from the event stream within a second of its commit and reports it shown
(services/widget.py updates and history: drop_visitor_mails deletes the pending mail); a chat that opens within
VISITOR_MAIL_DELAY shows it too. A long-poll between two polls, or a socket reconnecting after a drop, is connected for this
rule (it resumes from its cursor and shows the reply), and the rule holds with several processes (the mark is in
the database, not in one process's Hub). A mail already being sent when the chat shows the reply still goes: at
most one mail per reply.

The mail comes from the account's address with Parley's signed Message-ID of the reply (services/mail_out.py),
so the visitor's answer by email, imported from the account's mailbox (services/mail_in.py), names it in
In-Reply-To and joins the same contact and conversation, even from another address. Without IMAP set the mail
still goes (the reply reaches the visitor), and says to write back in the chat instead."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from common import email_channel
from common.ids import iso, parse_iso
from services import media
from storage import contacts as contact_store
from storage import mail as store
from storage.mail import VISITOR_MAIL_AUTHORS, VISITOR_MAIL_DELAY
from storage import messages as message_store

if TYPE_CHECKING:
    from services.context import Services


async def shown(services: Services, account_id: str, messages: Iterable[Mapping[str, Any]], now: str) -> None:
    """The visitor's chat showed these messages (visitor_message dicts): the mails of the business's replies among
    them are not needed. Only a person's replies younger than VISITOR_MAIL_DELAY can have one: the others (the bot's answers, the
    visitor's own messages, older replies) cost no write."""
    recent = iso(parse_iso(now) - VISITOR_MAIL_DELAY - timedelta(seconds=5))
    ids = [m["id"] for m in messages if m["author"] in VISITOR_MAIL_AUTHORS and m["createdAt"] >= recent]
    if ids:
        await store.drop_visitor_mails(services.db, account_id, ids, now)


async def text(services: Services, account: Mapping[str, Any], reply: Mapping[str, Any]) -> str | None:
    """The mail's text, read now (reply: the payload's {messageId, contactId}): the reply and its attachment's link,
    and how to answer; None when the message is gone (erased) or the contact opted out since."""
    message = await message_store.get_message(services.db, account["id"], reply["messageId"])
    contact = await contact_store.get_contact(services.db, account["id"], reply["contactId"])
    if message is None or contact is None or contact.get("opted_out"):
        return None
    lines = [message["body"]]
    shown_media = media.public_media(services, message["media_url"], message["media_content_type"])
    if shown_media:
        lines += ["", f"Attachment: {shown_media['url']}"]
    if email_channel.server(account["settings"], "imap") is not None:  # an answer by mail is imported
        how = "Reply to this email to write back: your answer reaches the same conversation."
    else:
        how = "To write back, open the chat on our website again."
    lines += ["", "-- ", f"{account['name']} answered your chat. {how}"]
    return "\n".join(lines) + "\n"
