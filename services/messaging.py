"""Custom-channel messaging: inbound messages (exactly once per messageSid), the fromId -> contact
mapping, outbound messages queued for delivery in the same transaction, and reading messages back."""
from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, NotRequired, TypedDict, cast

from services import assignment, idempotency, media, opt_out, sla
from common.bot_config import active_for
from common.business_hours import Schedule, outside_hours_body
from services.contact_fields import looks_like_email, looks_like_phone, normalize_email
from services.context import JSONObject, Services
from services.lists import decode_cursor, encode_cursor
from common import email_channel
from common import errors
from common.errors import Invalid, NotFound
from common.ids import iso, iso_of_second, new_id, new_ids, now_iso, parse_iso
from storage import bot_state
from storage import accounts as account_store
from storage import assignment as assignment_store
from storage import campaigns as campaign_store
from storage import contacts as contact_store
from storage import conversations
from storage import events
from storage import mail as mail_store
from storage import messages as store
from storage import outbox
from storage import sla as sla_store
from storage.db import Conflict, StoredResultLost
from storage.interface import Connection
from storage.rows import ContactRow

log = logging.getLogger("parley.messaging")

QUEUED = "Message queued for delivery"
NO_WEBHOOK = "no Custom Channel Webhook URL is configured; set it with PATCH /v1/account/settings"
NO_SMTP = "an email reply needs the account's SMTP server: set email.smtp (Settings > Email)"
MAX_PAGE = 200
# Who wrote a message (messages.author): the contact (every inbound message) or, outbound, the bot, a UI
# user, an API client (POST send_custom_channel_message) or a campaign.
# auto: the outside-hours message (issue 40), a CSAT ask (issue 41)
AUTHORS = ("contact", "bot", "user", "api", "campaign", "auto")
# An inbound message without customData.campaignId from a contact that got a campaign message this recently
# is an answer to that campaign: it is stored with the campaign's campaignId, and the bot answers it with
# bot.campaigns[campaignId] (docs/api.md "Campaigns").
CAMPAIGN_ANSWER_WINDOW_SECONDS = 72 * 3600
WEB_CHANNEL = "web"  # the website chat widget's (services/widget.py): its replies are stored, not POSTed


_UNREAD: Any = object()  # _resolve_contact_in_tx: the caller has not read the fromId's contact
# A message as a write makes it: the messages row's columns (storage/rows.py MessageRow) and what the write adds
# for its caller (contact_id, opt_out_keyword, bot_wanted, status_at ...).
Message = dict[str, Any]
# An in_tx hook of send_reply: (fn, kwargs), run as fn(cx, message, **kwargs) in the reply's transaction.
InTx = tuple[Callable[..., Any], Mapping[str, Any]]


class Identity(TypedDict):
    """_identity's: what the contact resolution needs, normalized before the transaction."""
    account_id: str
    from_id: str
    from_phone: str | None
    from_email: str | None
    values: dict[str, str | None]  # first_name, last_name, email
    thread_contact_id: NotRequired[str]  # an email's verified reference to a contact (services/mail_in.py)


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


