"""Custom-channel messaging: inbound messages (exactly once per messageSid), the fromId -> contact
mapping, outbound messages queued for delivery in the same transaction, and reading messages back."""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from services import assignment, idempotency, media, sla
from services.contact_fields import looks_like_email, looks_like_phone, normalize_email
from services.context import JSONObject, Services
from services.lists import decode_cursor, encode_cursor
from common import errors
from common.errors import Invalid, NotFound
from common.ids import iso, iso_of_second, new_id, now_iso
from storage import accounts as account_store
from storage import contacts as contact_store
from storage import messages as store
from storage.db import Conflict, StoredResultLost
from storage.identities import Identity
from storage.inbound import record_inbound
from storage.outbound import (NO_WEBHOOK, WEB_CHANNEL, InTx, Message, record_outbound, record_reply,
                              undeliverable)

log = logging.getLogger("parley.messaging")

QUEUED = "Message queued for delivery"
MAX_PAGE = 200
# Who wrote a message (messages.author): the contact (every inbound message) or, outbound, the bot, a UI
# user, an API client (POST send_custom_channel_message) or a campaign.
# auto: the outside-hours message (issue 40), a CSAT ask (issue 41)
AUTHORS = ("contact", "bot", "user", "api", "campaign", "auto")
# An inbound message without customData.campaignId from a contact that got a campaign message this recently
# is an answer to that campaign: it is stored with the campaign's campaignId, and the bot answers it with
# bot.campaigns[campaignId] (docs/api.md "Campaigns").
CAMPAIGN_ANSWER_WINDOW_SECONDS = 72 * 3600


def _blank_to_none(value: str | None) -> str | None:
    value = value.strip() if isinstance(value, str) else value
    return value or None


def _identity(account_id: str, from_id: str, first_name: str | None, last_name: str | None,
              email: str | None) -> Identity:
    """What the contact resolution needs, normalized outside the transaction (phonenumbers and
    email-validator are CPU work the single writer should not do)."""
    email = _blank_to_none(email)
    return {"account_id": account_id, "from_id": from_id,
            "from_phone": looks_like_phone(from_id), "from_email": looks_like_email(from_id),
            "values": {"first_name": _blank_to_none(first_name), "last_name": _blank_to_none(last_name),
                       "email": normalize_email(email, field="customData.email") if email else None}}


# ---- inbound ---------------------------------------------------------------------------------

