"""A handoff (issue 25 §3, docs/design.md#wave-3-contracts Day two): the bot hands a conversation to a person (a handoff keyword,
the AI provider, or a rule with "handoff": true). The contact gets the account's bot.handoffMessage once, as
the bot's reply; the bot pauses for the contact; and a conversation.handoff notification (and the mail of the agents
who chose it: services/agent_mail.py) is queued, all in
the transaction that records the bot's outcome (services/bot.py calls in here and nothing else). The
conversation then waits for a person (the inbox's "Needs a person") until a person replies."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from common.ids import iso, utcnow
from services import sla
from storage import mail as mail_store
from storage import bot_state, conversations
from storage.interface import Connection
from storage.outbox import enqueue_notification_in_tx

EVENT = "conversation.handoff"
DEFAULT_MESSAGE = "Thanks! A person will answer here soon."
REASONS = ("keyword", "provider", "rule")
# A handoff pauses the bot this long for the contact (a person's reply pauses it for
# pauseMinutesAfterHumanReply; "resume bot" in the inbox ends either at once).
PAUSE = timedelta(hours=24)


def message_for(config: Mapping[str, Any]) -> str | None:
    """The text the contact gets on a handoff, or None: bot.handoffMessage, its default when unset, nothing
    when it is the empty string."""
    text = config.get("handoffMessage")
    text = DEFAULT_MESSAGE if text is None else text
    return text if text.strip() else None


def record_in_tx(cx: Connection, account_id: str, contact_id: str, message_id: str, reason: str) -> str | None:
    """In the bot outcome's transaction: pause the bot for the contact and queue the notification (when the
    account listens for it), so that neither exists without the other. message_id: the contact's message
    that caused the handoff. Returns the notification's webhook id or None."""
    now = utcnow()
    bot_state.pause_in_tx(cx, account_id, contact_id, iso(now + PAUSE), "handoff", iso(now))
    conversations.handoff_waiting_in_tx(cx, account_id, contact_id, iso(now))
    sla.on_handoff_in_tx(cx, account_id, contact_id, now)  # a person's answer is due from now
    mail_store.queue_agent_mail_in_tx(cx, account_id, mail_store.HANDOFF, contact_id)  # to those who chose it, with it
    return enqueue_notification_in_tx(cx, account_id, EVENT, {"contactId": contact_id, "messageId": message_id,
                                                              "reason": reason})