def _resolve_contact_in_tx(cx: Connection, identity: Identity, mapped: str | None = _UNREAD) -> tuple[str, bool]:
    """Spec §2 rule 3 / docs/design.md#api-decisions: a fromId maps to one contact for ever. On first sight a fromId that
    is the E.164 phone or the email of an existing contact links to it; otherwise a new contact is made
    (a changed fromId gives a new contact, so customData.email alone never links). Later messages only
    fill blank fields. mapped: the contact the fromId maps to when the caller read it in this transaction
    (None: not mapped then). Returns (contact id, whether a contact was created)."""
    account_id, from_id, values = identity["account_id"], identity["from_id"], identity["values"]
    contact_id = store.identity_contact_id_in_tx(cx, account_id, from_id) if mapped is _UNREAD else mapped
    # Look again once the fromId is ours (PostgreSQL; SQLite's one writer locks nothing): mapped while we waited,
    # or moved by a merge of its contact (storage/contact_merge.py takes the same lock first).
    if store.lock_identity_in_tx(cx, account_id, from_id):
        contact_id = store.identity_contact_id_in_tx(cx, account_id, from_id)
    if contact_id is not None:
        if any(values.values()):  # most messages carry no names or email: nothing to fill, no read
            # the identity's contact: it exists (contact_identities.contact_id is a foreign key)
            contact = cast(ContactRow, contact_store.get_contact.sync(cx, account_id, contact_id))
            contact_store.fill_blanks_in_tx(cx, contact, values)
        return contact_id, False
    linked = None
    if identity.get("thread_contact_id"):  # an email's verified reference: a new address of that contact
        linked = contact_store.get_contact.sync(cx, account_id, identity["thread_contact_id"])
    if linked is None:
        if identity["from_phone"]:
            contact_store.lock_in_tx(cx, account_id, "phone", identity["from_phone"])
        elif identity["from_email"]:
            contact_store.lock_in_tx(cx, account_id, "email", identity["from_email"])
    if linked is not None:
        pass
    elif identity["from_phone"]:
        linked = contact_store.find_by_phone.sync(cx, account_id, identity["from_phone"])
    elif identity["from_email"]:
        linked = contact_store.find_by_email.sync(cx, account_id, identity["from_email"])
    resolved: str
    if linked is not None:
        contact_store.fill_blanks_in_tx(cx, linked, values)
        resolved = linked["id"]
    else:
        row: Mapping[str, Any] = {
            "id": new_id("ct"), "account_id": account_id, "created_at": now_iso(),
            "first_name": values["first_name"], "last_name": values["last_name"],
            "phone": identity["from_phone"], "email": values["email"] or identity["from_email"]}
        if row["email"] and row["email"] != identity["from_email"]:
            # customData.email never links (above), and an email names one contact: another's stays theirs
            row = contact_store.without_taken_email_in_tx(cx, row, refuse=False)
        contact_store.insert_contact_in_tx(cx, row)
        contact_store.emit_created_in_tx(cx, row)
        resolved = row["id"]
    store.insert_identity_in_tx(cx, account_id, from_id, resolved)
    return resolved, linked is None


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
            _record_inbound, message, identity, answers_since, now, auto_submitted)
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


