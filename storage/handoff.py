"""A handoff recorded (issue 25 §3; services/handoff.py): in the transaction that records the bot's outcome, the bot
pauses for the contact, the conversation waits for a person (and its SLA wait starts), and a conversation.handoff
notification and the mail of the agents who chose it are queued, so that none exists without the others."""
from __future__ import annotations

from datetime import timedelta

from common.ids import iso, utcnow
from storage import bot_state, conversations
from storage.interface import Connection
from storage.mail import HANDOFF, queue_agent_mail_in_tx
from storage.outbox import enqueue_notification_in_tx
from storage.sla import on_handoff_in_tx

EVENT = "conversation.handoff"
# A handoff pauses the bot this long for the contact (a person's reply pauses it for
# pauseMinutesAfterHumanReply; "resume bot" in the inbox ends either at once).
PAUSE = timedelta(hours=24)


def record_in_tx(cx: Connection, account_id: str, contact_id: str, message_id: str, reason: str) -> str | None:
    """In the bot outcome's transaction: pause the bot for the contact and queue the notification (when the
    account listens for it), so that neither exists without the other. message_id: the contact's message
    that caused the handoff. Returns the notification's webhook id or None."""
    now = utcnow()
    bot_state.pause_in_tx(cx, account_id, contact_id, iso(now + PAUSE), "handoff", iso(now))
    conversations.handoff_waiting_in_tx(cx, account_id, contact_id, iso(now))
    on_handoff_in_tx(cx, account_id, contact_id, now)  # a person's answer is due from now
    queue_agent_mail_in_tx(cx, account_id, HANDOFF, contact_id)  # to those who chose it, with it
    return enqueue_notification_in_tx(cx, account_id, EVENT, {"contactId": contact_id, "messageId": message_id,
                                                              "reason": reason})
