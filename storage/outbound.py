"""Every outbound message is made here, in the caller's transaction (a reply, an API send, a campaign's batch, an
automatic message): the message rows, their conversations and events, and their deliveries in the outbox
(services/messaging.py validates and prepares them; the delivery worker, services/delivery.py, sends the outbox's
rows)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from common import email_channel
from common.errors import Invalid, NotFound
from common.ids import new_ids, now_iso
from storage import accounts as account_store
from storage import bot_state
from storage import contacts as contact_store
from storage import conversations
from storage import events
from storage import mail as mail_store
from storage import messages as store
from storage import outbox
from storage.identities import Identity, resolve_contact_in_tx
from storage.interface import Connection

NO_WEBHOOK = "no Custom Channel Webhook URL is configured; set it with PATCH /v1/account/settings"
NO_SMTP = "an email reply needs the account's SMTP server: set email.smtp (Settings > Email)"
WEB_CHANNEL = "web"  # the website chat widget's (services/widget.py): its replies are stored, not POSTed
# A message as a write makes it: the messages row's columns (storage/rows.py MessageRow) and what the write adds
# for its caller (contact_id, opt_out_keyword, bot_wanted, status_at ...).
Message = dict[str, Any]
# An in_tx hook of send_reply: (fn, kwargs), run as fn(cx, message, **kwargs) in the reply's transaction.
InTx = tuple[Callable[..., Any], Mapping[str, Any]]


def undeliverable(settings: Mapping[str, Any], channel: str | None) -> str | None:
    """Why a reply on this channel cannot be delivered with these settings (in words), or None: an email goes by
    the account's SMTP server, every other channel but the widget's to the Custom Channel Webhook URL."""
    if channel == email_channel.CHANNEL:
        return None if email_channel.can_send(settings) else NO_SMTP
    return None if settings.get("customChannelWebhookUrl") else NO_WEBHOOK


def store_messages_in_tx(cx: Connection, messages: list[Message], announce: bool = True) -> None:
    """Every message insert: the rows, their conversations (last activity, unread) and, unless announce is
    False (a campaign batch announces its messages with one messages.created event), message.created for the
    account's open pages, in the caller's transaction."""
    store.insert_messages_in_tx(cx, messages)
    conversations.on_messages_in_tx(cx, messages)
    if announce:
        for message in messages:
            events.message_created_in_tx(cx, message)


def queue_outbound_in_tx(cx: Connection, replies: Sequence[Mapping[str, Any]], *, account_id: str,
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
    move. announce: False when the caller emits one event for a batch of messages (store_messages_in_tx).

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
        # delivered_body: what the receiver gets when the stored body must not hold it (a CSAT ask's link: storage/csat.py)
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
    store_messages_in_tx(cx, messages, announce)
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
    return queue_outbound_in_tx(cx, replies, account_id=account_id, user_id=user_id, campaign_id=campaign_key,
                                 media_url=None, content_type=None, shown_media=None, author="campaign",
                                 outbox_campaign_id=campaign_id, announce=announce)


def queue_automatic_in_tx(cx: Connection, account_id: str, account: Mapping[str, Any],
                          reply: Mapping[str, Any]) -> Message:
    """An automatic message (author auto: the outside-hours message, a CSAT ask) through the one outbound path, in
    the caller's transaction. account: delivery_context_in_tx's; reply: as queue_outbound_in_tx takes them.
    Returns the message."""
    [message] = queue_outbound_in_tx(cx, [reply], account_id=account_id, campaign_id=None, media_url=None,
                                      content_type=None, shown_media=None, author="auto",
                                      user_id=account["owner_user_id"] or account_id)
    return message


def record_outbound(cx: Connection, identity: Identity, *, body: str, channel: str | None, to_id: str | None,
                     **outbound: Any) -> Message:
    """In the writer: resolve or create the contact from fromId, then store and queue the message."""
    contact_id, _ = resolve_contact_in_tx(cx, identity)
    contact = contact_store.get_contact.sync(cx, identity["account_id"], contact_id)
    [message] = queue_outbound_in_tx(cx, [{"contact": contact, "body": body, "to_id": to_id, "channel": channel}],
                                      **outbound)
    return message


def record_reply(cx: Connection, *, account_id: str, contact_id: str, body: str, to_id: str | None,
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
    [message] = queue_outbound_in_tx(cx, [{"contact": contact, "body": body, "to_id": to_id, "channel": channel}],
                                      account_id=account_id, **outbound)
    if in_tx is not None:
        fn, kwargs = in_tx
        fn(cx, message, **kwargs)
    return message