def _record_inbound(cx: Connection, message: Message, identity: Identity, answers_since: str, now: str | None = None,
                    auto_submitted: bool = False) -> tuple[Any, ...]:
    """In the writer: store an inbound message unless its messageSid was stored before. The single
    writer serializes this check-then-insert against every other write. A message without a campaignId
    from a contact with a campaign message since answers_since gets that campaign's; a text whose whole
    body is an opt-out (opt-in) keyword opts the contact out (in). Returns (the first message or None, the
    stored message's id, the contact id, whether the contact was created, the campaignId, True/False/None
    for an opt-out/opt-in/no keyword, whether the bot is to answer it): only what the caller lacks crosses
    back (JSON data: an Idempotency-Key stores it). The bot answers a text message, not a keyword, of an
    account whose bot is active for it; reactions never (docs/design.md#api-decisions). Last, for an account
    with business hours or an SLA, {slaDueAt, autoReplied} (services/sla.py, at now), else None; and whether
    the conversation waits for automatic assignment (the message opened it, or it waited, and nobody took it)."""
    account_id = message["account_id"]
    # One read for the common case: the sid's message, the fromId's contact, its campaign key, the bot, and
    # (only for a short text, which may be an opt-out or opt-in keyword) the account's keywords.
    may_be_keyword = message["message_type"] == "text" and opt_out.might_be_keyword(message["body"])
    stored, mapped, mapped_campaign_key, bot, keywords, (hours, sla_settings), assignment_setting = \
        store.inbound_context_in_tx(cx, account_id, message["external_id"], identity["from_id"], answers_since,
                                    may_be_keyword)
    if stored:
        # inbound_context_in_tx found it in this transaction
        first = cast(Message, store.find_by_external_id_in_tx(cx, account_id, message["external_id"]))
        return first, first["id"], first["contact_id"], False, first["campaign_id"], None, False, None, False
    contact_id, contact_created = _resolve_contact_in_tx(cx, identity, mapped)
    campaign_id = message["campaign_id"]
    if campaign_id is None and not contact_created:
        campaign_id = mapped_campaign_key if contact_id == mapped else \
            campaign_store.latest_campaign_key_in_tx(cx, account_id, contact_id, answers_since)  # linked just now
    keyword = None
    if may_be_keyword:
        keyword = opt_out.match(message["body"], *keywords)
        if keyword is not None:
            contact_store.set_opted_out_by_reply_in_tx(cx, account_id, contact_id, keyword,
                                                       by=message["body"].strip(), at=message["created_at"])
    bot_wanted = message["message_type"] == "text" and keyword is None and not auto_submitted and \
        active_for(bot, campaign_id)
    # bot_pending: the bot owes this message a decision (a column of the same insert, no statement more).
    # queue: a conversation this message opens (new, or reopened) is assigned automatically when it is on: a new
    # contact's to the agent claimed now (the conversation's insert names them), a known contact's after its
    # upsert; or, nobody free or older ones waiting, waits in the queue (the upsert decides: no statement more).
    setting = assignment_store.setting_of(assignment_setting)
    queue = keyword is None and setting[0] in assignment_store.ON
    at = parse_iso(now or message["created_at"])
    assignee = assignment_store.claim_for_new_in_tx(cx, account_id, setting, at) \
        if queue and contact_created else None
    # A new conversation: the contact's first message (a new contact's, or a known one's first from anywhere). The
    # read only for a fromId seen for the first time that linked to a contact: a new one has no conversation yet.
    opens = keyword is None and (contact_created or (
        mapped is None and not mail_store.had_inbound_in_tx(cx, account_id, contact_id)))
    _store_messages_in_tx(cx, [{**message, "contact_id": contact_id, "campaign_id": campaign_id,
                                "bot_pending": 1 if bot_wanted else None, "keyword": keyword is not None,
                                "queue": queue and assignee is None,
                                "assignee_user_id": assignee and assignee["id"]}])
    waits = queue and contact_created and assignee is None  # the Assigner is woken for it
    if opens:
        mail_store.queue_agent_mail_in_tx(cx, account_id, mail_store.NEW_CONVERSATION, contact_id)
    if assignee is not None:
        assignment_store.assigned_new_in_tx(cx, account_id, contact_id, setting, assignee)
    elif queue and not contact_created:
        waits = assignment_store.assign_reopened_in_tx(cx, account_id, contact_id, setting, at)
    business = None
    if (hours or sla_settings) and message["message_type"] == "text" and keyword is None and not auto_submitted:
        due, notice = sla_store.on_contact_message_in_tx(cx, account_id=account_id, contact_id=contact_id,
                                                   now=at, hours=hours,
                                                   sla=sla_settings, bot_answers=bot_wanted)
        business = {"slaDueAt": due,
                    "autoReplied": notice is not None and _outside_hours_reply_in_tx(cx, message, contact_id, notice)}
    return None, message["id"], contact_id, contact_created, campaign_id, keyword, bot_wanted, business, waits


def _outside_hours_reply_in_tx(cx: Connection, message: Message, contact_id: str,
                               notice: tuple[str, str, Schedule, datetime | None]) -> bool:
    """The outside-hours message (notice: its closed period, template, schedule and next opening) as a reply to
    the contact's message, through the one outbound path (author auto), unless the conversation got it in this
    closed period already or the account has no webhook to deliver it to. True when it was queued."""
    period, template, schedule, opens = notice
    account_id = message["account_id"]
    if not sla_store.claim_outside_hours_in_tx(cx, account_id, contact_id, period):
        return False  # the common case while closed: one UPDATE that changes nothing, no read
    account = account_store.delivery_context_in_tx(cx, account_id)
    if account is None or undeliverable(account["settings"], message["channel"]):
        return False  # nowhere to deliver it: this closed period passes without one
    contact = cast(ContactRow, contact_store.get_contact.sync(cx, account_id, contact_id))  # the message's, stored
    queue_automatic_in_tx(cx, account_id, account, {
        "contact": contact, "body": outside_hours_body(template, contact, schedule, opens),
        "to_id": message["from_id"], "channel": message["channel"]})
    return True


