"""The bot (docs/design.md#api-decisions "Bot"): decide() works out what to answer an inbound custom-channel message
(handoff keyword, greeting, rule, AI provider, fallback), apply() carries it out (a reply through
messaging.send_reply, with its outcome and its credits in the reply's own transaction), dry_run() runs
the same decide() and applies nothing. services/bot_runner.py's BotRunner runs each new message after the
200, with bounded concurrency.

What the bot did is recorded on the inbound message (messages.bot_outcome, shown as `bot` in the API):
{outcome, detail, replyId}; replyId is the bot's reply, or null when it sent none. OUTCOMES lists them.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from common.errors import Invalid, NotFound, Unavailable
from common import placeholders
from services import bot_match, bot_provider, bot_settings, handoff, messaging
from services.bot_answer import Answer
from services.context import JSONObject, Services
from storage import bot_outcome, bot_state
from storage.bot_outcome import AlreadyDecided, Skipped
from storage import credits as credit_store
from storage.db import database_errors

# What the bot knows when it decides (storage.bot_state.context_in_tx's): config, opted_out, pause, first_message, ...
Context = Mapping[str, Any]

log = logging.getLogger("parley.bot")

OUTCOMES = {
    "greeting": "answered with the greeting: the contact's first message",
    "rule": "answered by the first rule with a keyword in the message",
    "provider": "answered by the AI provider",
    "fallback": "answered with the fallback: no rule matched and no AI provider is set",
    "handoff": "a handoff keyword, or the AI provider, asked for a person: the bot is paused for the contact",
    "provider_failed": "the AI provider failed (timeout, HTTP error, no usable answer even in plain text); the "
                       "fallback was sent if "
                       "set (replyId says)",
    "no_answer": "no rule matched and there is neither an AI provider nor a fallback",
    "no_credits": "the sub-account's balance is below creditsPerReply: the bot stayed silent",
    "paused": "the bot is paused for this contact (a handoff, or a person's reply)",
    "opted_out": "the contact opted out: the bot never answers it",
    "not_sent": "a reply was due but there is nowhere to send it (no Custom Channel Webhook URL)",
    "busy": "the bot had MAX_WAITING messages waiting already (a slow AI provider under a flood): not answered",
}
# A decision whose write failed (the storage writer restarting, a full disk) is written again after each of
# these pauses (seconds); the conditional outcome write makes a retry of a write that did commit a no-op.
WRITE_RETRY_DELAYS = (1, 5, 30, 120)
# A match whose work bound (bot_match.Matcher.work_bound: characters, and keyword occurrences at most) is
# within this runs on the event loop: under a millisecond (`make bench`, "bot matching at the limits");
# a larger one (a long message, keywords built to overlap) runs in a worker thread.
MATCH_ON_LOOP_WORK = 2000


@dataclass
class Decision:
    """What the bot does with one message: record outcome/detail, send reply (if any), pause on handoff."""
    outcome: str
    detail: str
    reply: Optional[str] = None
    handoff: bool = field(default=False)
    handoff_reason: Optional[str] = None  # services/handoff.REASONS, when handoff
    provider_mode: Optional[str] = None   # the response format the AI provider answered in, when it did

    def without_reply(self, outcome: str, detail: str) -> Decision:
        """The reply could not go out (Skipped, not sent): the outcome says why; a handoff still happens."""
        return Decision(outcome, detail, handoff=self.handoff and outcome != "paused",
                        handoff_reason=self.handoff_reason)


# ---- deciding ---------------------------------------------------------------------------------

def _charge(context: Context) -> int:
    """Credits (hundredths) one reply costs: the price its agency set for a sub-account (the account row's
    credits_per_reply, never the sub-account's own bot settings), nothing for the others."""
    if context["account_type"] != "subaccount":
        return 0
    price = context.get("credits_per_reply")
    return credit_store.DEFAULT_PRICE if price is None else price


def _cannot_reply(context: Context, would: str) -> Decision | None:
    """A Decision saying why no reply can go out (nowhere to send it, too few credits), or None."""
    if not context["has_webhook"]:
        return Decision("not_sent", f"no Custom Channel Webhook URL is configured ({would})")
    charge = _charge(context)
    if charge > context["credit_hundredths"]:
        return Decision("no_credits", f"the balance of {credit_store.as_number(context['credit_hundredths'])} "
                                      f"credits is below creditsPerReply {credit_store.as_number(charge)} ({would})")
    return None


def _filled(context: Context, text: str | None) -> str | None:
    """A configured answer (greeting, rule, fallback, handoff message) with its placeholders filled for the
    contact, as campaigns fill them; as written without a contact (a dry run without contactId). An AI
    provider's answer is sent as it came."""
    if text is None or context.get("fields") is None:
        return text
    return placeholders.fill(text, context["fields"])


def _local_answer(config: Mapping[str, Any], context: Context, match: tuple[int, str] | None) -> Decision | None:
    """The greeting (on a contact's first message) or the matching rule, as a Decision, or None."""
    if context["first_message"] and bot_settings.is_set(config["greeting"]):
        return Decision("greeting", "the contact's first message", reply=_filled(context, config["greeting"]))
    if match is not None:
        index, keyword = match
        rule = config["rules"][index]
        if rule.get("handoff"):
            return Decision("handoff", f'keyword "{keyword}" of rules[{index}], a handoff rule: the bot is '
                                       f'paused for this contact', reply=_filled(context, rule["answer"]), handoff=True,
                            handoff_reason="rule")
        return Decision("rule", f'keyword "{keyword}" of rules[{index}]', reply=_filled(context, rule["answer"]))
    return None


async def match(config: Mapping[str, Any], body: str) -> tuple[int, str] | None:
    """bot_match's first match of the message (the handoff keyword or the rule). A costly match runs in a
    worker thread: however the keywords and the message are made, the loop serves other accounts meanwhile."""
    matcher = bot_match.cached(config)
    if matcher is None:
        matcher = await asyncio.to_thread(bot_match.matcher, config)
    if matcher.empty:
        return None
    if matcher.work_bound(body) <= MATCH_ON_LOOP_WORK:
        return matcher.first(body)
    return await asyncio.to_thread(matcher.first, body)


async def decide(services: Services, account_id: str, context: Context, body: str, *, contact_id: str | None = None,
                 message_id: str | None = None) -> Decision:
    """What the bot does with a message `body` from the contact, given its context (storage.bot_state.context_in_tx).
    May call the AI provider; stores and sends nothing. The order: opted out, paused, handoff keyword,
    greeting, rule, AI provider, fallback."""
    config = context["config"]
    if context["opted_out"]:
        return Decision("opted_out", "the contact opted out")
    if context["pause"]:
        pause = context["pause"]
        return Decision("paused", f"the bot is paused for this contact until {pause['paused_until']} "
                                  f"({pause['reason']})")
    found = await match(config, body)
    if found is not None and found[0] == bot_match.HANDOFF:
        return Decision("handoff", f'handoff keyword "{found[1]}": the bot is paused for this contact',
                        reply=_filled(context, handoff.message_for(config)), handoff=True, handoff_reason="keyword")
    local = _local_answer(config, context, found)
    if local is not None:
        return _cannot_reply(context, f"{local.outcome}: {local.detail}") or local
    fallback = _filled(context, config["fallback"]) if bot_settings.is_set(config["fallback"]) else None
    provider = config["provider"]
    if provider:
        blocked = _cannot_reply(context, "the AI provider would have been asked")
        if blocked is not None:
            return blocked
        try:
            answer = await _ask_provider(services, account_id, provider, body, contact_id, message_id)
        except bot_provider.ProviderError as exc:
            log.warning("bot: the AI provider failed for account %s, message %s: %s", account_id, message_id, exc)
            if fallback:
                return Decision("provider_failed", f"{exc}; the fallback was sent", reply=fallback)
            return Decision("provider_failed", f"{exc}; no fallback is set")
        if answer.handoff:
            return Decision("handoff", f"the AI provider handed the conversation to a person ({answer.mode}): the "
                                       "bot is paused for this contact",
                            reply=answer.reply or _filled(context, handoff.message_for(config)),
                            handoff=True, handoff_reason="provider", provider_mode=answer.mode)
        if answer.unstructured:
            return Decision("provider", f"unstructured answer: model {provider['model']} answered in plain text "
                                        f"({answer.unstructured})", reply=answer.reply, provider_mode=answer.mode)
        return Decision("provider", f"model {provider['model']} ({answer.mode})", reply=answer.reply,
                        provider_mode=answer.mode)
    if fallback:
        return _cannot_reply(context, "the fallback would have been sent") or Decision(
            "fallback", "no rule matched and no AI provider is set", reply=fallback)
    return Decision("no_answer", "no rule matched, and neither an AI provider nor a fallback is set")


async def _ask_provider(services: Services, account_id: str, provider: Mapping[str, Any], body: str,
                        contact_id: str | None, message_id: str | None) -> Answer:
    settings = services.settings
    api_key = None
    if provider.get(bot_settings.KEY):
        try:
            api_key = services.box.decrypt(provider[bot_settings.KEY])
        except ValueError as exc:
            raise bot_provider.ProviderError(f"the stored API key cannot be used: {exc}") from None
    history: Sequence[Mapping[str, Any]] = []
    if contact_id is not None:
        history = await bot_state.recent_conversation(services.db, account_id, contact_id, message_id,
                                                      limit=settings.bot_history_messages)
    if message_id is None:  # a dry run: the body is not stored, it is the newest message
        history = [{"direction": "inbound", "body": body}, *history]
    messages = bot_provider.conversation(history, settings.bot_history_messages, settings.bot_history_chars)
    return await bot_provider.ask(services.bot.http(), provider, api_key, messages,
                                  allow_private=settings.allow_private_webhooks)


# ---- applying ---------------------------------------------------------------------------------

async def apply(services: Services, message: Mapping[str, Any], context: Context, decision: Decision) -> str | None:
    """Carry out a decision on a stored inbound message: the reply (if any) through messaging.send_reply,
    its outcome, credits and handoff pause in the reply's transaction; else the outcome (and pause) alone.
    A write that fails is retried (WRITE_RETRY_DELAYS). Returns the outcome recorded, or None when the
    message had one already (nothing was sent)."""
    retried: tuple[type[Exception], ...] = (Unavailable, *database_errors())
    for delay in (*WRITE_RETRY_DELAYS, None):
        try:
            return await _apply_once(services, message, context, decision)
        except AlreadyDecided:
            return None
        except retried as exc:
            if delay is None:
                raise
            log.warning("bot: writing the decision on message %s failed (%s); retrying in %g s",
                        message["id"], exc, delay)
            await asyncio.sleep(delay)
    return None  # not reached: the last try returns or raises


async def _apply_once(services: Services, message: Mapping[str, Any], context: Context, decision: Decision) -> str:
    account_id, contact_id = message["account_id"], message["contact_id"]
    if decision.reply:
        try:
            await messaging.send_reply(
                services, account_id, contact_id, decision.reply, message["channel"], author="bot",
                to_id=message["from_id"], campaign_id=message["campaign_id"],
                in_tx=(bot_outcome.answered_in_tx, {"inbound_id": message["id"], "outcome": decision.outcome,
                                         "detail": decision.detail, "charge": _charge(context),
                                         "handoff": decision.handoff_reason if decision.handoff else None}))
            return decision.outcome
        except Skipped as exc:
            decision = decision.without_reply(exc.outcome, exc.detail)
        except Invalid as exc:  # e.g. the webhook URL was removed since the message came in
            decision = decision.without_reply("not_sent", exc.message)
    won = await services.db.write(bot_outcome.record_outcome_in_tx, account_id, contact_id, message["id"],
                                  {"outcome": decision.outcome, "detail": decision.detail, "replyId": None},
                                  decision.handoff_reason if decision.handoff else None)
    if not won:
        raise AlreadyDecided()
    if decision.handoff:
        if services.delivery is not None:
            services.delivery.notify()  # its notification is in the outbox
    return decision.outcome


async def on_inbound_message(services: Services, message: Mapping[str, Any], context: Context) -> str | None:
    """Answer one new inbound text message (the stored row), given its context (storage.bot_state.context_in_tx,
    read when the bot starts on it)."""
    if message.get("channel") == messaging.WEB_CHANNEL:
        context = {**context, "has_webhook": True}  # its reply goes to the chat widget: stored, not POSTed
    decision = await decide(services, message["account_id"], context, message["body"],
                            contact_id=message["contact_id"], message_id=message["id"])
    return await apply(services, message, context, decision)


# ---- dry run and resume ------------------------------------------------------------------------

async def dry_run(services: Services, account_id: str, *, body: str | None, campaign_id: str | None = None,
                  contact_id: str | None = None, first_message: bool | None = None) -> JSONObject:
    """POST /v1/bot/test: what the bot would answer `body` (as contact_id, under campaign_id) and why, by
    the same decide() as a real message; stores, sends and spends nothing (the AI provider is asked).
    Evaluated even while the bot is inactive (`active` says). first_message: treat it as the contact's
    first message (default: whether the contact has none yet; without a contact, no)."""
    if not body or not body.strip():
        raise Invalid("body cannot be empty")
    context = await bot_state.dry_run_context(services.db, account_id, contact_id, campaign_id or None)
    if context is None:
        raise NotFound(f"no contact with id {contact_id}", code="CONTACT_NOT_FOUND")
    if first_message is not None:
        context["first_message"] = first_message
    async with services.bot.slot(account_id):  # the bot's own limits: a dry run may ask the AI provider too
        decision = await decide(services, account_id, context, body, contact_id=contact_id)
    return {"reply": decision.reply, "reason": decision.outcome, "detail": decision.detail,
            "handoff": decision.handoff, "active": bool(context["config"]["active"]),
            "providerMode": decision.provider_mode}


async def resume(services: Services, account_id: str, contact_id: str) -> bool:
    """End a pause of the bot for this contact (the inbox's "resume bot"); True when one was removed."""
    return await bot_state.clear_pause(services.db, account_id, contact_id)
