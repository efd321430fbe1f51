"""SQL for the bot's state per contact: pauses (bot_pauses) and the outcome recorded on an inbound message."""
import json

from storage.db import fetch_one, reads, writes
from storage.events import CONVERSATION_UPDATED, emit_in_tx, message_updated_in_tx


def pause_in_tx(cx, account_id, contact_id, until, reason, now):
    """Pause the bot for this contact until ``until`` (a later pause never shortens a longer one)."""
    cx.execute("INSERT INTO bot_pauses (account_id, contact_id, paused_until, reason, created_at)"
               " VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id, contact_id) DO UPDATE SET"
               " paused_until = MAX(paused_until, excluded.paused_until),"
               " reason = CASE WHEN excluded.paused_until >= paused_until THEN excluded.reason ELSE reason END,"
               " created_at = excluded.created_at",
               (account_id, contact_id, until, reason, now))
    emit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id})  # open pages show the pause


@writes
def clear_pause(cx, account_id, contact_id):
    """Resume the bot for this contact; True when a pause was removed."""
    removed = cx.execute("DELETE FROM bot_pauses WHERE account_id = ? AND contact_id = ?",
                         (account_id, contact_id)).rowcount > 0
    if removed:
        emit_in_tx(cx, account_id, CONVERSATION_UPDATED, {"contactId": contact_id})
    return removed


def get_pause_in_tx(cx, account_id, contact_id, now):
    """The contact's live pause {paused_until, reason}, or None (an expired pause counts as none)."""
    return fetch_one(cx, "SELECT paused_until, reason FROM bot_pauses WHERE account_id = ? AND contact_id = ?"
                     " AND paused_until > ?", (account_id, contact_id, now))


get_pause = reads(get_pause_in_tx)


def set_outcome_in_tx(cx, account_id, message_id, outcome):
    """Record what the bot did with an inbound message: {outcome, detail}."""
    cx.execute("UPDATE messages SET bot_outcome = ? WHERE account_id = ? AND id = ? AND direction = 'inbound'",
               (json.dumps(outcome), account_id, message_id))
    message_updated_in_tx(cx, account_id, message_id)  # an open thread shows the outcome
