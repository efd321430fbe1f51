"""An inbound message recorded (docs/api.md#custom-channel; services/messaging.py receive_inbound prepares it):
exactly once per messageSid, with its contact, its campaign, an opt-out (opt-in) keyword, whether the bot answers it,
the new conversation's mail to the agents, automatic assignment, the SLA's wait and the outside-hours message, all in
the message's one transaction."""
from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from common import opt_out
from common.bot_config import active_for
from common.business_hours import Schedule, outside_hours_body
from common.ids import parse_iso
from storage import accounts as account_store
from storage import assignment as assignment_store
from storage import campaigns as campaign_store
from storage import contacts as contact_store
from storage import mail as mail_store
from storage import messages as store
from storage import sla as sla_store
from storage.identities import Identity, resolve_contact_in_tx
from storage.interface import Connection
from storage.outbound import Message, queue_automatic_in_tx, store_messages_in_tx, undeliverable
from storage.rows import ContactRow


def record_inbound(cx: Connection, message: Message, identity: Identity, answers_since: str, now: str | None = None,
                    auto_submitted: bool = False) -> tuple[Any, ...]:
    """In the writer: store an inbound message unless its messageSid was stored before. The single
    writer serializes this check-then-insert against every other write. A message without a campaignId
    from a contact with a campaign message since answers_since gets that campaign's; a text whose whole
    body is an opt-out (opt-in) keyword opts the contact out (in). Returns (the first message or None, the
    stored message's id, the contact id, whether the contact was created, the campaignId, True/False/None
    for an opt-out/opt-in/no keyword, whether the bot is to answer it): only what the caller lacks crosses
    back (JSON data: an Idempotency-Key stores it). The bot answers a text message, not a keyword, of an
    account whose bot is active for it; reactions never (docs/design.md#api-decisions). Last, for an account
    with business hours or an SLA, {slaDueAt, autoReplied} (storage/sla.py on_contact_message_in_tx, at now), else None; and whether
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
    contact_id, contact_created = resolve_contact_in_tx(cx, identity, mapped)
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
    store_messages_in_tx(cx, [{**message, "contact_id": contact_id, "campaign_id": campaign_id,
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
                    "autoReplied": notice is not None and outside_hours_reply_in_tx(cx, message, contact_id, notice)}
    return None, message["id"], contact_id, contact_created, campaign_id, keyword, bot_wanted, business, waits


def outside_hours_reply_in_tx(cx: Connection, message: Message, contact_id: str,
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