async def receive_inbound(services: Services, account_id: str, *, message_sid: str, from_id: str, to_id: str | None,
                          body: str, status: str | None = None, channel: str | None = None,
                          campaign_id: str | None = None, first_name: str | None = None, last_name: str | None = None,
                          email: str | None = None, media_url: str | None = None,
                          media_content_type: str | None = None, message_type: str | None = None,
                          auto_submitted: bool = False, mail: Mapping[str, Any] | None = None,
                          stored_media: tuple[str | None, str | None] | None = None,
                          thread_contact_id: str | None = None) -> tuple[Message, bool]:
    """Spec §4.4. Returns (message, created). A messageSid seen before returns the first message and
    changes nothing (created False), also when the repeats arrive concurrently. auto_submitted: the message is
    an automatic reply (an out-of-office): it starts no SLA wait and gets no outside-hours message, nor a bot answer.
    The email channel's import (services/mail_in.py) adds mail (the message's `mail` column: subject, Message-IDs,
    quoted history), stored_media ((url, content type) of an attachment it stored already) and thread_contact_id
    (the contact a signed reference of the mail names: a From address seen for the first time joins it)."""
    db = services.db
    if media_url and not idempotency.claim_pending():
        # A retry must not decode and store its media again; without media the write's own check
        # (below) is enough, and skipping this read saves a thread hop on the hot path. (With an
        # Idempotency-Key the write answers, so that the key's rules apply to the repeat too.)
        existing = await store.find_by_external_id(db, account_id, message_sid)
        if existing is not None:
            return _true_repeat(existing, from_id, body, channel), False
    identity = _identity(account_id, from_id, first_name, last_name, email)
    if thread_contact_id is not None:
        identity["thread_contact_id"] = thread_contact_id
    stored_url, content_type = stored_media or await media.accept_media(services.settings, media_url,
                                                                        media_content_type)
    message = {"id": new_id("msg"), "account_id": account_id, "direction": "inbound", "mail": mail,
               "status": _blank_to_none(status) or "received", "body": body, "channel": _blank_to_none(channel),
               "campaign_id": _blank_to_none(campaign_id), "message_type": message_type or "text",
               "external_id": message_sid, "from_id": from_id, "to_id": to_id, "media_url": stored_url,
               "media_content_type": content_type, "error": None, "author": "contact", "author_user_id": None,
               "created_at": now_iso()}

    answers_since = iso_of_second(int(time.time()) - CAMPAIGN_ANSWER_WINDOW_SECONDS)
    now = iso(sla.clock(services)())  # business hours and SLA count from it (tests move the clock)
    try:
        # later: (business hours' {slaDueAt, autoReplied}, whether it waits for an agent); absent from an
        # Idempotency-Key's answer stored before issue 40
        first, message_id, contact_id, contact_created, campaign_id, keyword, bot_wanted, *later = await db.write(
            record_inbound, message, identity, answers_since, now, auto_submitted)
    except (Conflict, StoredResultLost):
        # Another process (or connection) inserted the same messageSid first; or the write committed
        # but the writer stopped before answering: the stored message says which it was.
        first = await store.find_by_external_id(db, account_id, message_sid)
        if first is None:
            raise
        if first["id"] == message["id"]:
            wake_delivery(services)
            first["bot_wanted"] = True  # unknown: the bot reads its context first and skips it if off
        if first["id"] == message["id"]:
            return first, True
        return _true_repeat(first, from_id, body, channel), False
    if first is not None:
        return _true_repeat(first, from_id, body, channel), False
    hours = later[0] if later else None
    queued = len(later) > 1 and later[1]
    if contact_created or keyword is not None or (hours and hours["autoReplied"]):
        wake_delivery(services)  # a contact.created (contact.updated) notification, or a reply, may be queued
    if hours and hours["slaDueAt"] and getattr(services, "sla", None) is not None:
        services.sla.notify()  # the watcher sleeps until the earliest due time: this one may be earlier
    if queued:
        assignment.wake(services)  # the conversation may wait for an agent now
    # message_id differs from message["id"] only in the answer to an Idempotency-Key retry: the first
    # request's message (the handler then does nothing more with it).
    message.update(id=message_id, contact_id=contact_id, campaign_id=campaign_id, opt_out_keyword=keyword,
                   bot_wanted=bot_wanted)
    return message, True


def _true_repeat(stored: Message, from_id: str, body: str, channel: str | None) -> Message:
    """The stored message when a repeated messageSid is the same message sent again (a retry: same fromId,
    body and channel); Conflict naming it otherwise: two channels' ids that collide, or an edited message,
    would otherwise be answered 200 and never stored (docs/api.md#custom-channel)."""
    differs = [name for name, stored_value, value in (
        ("fromId", stored["from_id"], from_id), ("body", stored["body"], body),
        ("channel", stored["channel"], _blank_to_none(channel))) if stored_value != value]
    if differs:
        raise errors.Conflict(f"customData.messageSid {stored['external_id']!r} is already stored as message "
                       f"{stored['id']} with another {' and '.join(differs)}: a messageSid names one message "
                       f"(make ids unique across channels, e.g. prefix them with the channel)",
                       field="customData.messageSid", existing_id=stored["id"])
    return stored


def wake_delivery(services: Services) -> None:
    """Tell the delivery worker (when this process runs one) that the outbox has a new row."""
    worker = getattr(services, "delivery", None)
    if worker is not None:
        worker.notify()


def after_inbound(services: Services, message: Message) -> None:
    """Once the 200 is sent: hand a new inbound message to the bot when its write found the bot active for
    it (services.bot, a BotRunner, answers off the request path with bounded concurrency). Reactions and
    opt-out or opt-in keywords never reach it."""
    if message.pop("bot_wanted", False):
        services.bot.submit(message)