def queue_automatic_in_tx(cx: Connection, account_id: str, account: Mapping[str, Any],
                          reply: Mapping[str, Any]) -> Message:
    """An automatic message (author auto: the outside-hours message, a CSAT ask) through the one outbound path, in
    the caller's transaction. account: delivery_context_in_tx's; reply: as _queue_outbound_in_tx takes them.
    Returns the message."""
    [message] = _queue_outbound_in_tx(cx, [reply], account_id=account_id, campaign_id=None, media_url=None,
                                      content_type=None, shown_media=None, author="auto",
                                      user_id=account["owner_user_id"] or account_id)
    return message


def _store_messages_in_tx(cx: Connection, messages: list[Message], announce: bool = True) -> None:
    """Every message insert: the rows, their conversations (last activity, unread) and, unless announce is
    False (a campaign batch announces its messages with one messages.created event), message.created for the
    account's open pages, in the caller's transaction."""
    store.insert_messages_in_tx(cx, messages)
    conversations.on_messages_in_tx(cx, messages)
    if announce:
        for message in messages:
            events.message_created_in_tx(cx, message)


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

def undeliverable(settings: Mapping[str, Any], channel: str | None) -> str | None:
    """Why a reply on this channel cannot be delivered with these settings (in words), or None: an email goes by
    the account's SMTP server, every other channel but the widget's to the Custom Channel Webhook URL."""
    if channel == email_channel.CHANNEL:
        return None if email_channel.can_send(settings) else NO_SMTP
    return None if settings.get("customChannelWebhookUrl") else NO_WEBHOOK


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


