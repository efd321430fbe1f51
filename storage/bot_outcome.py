"""The bot's outcome for an inbound message (services/bot.py decides it), recorded once: with its reply, in the reply's
own transaction (answered_in_tx, the in_tx of storage/outbound.py record_reply), or alone (record_outcome_in_tx); a handoff
with it (storage/handoff.py)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.ids import now_iso
from storage import credits as credit_store
from storage.bot_state import contact_state_in_tx, set_outcome_in_tx
from storage.handoff import record_in_tx as record_handoff_in_tx
from storage.interface import Connection


class AlreadyDecided(Exception):
    """Raised inside a decision's write when the message has an outcome already (another run of the bot
    decided it first): the write, and the reply with it, are rolled back."""


class Skipped(Exception):
    """Raised inside the reply's transaction when the reply must not go out after all (paused or opted out
    meanwhile, too few credits): nothing of it is stored, and the outcome says why."""

    def __init__(self, outcome: str, detail: str) -> None:
        super().__init__(outcome, detail)
        self.outcome, self.detail = outcome, detail


def answered_in_tx(cx: Connection, reply: Mapping[str, Any], *, inbound_id: str, outcome: str, detail: str,
                   charge: int, handoff: str | None) -> None:
    """In the reply's transaction (messaging.send_reply in_tx): record the outcome unless the message has
    one (AlreadyDecided: the reply is not queued), check again that the contact may be answered (a person
    may have replied meanwhile), spend the reply's credits (storage.credits.spend, the one spend path) and
    carry out a handoff (its reason: storage/handoff.py). Skipped rolls the reply back."""
    account_id, contact_id = reply["account_id"], reply["contact_id"]
    if not set_outcome_in_tx(cx, account_id, inbound_id, {"outcome": outcome, "detail": detail,
                                                         "replyId": reply["id"]}):
        raise AlreadyDecided()
    now = now_iso()
    state = contact_state_in_tx(cx, account_id, contact_id, now) or {}
    if state.get("opted_out"):
        raise Skipped("opted_out", "the contact opted out before the reply was sent")
    if state.get("pause"):
        raise Skipped("paused", f"the bot was paused for this contact before the reply was sent "
                                f"({state['pause']['reason']}, until {state['pause']['paused_until']})")
    if charge:
        spent = credit_store.spend.sync(cx, account_id, charge, f"bot reply {reply['id']}", now)
        if spent["outcome"] != "spent":
            raise Skipped("no_credits", f"the balance of {credit_store.as_number(spent.get('balance', 0))} credits "
                                        f"is below creditsPerReply {credit_store.as_number(charge)}")
    if handoff:
        record_handoff_in_tx(cx, account_id, contact_id, inbound_id, handoff)


def record_outcome_in_tx(cx: Connection, account_id: str, contact_id: str, message_id: str,
                         outcome: Mapping[str, Any], handoff: str | None) -> bool:
    """In the writer: the outcome of a message the bot sent nothing for (and a handoff, by its reason), unless
    the message has one already. Returns whether it was recorded."""
    if not set_outcome_in_tx(cx, account_id, message_id, outcome):
        return False
    if handoff:
        record_handoff_in_tx(cx, account_id, contact_id, message_id, handoff)
    return True
