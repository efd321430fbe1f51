"""SQL for the bot's state: pauses per contact (bot_pauses), the outcome recorded on an inbound message, and
what answering needs to read (the account's bot, the contact's state, the recent conversation)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from common.bot_config import effective
from common.ids import iso, now_iso, utcnow

from storage.db import fetch_one, reads, writes
from storage.dialect import dialect_of
from storage.events import CONVERSATION_UPDATED, emit_in_tx, message_updated_in_tx
from storage.contacts import get_contact
from storage.interface import Connection, Row

HUMAN_AUTHORS = ("user", "api")  # replies written by a person: they pause the bot for the contact

# Sorts after every id (ids are ASCII, "msg_…"): "up to this id" with no id means "all".
_AFTER_EVERY_ID = "\uffff"


def pause_in_tx(cx: Connection, account_id: str, contact_id: str, until: str, reason: str, now: str) -> None:
    """Pause the bot for this contact until ``until`` (a later pause never shortens a longer one)."""
    cx.execute("INSERT INTO bot_pauses (account_id, contact_id, paused_until, reason, created_at)"
               " VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id, contact_id) DO UPDATE SET"
               " paused_until = CASE WHEN excluded.paused_until > bot_pauses.paused_until"
               " THEN excluded.paused_until ELSE bot_pauses.paused_until END,"
               " reason = CASE WHEN excluded.paused_until >= bot_pauses.paused_until THEN excluded.reason"
               " ELSE bot_pauses.reason END,"
               " created_at = excluded.created_at",
               (account_id, contact_id, until, reason, now))
    emit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id})  # open pages show the pause


@writes
def clear_pause(cx: Connection, account_id: str, contact_id: str) -> bool:
    """Resume the bot for this contact; True when a pause was removed."""
    removed = cx.execute("DELETE FROM bot_pauses WHERE account_id = ? AND contact_id = ?",
                         (account_id, contact_id)).rowcount > 0
    if removed:
        emit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id})
    return removed


def get_pause_in_tx(cx: Connection, account_id: str, contact_id: str, now: str) -> Row | None:
    """The contact's live pause {paused_until, reason}, or None (an expired pause counts as none)."""
    return fetch_one(cx, "SELECT paused_until, reason FROM bot_pauses WHERE account_id = ? AND contact_id = ?"
                     " AND paused_until > ?", (account_id, contact_id, now))


get_pause = reads(get_pause_in_tx)


def set_outcome_in_tx(cx: Connection, account_id: str, message_id: str, outcome: Mapping[str, Any]) -> bool:
    """Record what the bot did with an inbound message ({outcome, detail, replyId}) unless an outcome is
    recorded already: at most one decision per message is an invariant of the data, whatever runs twice (a
    recovery, a retried write). Clears bot_pending. Returns True when this write set it."""
    won = cx.execute("UPDATE messages SET bot_outcome = ?, bot_pending = NULL WHERE account_id = ? AND id = ?"
                     " AND direction = 'inbound' AND bot_outcome IS NULL",
                     (json.dumps(outcome), account_id, message_id)).rowcount > 0
    if won:
        message_updated_in_tx(cx, account_id, message_id)  # an open thread shows the outcome
    return won


@writes
def release(cx: Connection, account_id: str, message_id: str) -> None:
    """The bot owes this message nothing after all (it was turned off before it started on it)."""
    cx.execute("UPDATE messages SET bot_pending = NULL WHERE account_id = ? AND id = ? AND bot_pending = 1",
               (account_id, message_id))


def account_bot_in_tx(cx: Connection, account_id: str) -> dict[str, Any] | None:
    """What answering needs of the account: {bot (the stored bot object, None when there is none), type,
    credit_hundredths, credits_per_reply (hundredths; None: the default), has_webhook}, or None for an unknown
    account. SQLite extracts the bot from the
    settings JSON, so an account without a bot costs no parsing here."""
    field = dialect_of(cx).json_field
    row = cx.execute(f"SELECT {field('settings', 'bot')}, type, credit_hundredths,"
                     f" {field('settings', 'customChannelWebhookUrl')} IS NOT NULL, credits_per_reply"
                     " FROM accounts WHERE id = ?",
                     (account_id,)).fetchone()
    if row is None:
        return None
    return {"bot": json.loads(row[0]) if row[0] else None, "type": row[1], "credit_hundredths": row[2],
            "has_webhook": bool(row[3]), "credits_per_reply": row[4]}


