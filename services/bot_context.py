"""The bot's state read and written inside transactions: whether it answers a message (asked by the
inbound message's own write), what it needs to decide (read when it starts on the message), and the pause
a human reply sets inside the outbound message's write (so the inbox pauses the bot just by sending one)."""
from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from common.ids import iso, now_iso, utcnow
from services import bot_settings
from storage import bot_state
from storage.interface import Connection

HUMAN_AUTHORS = ("user", "api")  # replies written by a person: they pause the bot for the contact


@functools.lru_cache(maxsize=64)
def active_for(bot_json: str | None, campaign_id: str | None) -> bool:
    """Whether the account's bot is active for a message of this campaign (None: no campaign). bot_json: the
    account's stored bot as JSON text, as the inbound write read it (None when it has none: no parsing). Kept
    per (text, campaign): every inbound write asks, and the text changes only when the bot is saved."""
    return bool(bot_json) and bool(bot_settings.effective(json.loads(bot_json), campaign_id)["active"])  # type: ignore[arg-type]


def context_in_tx(cx: Connection, account_id: str, contact_id: str | None, campaign_id: str | None, message_id: str | None = None, *, require_active: bool = True) -> dict[str, Any] | None:
    """What the bot needs to decide on a message of this contact (contact_id None: no contact, a dry run;
    message_id: the message, stored already): {config (bot_settings.effective), account_type,
    credit_hundredths, credits_per_reply, has_webhook, opted_out, pause, first_message, fields (the contact's, for
    placeholders; None without a contact)}. With require_active, None when the
    bot is not active for this message's campaign (nothing more is read then)."""
    account = bot_state.account_bot_in_tx(cx, account_id)
    if account is None or (require_active and account["bot"] is None):
        return None
    config = bot_settings.effective(account["bot"], campaign_id)
    if require_active and not config["active"]:
        return None
    contact = {"opted_out": False, "pause": None, "first_message": False, "fields": None}
    if contact_id is not None:
        contact = bot_state.contact_state_in_tx(cx, account_id, contact_id, now_iso(), message_id) or contact
    return {"config": config, "account_type": account["type"], "credit_hundredths": account["credit_hundredths"],
            "credits_per_reply": account["credits_per_reply"], "has_webhook": account["has_webhook"], **contact}


def pause_after_human_reply_in_tx(cx: Connection, settings: Mapping[str, Any], *, account_id: str, contact_id: str, campaign_id: str | None, author: str | None) -> None:
    """A reply written by a person (HUMAN_AUTHORS) pauses the bot for that contact for
    pauseMinutesAfterHumanReply (of the reply's campaign, else the account's), whether or not the bot is on
    now: switching it on later must not barge into a conversation a person is holding. settings: the account's."""
    if author not in HUMAN_AUTHORS:
        return
    minutes = bot_settings.effective(settings.get("bot"), campaign_id)["pauseMinutesAfterHumanReply"]
    if minutes > 0:
        now = utcnow()
        bot_state.pause_in_tx(cx, account_id, contact_id, iso(now + timedelta(minutes=minutes)), "human_reply",
                              iso(now))
