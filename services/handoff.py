"""A handoff (issue 25 §3, docs/design.md#wave-3-contracts Day two): the bot hands a conversation to a person (a handoff keyword,
the AI provider, or a rule with "handoff": true). The contact gets the account's bot.handoffMessage once, as
the bot's reply; the bot pauses for the contact; and a conversation.handoff notification (and the mail of the agents
who chose it: services/agent_mail.py) is queued, all in
the transaction that records the bot's outcome (storage/handoff.py record_in_tx). The
conversation then waits for a person (the inbox's "Needs a person") until a person replies."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_MESSAGE = "Thanks! A person will answer here soon."
REASONS = ("keyword", "provider", "rule")


def message_for(config: Mapping[str, Any]) -> str | None:
    """The text the contact gets on a handoff, or None: bot.handoffMessage, its default when unset, nothing
    when it is the empty string."""
    text = config.get("handoffMessage")
    text = DEFAULT_MESSAGE if text is None else text
    return text if text.strip() else None