def _queue_outbound_in_tx(cx: Connection, replies: Sequence[Mapping[str, Any]], *, account_id: str,
                          campaign_id: str | None, media_url: str | None, content_type: str | None,
                          shown_media: Mapping[str, Any] | None, author: str, author_user_id: str | None = None,
                          outbox_campaign_id: str | None = None, user_id: str | None = None,
                          announce: bool = True) -> list[Message]:
    """Store outbound messages as Pending and their deliveries in the outbox, in this one transaction: one
    message per reply, {contact (the contact's row), body, to_id, channel}; every other argument is common to
    them (and optionally message_type, default text, and delivered_body, the payload's body when it differs from the
    stored one). Every outbound message is made here, a lone reply as a batch of one (a campaign's batch holds
    hundreds: a few statements for all of them). A reply written by a person (author 'user' or 'api') also
    pauses the bot for the contact (the inbox relies on it). Returns the messages, in the order of replies.
    user_id: the payload's userId when the caller has it (a campaign's batch); without it, it is read here,
    and the write is Invalid (nothing stored) when the account has no Custom Channel Webhook URL.
    shown_media: public_media() of the attachment, made before the transaction (signing is CPU work).
    author: who wrote it, AUTHORS minus 'contact'; author_user_id: the UI user, for 'user'.
    outbox_campaign_id: the campaign (campaigns.id) the messages belong to, whose counts their deliveries
    move. announce: False when the caller emits one event for a batch of messages (_store_messages_in_tx).

    The payload is the spec's six fields (§6) plus, per docs/design.md#api-decisions "Reply payload, extended", campaignId
    (when set) and contact {firstName, lastName, phone, email}: a contact that never wrote on a custom
    channel has no fromId (toId is null), and the receiver needs an address to reach it."""
    settings = None
    # A reply on the website chat widget's channel is delivered by being stored: the visitor's frame reads it
    # from the event stream (services/widget.py). Only the others need the webhook and an outbox row.
    # An email goes by the account's SMTP server (services/mail_out.py), also from the outbox.
    delivered_on = {reply["channel"] for reply in replies if reply["channel"] != WEB_CHANNEL}
    if user_id is None and not delivered_on:
        user_id = account_id
    if user_id is None:
        account = account_store.delivery_context_in_tx(cx, account_id)
        if account is None:  # (delivered_on is not empty here: user_id would be the account's)
            raise Invalid(NO_WEBHOOK)
        for channel in delivered_on:
            reason = undeliverable(account["settings"], channel)
            if reason:
                raise Invalid(reason)
        # The payload's userId (docs/api.md#webhook-delivery): the account's owner, or the account itself when it has no user.
        settings, user_id = account["settings"], account["owner_user_id"] or account_id
    now = now_iso()  # one transaction, one time
    messages: list[Message] = []
    deliveries: list[dict[str, Any]] = []
    counts = Counter(reply["contact"]["id"] for reply in replies)
    sequences = contact_store.take_reply_sequences_in_tx(cx, account_id, counts)
    for reply, message_id in zip(replies, new_ids("msg", len(replies))):
        contact, body, to_id, channel = reply["contact"], reply["body"], reply["to_id"], reply["channel"]
        on_widget = channel == WEB_CHANNEL
        message = {"id": message_id, "account_id": account_id, "contact_id": contact["id"],
                   "direction": "outbound", "status": "Sent" if on_widget else "Pending", "body": body,
                   "channel": channel,
                   "campaign_id": campaign_id, "message_type": reply.get("message_type", "text"),
                   "external_id": None, "from_id": None,
                   "to_id": to_id, "media_url": media_url, "media_content_type": content_type, "error": None,
                   "author": author, "author_user_id": author_user_id, "created_at": now, "status_at": now}
        # This contact's numbers were taken above; its replies of this batch get them in order.
        sequence = sequences[contact["id"]] - counts[contact["id"]] + 1
        counts[contact["id"]] -= 1
        # delivered_body: what the receiver gets when the stored body must not hold it (a CSAT ask's link: services/csat.py)
        payload = {"contactId": contact["id"], "messageId": message["id"], "userId": user_id,
                   "body": reply.get("delivered_body", body),
                   "toId": to_id, "channel": channel, "accountId": account_id, "author": author,
                   "createdAt": now, "sequence": sequence}
        if author == "user" and author_user_id:
            payload["authorUserId"] = author_user_id
        if campaign_id:
            payload["campaignId"] = campaign_id
        payload["contact"] = {"firstName": contact["first_name"], "lastName": contact["last_name"],
                              "phone": contact["phone"], "email": contact["email"]}
        if shown_media:
            payload["mediaUrl"], payload["mediaContentType"] = shown_media["url"], shown_media["contentType"]
        if channel == email_channel.CHANNEL:  # its subject and the Message-IDs it answers: the customer's latest email
            message["mail"] = payload["mail"] = email_channel.reply_mail(
                store.last_inbound_mail_in_tx(cx, account_id, contact["id"]))
        messages.append(message)
        if on_widget:
            mail_store.queue_visitor_mail_in_tx(cx, account_id, message, contact)  # when the visitor left an email
            continue
        deliveries.append({"account_id": account_id, "kind": "reply", "message_id": message["id"],
                           "payload": payload, "campaign_id": outbox_campaign_id})
    _store_messages_in_tx(cx, messages, announce)
    outbox.enqueue_many_in_tx(cx, deliveries)
    if author in bot_state.HUMAN_AUTHORS:
        if settings is None:
            settings = cast(dict[str, Any], account_store.get_settings_in_tx(cx, account_id))  # the writer's account
        for message in messages:
            bot_state.pause_after_human_reply_in_tx(cx, settings, account_id=account_id,
                                                      contact_id=message["contact_id"], campaign_id=campaign_id,
                                                      author=author)
    return messages