# ---- outbound --------------------------------------------------------------------------------

async def _require_webhook(services: Services, account_id: str, channel: str | None = None) -> None:
    """Invalid when the account has nowhere to deliver replies on this channel. Checked before media is stored;
    without media the outbound write checks it itself (no read before it)."""
    account = await account_store.get_account(services.db, account_id)
    reason = NO_WEBHOOK if account is None else undeliverable(account["settings"], channel)
    if reason:
        raise Invalid(reason)


def _check_body(body: str | None, field: str) -> str:
    """The body, when there is one that is not blank; Invalid naming the field otherwise."""
    if body is None:
        raise Invalid(f"{field} is required")
    if not body.strip():
        raise Invalid(f"{field} cannot be empty")
    return body


async def send_custom_channel_message(services: Services, account_id: str, *, from_id: str,
                                      custom_channel: str | None, body: str | None, campaign_id: str | None = None,
                                      first_name: str | None = None, last_name: str | None = None,
                                      email: str | None = None, media_url: str | None = None,
                                      media_content_type: str | None = None) -> JSONObject:
    """Spec §4.5: resolve or create the contact from fromId like inbound, store the outbound message and
    queue its delivery. Returns {"messageId", "contactId"}."""
    body = _check_body(body, "customData.body")
    identity = _identity(account_id, from_id, first_name, last_name, email)
    if media_url:
        await _require_webhook(services, account_id)
    stored_url, content_type = await media.accept_media(services.settings, media_url, media_content_type)
    shown_media = media.public_media(services, stored_url, content_type)

    message = await services.db.write(
        record_outbound, identity, account_id=account_id, body=body, channel=custom_channel,
        to_id=from_id, campaign_id=_blank_to_none(campaign_id), media_url=stored_url, content_type=content_type,
        shown_media=shown_media, author="api")
    wake_delivery(services)
    return {"messageId": message["id"], "contactId": message["contact_id"]}


async def send_reply(services: Services, account_id: str, contact_id: str, body: str | None,
                     channel: str | None = None, *, author: str, author_user_id: str | None = None,
                     to_id: str | None = None, campaign_id: str | None = None, media_url: str | None = None,
                     media_content_type: str | None = None, in_tx: InTx | None = None) -> JSONObject:
    """The one way an outbound message to a known contact is made: bot replies, inbox replies and API
    sends all end in queue_outbound_in_tx. Without to_id/channel the reply goes where the contact last
    wrote from. author: 'bot', 'user' (with author_user_id), 'api' or 'campaign'.
    in_tx: None, or (fn, kwargs) with fn a module-level function run as fn(cx, message, **kwargs) in the
    reply's own transaction once the message is queued (the bot records its outcome and spends credits
    there); if it raises, nothing is stored and the exception reaches the caller.
    Returns {"messageId", "contactId"}."""
    if author not in AUTHORS or author == "contact":
        raise ValueError(f"an outbound message's author is one of {AUTHORS[1:]}, not {author!r}")
    body = _check_body(body, "body")
    if media_url:
        # Checked before the file is stored; a reply on the widget's channel needs no webhook.
        goes_on = channel if channel or to_id else await store.reply_channel(services.db, account_id, contact_id)
        if goes_on != WEB_CHANNEL:
            await _require_webhook(services, account_id, goes_on)
    stored_url, content_type = await media.accept_media(services.settings, media_url, media_content_type)
    shown_media = media.public_media(services, stored_url, content_type)

    message = await services.db.write(
        record_reply, account_id=account_id, contact_id=contact_id, body=body, channel=channel,
        to_id=to_id, campaign_id=campaign_id, media_url=stored_url, content_type=content_type,
        shown_media=shown_media, author=author, author_user_id=author_user_id, in_tx=in_tx)
    wake_delivery(services)
    return {"messageId": message["id"], "contactId": contact_id}


# ---- reading ---------------------------------------------------------------------------------