def contact_state_in_tx(cx: Connection, account_id: str, contact_id: str, now: str, before_message_id: str | None = None) -> dict[str, Any] | None:
    """The contact as the bot sees it: {opted_out, pause (get_pause_in_tx), first_message, fields}, or None for
    an unknown contact. first_message: no inbound message before before_message_id (None: none at all);
    fields: what its answers' placeholders are filled with (first_name, last_name, email, phone)."""
    row = cx.execute("SELECT opted_out, EXISTS (SELECT 1 FROM messages WHERE account_id = ? AND contact_id = ?"
                     " AND direction = 'inbound' AND id < ?), first_name, last_name, email, phone"
                     " FROM contacts WHERE account_id = ? AND id = ?",
                     (account_id, contact_id, before_message_id or _AFTER_EVERY_ID, account_id, contact_id)).fetchone()
    if row is None:
        return None
    return {"opted_out": bool(row[0]), "pause": get_pause_in_tx(cx, account_id, contact_id, now),
            "first_message": not row[1],
            "fields": {"first_name": row[2], "last_name": row[3], "email": row[4], "phone": row[5]}}


@reads
def recent_conversation(cx: Connection, account_id: str, contact_id: str, up_to_message_id: str | None = None, limit: int = 20) -> list[Row]:
    """The contact's latest text messages, both directions, newest first: [{direction, body}], up to and
    including up_to_message_id (None: the very latest)."""
    return [dict(r) for r in cx.execute(
        "SELECT direction, body FROM messages WHERE account_id = ? AND contact_id = ? AND id <= ?"
        " AND message_type = 'text' ORDER BY id DESC LIMIT ?",
        (account_id, contact_id, up_to_message_id or _AFTER_EVERY_ID, limit))]


@reads
def undecided_inbound(cx: Connection, before_id: str, limit: int) -> list[Row]:
    """The oldest ``limit`` inbound messages stored before before_id that the bot still owes a decision
    (bot_pending, set by the inbound write that found the bot active), oldest first. A seek in the partial
    index messages_bot_pending: it holds only those messages, whatever their age."""
    rows = cx.execute("SELECT id, account_id, contact_id, body, channel, campaign_id, from_id, message_type"
                      f" FROM messages{dialect_of(cx).index_hint('messages_bot_pending')}"
                      " WHERE bot_pending = 1 AND id < ? ORDER BY id LIMIT ?", (before_id, limit))
    return [dict(r) for r in rows]


# ---- what the bot decides with, and a person's reply (services/bot.py) ----------------------------------------

def context_in_tx(cx: Connection, account_id: str, contact_id: str | None, campaign_id: str | None,
                  message_id: str | None = None, *, require_active: bool = True) -> dict[str, Any] | None:
    """What the bot needs to decide on a message of this contact (contact_id None: no contact, a dry run;
    message_id: the message, stored already): {config (common.bot_config.effective), account_type,
    credit_hundredths, credits_per_reply, has_webhook, opted_out, pause, first_message, fields (the contact's, for
    placeholders; None without a contact)}. With require_active, None when the
    bot is not active for this message's campaign (nothing more is read then)."""
    account = account_bot_in_tx(cx, account_id)
    if account is None or (require_active and account["bot"] is None):
        return None
    config = effective(account["bot"], campaign_id)
    if require_active and not config["active"]:
        return None
    contact = {"opted_out": False, "pause": None, "first_message": False, "fields": None}
    if contact_id is not None:
        contact = contact_state_in_tx(cx, account_id, contact_id, now_iso(), message_id) or contact
    return {"config": config, "account_type": account["type"], "credit_hundredths": account["credit_hundredths"],
            "credits_per_reply": account["credits_per_reply"], "has_webhook": account["has_webhook"], **contact}


@reads
def dry_run_context(cx: Connection, account_id: str, contact_id: str | None,
                    campaign_id: str | None) -> dict[str, Any] | None:
    """context_in_tx for POST /v1/bot/test, whether or not the bot is active; None when contact_id names no contact
    of the account."""
    if contact_id is not None and get_contact.sync(cx, account_id, contact_id) is None:
        return None
    return context_in_tx(cx, account_id, contact_id, campaign_id, require_active=False)


def pause_after_human_reply_in_tx(cx: Connection, settings: Mapping[str, Any], *, account_id: str, contact_id: str,
                                  campaign_id: str | None, author: str | None) -> None:
    """A reply written by a person (HUMAN_AUTHORS) pauses the bot for that contact for
    pauseMinutesAfterHumanReply (of the reply's campaign, else the account's), whether or not the bot is on
    now: switching it on later must not barge into a conversation a person is holding. settings: the account's."""
    if author not in HUMAN_AUTHORS:
        return
    minutes = effective(settings.get("bot"), campaign_id)["pauseMinutesAfterHumanReply"]
    if minutes > 0:
        now = utcnow()
        pause_in_tx(cx, account_id, contact_id, iso(now + timedelta(minutes=minutes)), "human_reply", iso(now))