def queue_campaign_messages_in_tx(cx: Connection, recipients: Sequence[tuple[Mapping[str, Any], str]], *,
                                  account_id: str, user_id: str | None, channel: str | None, campaign_key: str,
                                  campaign_id: str | None, announce: bool = False) -> list[Message]:
    """A campaign's messages to a batch of recipients, [(contact row, personalised body)], through the one
    outbound path: each to where its contact last wrote from, or, for a contact that never wrote on a custom
    channel, with toId null (the payload's contact carries its phone and email). Returns the messages, in the
    recipients' order. Their live event is the batch's: the caller emits events.MESSAGES_CREATED once for
    the messages of its transaction (announce: each message gets its own message.created instead, for a
    draft's test message). campaign_id None: the messages move no campaign's counts (a test message)."""
    targets = store.reply_targets_in_tx(cx, account_id, [contact["id"] for contact, _ in recipients])
    replies: list[dict[str, Any]] = []
    for contact, body in recipients:
        to_id, last_channel = targets.get(contact["id"], (None, None))
        replies.append({"contact": contact, "body": body, "to_id": to_id, "channel": channel or last_channel})
    return _queue_outbound_in_tx(cx, replies, account_id=account_id, user_id=user_id, campaign_id=campaign_key,
                                 media_url=None, content_type=None, shown_media=None, author="campaign",
                                 outbox_campaign_id=campaign_id, announce=announce)


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
        _record_outbound, identity, account_id=account_id, body=body, channel=custom_channel,
        to_id=from_id, campaign_id=_blank_to_none(campaign_id), media_url=stored_url, content_type=content_type,
        shown_media=shown_media, author="api")
    wake_delivery(services)
    return {"messageId": message["id"], "contactId": message["contact_id"]}


def _record_outbound(cx: Connection, identity: Identity, *, body: str, channel: str | None, to_id: str | None,
                     **outbound: Any) -> Message:
    """In the writer: resolve or create the contact from fromId, then store and queue the message."""
    contact_id, _ = _resolve_contact_in_tx(cx, identity)
    contact = contact_store.get_contact.sync(cx, identity["account_id"], contact_id)
    [message] = _queue_outbound_in_tx(cx, [{"contact": contact, "body": body, "to_id": to_id, "channel": channel}],
                                      **outbound)
    return message


async def send_reply(services: Services, account_id: str, contact_id: str, body: str | None,
                     channel: str | None = None, *, author: str, author_user_id: str | None = None,
                     to_id: str | None = None, campaign_id: str | None = None, media_url: str | None = None,
                     media_content_type: str | None = None, in_tx: InTx | None = None) -> JSONObject:
    """The one way an outbound message to a known contact is made: bot replies, inbox replies and API
    sends all end in _queue_outbound_in_tx. Without to_id/channel the reply goes where the contact last
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
        _record_reply, account_id=account_id, contact_id=contact_id, body=body, channel=channel,
        to_id=to_id, campaign_id=campaign_id, media_url=stored_url, content_type=content_type,
        shown_media=shown_media, author=author, author_user_id=author_user_id, in_tx=in_tx)
    wake_delivery(services)
    return {"messageId": message["id"], "contactId": contact_id}


def _record_reply(cx: Connection, *, account_id: str, contact_id: str, body: str, to_id: str | None,
                  channel: str | None, in_tx: InTx | None = None, **outbound: Any) -> Message:
    """In the writer: a reply to a known contact, by default where it last wrote from."""
    contact = contact_store.get_contact.sync(cx, account_id, contact_id)
    if contact is None:
        raise NotFound(f"no contact with id {contact_id}", code="CONTACT_NOT_FOUND")
    if to_id is None and channel is not None:
        to_id = store.channel_target_in_tx(cx, account_id, contact_id, channel)
        if to_id is None and channel == WEB_CHANNEL:
            raise Invalid("channel: this contact has never written from the website chat widget, so a reply "
                          "cannot reach it there", field="channel")
    if to_id is None:
        target = store.reply_target_in_tx(cx, account_id, contact_id)
        if target is None:
            raise Invalid("this contact has never written on a custom channel, so there is no fromId to reply to")
        to_id, channel = target[0], channel or target[1]
    [message] = _queue_outbound_in_tx(cx, [{"contact": contact, "body": body, "to_id": to_id, "channel": channel}],
                                      account_id=account_id, **outbound)
    if in_tx is not None:
        fn, kwargs = in_tx
        fn(cx, message, **kwargs)
    return message


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