def public_message(services: Services, message: Mapping[str, Any]) -> JSONObject:
    """A message as the API shows it (docs/design.md#api-decisions), without its delivery attempts. A Failed
    reply says whether a retry will come (nextAttemptAt) or none will (final)."""
    next_attempt_at = (message["error"] or {}).get("nextAttemptAt") if message["status"] == "Failed" else None
    return {"id": message["id"], "direction": message["direction"], "status": message["status"],
            "body": message["body"], "channel": message["channel"], "contactId": message["contact_id"],
            "messageType": message["message_type"], "campaignId": message["campaign_id"],
            "author": message["author"],
            "fromId": message["from_id"], "toId": message["to_id"],
            "media": media.public_media(services, message["media_url"], message["media_content_type"]),
            "error": message["error"], "nextAttemptAt": next_attempt_at,
            "final": message["status"] == "Failed" and message["direction"] == "outbound" and not next_attempt_at,
            "bot": message.get("bot_outcome"), "subject": (message.get("mail") or {}).get("subject"),
            "quoted": (message.get("mail") or {}).get("quoted"), "createdAt": message["created_at"]}


async def get_message(services: Services, account_id: str, message_id: str) -> JSONObject:
    """GET /v1/messages/{id}: the message with every delivery attempt, oldest first."""
    message = await store.get_message(services.db, account_id, message_id)
    if message is None:
        raise NotFound(f"no message with id {message_id}")
    attempts = []
    if message["direction"] == "outbound":
        attempts = [{"at": a["at"], "httpStatus": a["http_status"], "error": a["error"]}
                    for a in await store.list_delivery_attempts(services.db, account_id, message_id)]
    return {**public_message(services, message), "attempts": attempts}


async def list_contact_messages(services: Services, account_id: str, contact_id: str, cursor: str | None = None,
                                limit: int = 50) -> JSONObject:
    """GET /v1/contacts/{id}/messages: oldest first, {data, nextCursor}."""
    if not 1 <= limit <= MAX_PAGE:
        raise Invalid(f"limit must be between 1 and {MAX_PAGE}")
    after = decode_cursor(cursor)  # before any read: a bad cursor is 400, as on the list endpoints
    if await contact_store.get_contact(services.db, account_id, contact_id) is None:
        raise NotFound(f"no contact with id {contact_id}", code="CONTACT_NOT_FOUND")
    rows = await store.list_contact_messages(services.db, account_id, contact_id, after=after, limit=limit)
    page = rows[:limit]
    return {"data": [public_message(services, m) for m in page],
            "nextCursor": encode_cursor(page[-1]["id"]) if len(rows) > limit else None}


OUTBOUND_STATUSES = ("Pending", "Sent", "Failed", "Cancelled")


def parse_since(text: str | None) -> str | None:
    """?since= as stored times are (iso()), or None when absent; Invalid naming since otherwise."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00")) if text.isascii() else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise Invalid("since must be an ISO 8601 time with its offset, e.g. 2026-01-31T12:00:00Z", field="since")
    return iso(when)


async def list_by_status(services: Services, account_id: str, *, status: str, since: str | None = None,
                         cursor: str | None = None, limit: int = 50) -> JSONObject:
    """GET /v1/messages?status=&since=: the account's outbound messages with this status, in the order they
    reached it (oldest first), from ``since`` on; {data, nextCursor}. Following nextCursor later reads the
    messages that reached it since (a message that changes status again moves to the end)."""
    if status not in OUTBOUND_STATUSES:
        raise Invalid(f"status must be one of {', '.join(OUTBOUND_STATUSES)}", field="status")
    since = parse_since(since)
    last = decode_cursor(cursor)  # "status_at id" of the previous page's last message
    after = None
    if last is not None:
        parts = last.split(" ", 1)
        if len(parts) != 2:
            raise Invalid("cursor is not valid: pass the nextCursor of a previous page unchanged", field="cursor")
        after = (parts[0], parts[1])
    rows = await store.list_outbound_by_status(services.db, account_id, status, since, after, limit)
    page = rows[:limit]
    return {"data": [public_message(services, m) for m in page],
            "nextCursor": encode_cursor(f"{page[-1]['status_at']} {page[-1]['id']}") if len(rows) > limit else None}
