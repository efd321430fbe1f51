"""Campaigns (docs/design.md#api-decisions): creation with a personalised body (at once, scheduled, or as a draft
to preview, test and start), reading, pause/resume/cancel/retry-failed, and the per-recipient listing and CSV
export. The sending itself is services/campaign_runner.py."""
from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from common.errors import Invalid
from common.ids import iso, new_id, now_iso
from common.spreadsheet import csv_pages
from services import contacts, lists
from services.contact_fields import normalize_tag
from services.context import JSONObject, Services
from common.placeholders import FIELDS, compile_body, render
from services.messaging import NO_WEBHOOK
from common.errors import Conflict
from storage import accounts as account_store
from storage import campaign_actions
from storage import campaigns as store
from storage import contacts as contact_store
from storage.interface import Store

DEFAULT_RATE_PER_MINUTE = 600
MAX_RATE_PER_MINUTE = 1_000_000
CSV_COLUMNS = ("contactId", "firstName", "lastName", "phone", "email", "messageId", "status", "httpStatus", "error",
               "errorAt")

public_campaign = store.public_campaign
RECIPIENT_STATUSES = store.RECIPIENT_STATUSES


async def create_campaign(db: Store, account_id: str, *, name: str | None, body: str | None, list_id: str | None = None,
                          tag: str | None = None, campaign_id: str | None = None, channel: str | None = None,
                          start_at: datetime | None = None, rate_per_minute: int | None = None, draft: bool = False,
                          by: Mapping[str, Any] | None = None) -> JSONObject:
    """POST /v1/campaigns (audited as campaign.sent, or campaign.drafted, by ``by``). The audience is a list
    (list_id) or a tag (the account's contacts that carry it when the campaign starts), exactly one of them.
    start_at: an aware datetime (None or past: now). Starts at once unless scheduled or a draft (which
    start_campaign starts)."""
    name, campaign_id, channel = (v.strip() if isinstance(v, str) else v for v in (name, campaign_id, channel))
    if not name:
        raise Invalid("name is required and cannot be blank", field="name")
    if list_id is None and tag is None:
        raise Invalid("listId or tag is required: a campaign goes to a list's members or to the contacts with a tag",
                      field="listId")
    if list_id is not None and tag is not None:
        raise Invalid("tag cannot be given with listId: a campaign goes to a list's members or to the contacts with "
                      "a tag, not both", field="tag")
    tag = normalize_tag(tag) if tag is not None else None
    if body is None or not body.strip():
        raise Invalid("body is required and cannot be blank", field="body")
    compile_body(body)
    if campaign_id == "":
        raise Invalid("campaignId cannot be blank", field="campaignId")
    rate = DEFAULT_RATE_PER_MINUTE if rate_per_minute is None else rate_per_minute
    if not 1 <= rate <= MAX_RATE_PER_MINUTE:
        raise Invalid(f"ratePerMinute must be an integer from 1 to {MAX_RATE_PER_MINUTE}", field="ratePerMinute")
    if draft and start_at:
        raise Invalid("startAt cannot be given with draft: a draft starts when POST /v1/campaigns/{id}/start says "
                      "(now, or at its startAt)", field="startAt")
    await _require_webhook(db, account_id)
    now = now_iso()
    row = {"id": new_id("cmp"), "account_id": account_id, "name": name, "list_id": list_id, "tag": tag, "body": body,
           "channel": channel or None, "rate_per_minute": rate, "created_at": now,
           "start_at": max(iso(start_at), now) if start_at else now, "draft": bool(draft)}
    row["campaign_key"] = campaign_id or row["id"]
    return public_campaign(await store.create_campaign(db, row, now, by))


async def _require_webhook(db: Store, account_id: str) -> None:
    """Invalid when the account has nowhere to deliver the campaign's messages."""
    account = await account_store.get_account(db, account_id)
    if account is None or not account["settings"].get("customChannelWebhookUrl"):
        raise Invalid(NO_WEBHOOK)


# ---- a draft: preview, test, start -------------------------------------------------------------------

async def start_campaign(services: Services, account_id: str, campaign_id: str, *, start_at: datetime | None = None,
                         by: Mapping[str, Any] | None = None) -> JSONObject:
    """POST /v1/campaigns/{id}/start: a draft (or a scheduled campaign) starts now, its list's members
    snapshotted in this request, or is scheduled for start_at (an aware datetime, later than now; the runner
    starts it then, in whichever process holds its lease). Conflict in any other status."""
    now = now_iso()
    if start_at is not None and iso(start_at) <= now:
        raise Invalid("startAt must be in the future; leave it out to start now", field="startAt")
    await get_campaign(services.db, account_id, campaign_id)  # 404 before anything about the account
    await _require_webhook(services.db, account_id)
    campaign = public_campaign(await store.start_campaign(services.db, account_id, campaign_id,
                                                          iso(start_at) if start_at else None, now, by))
    services.campaigns.notify()
    return campaign


def public_sample(contact: Mapping[str, Any]) -> JSONObject:
    """A contact a preview was filled for: {id, name, firstName, lastName, phone, email, optedOut}."""
    return {"id": contact["id"], "name": contacts.display_name(contact), "firstName": contact["first_name"],
            "lastName": contact["last_name"], "phone": contact["phone"], "email": contact["email"],
            "optedOut": bool(contact["opted_out"])}


async def preview(db: Store, account_id: str, campaign_id: str, contact_id: str | None = None) -> JSONObject:
    """POST /v1/campaigns/{id}/preview: the body filled for the account's contact contact_id (default: the
    list's first member; none when the list is empty, the placeholders then empty), who the campaign would
    send to if it started now ({total, optedOut}), and the list's first members to preview or test with.
    Sends and changes nothing."""
    if contact_id is not None and not contact_id.strip():
        raise Invalid("contactId cannot be blank (leave it out for the list's first contact)", field="contactId")
    campaign = await get_campaign(db, account_id, campaign_id)
    audience = await store.audience(db, account_id, campaign["listId"], campaign["tag"])
    if contact_id:
        contact_id = contact_id.strip()
        contact = await contact_store.get_contact(db, account_id, contact_id)
        if contact is None:
            raise contacts.not_found(f"no contact with id {contact_id}")
    else:
        contact = audience["sample"][0] if audience["sample"] else None
    filled = render(compile_body(campaign["body"]), contact or dict.fromkeys(FIELDS.values()))
    return {"body": filled, "contact": public_sample(contact) if contact else None,
            "recipients": {"total": audience["total"], "optedOut": audience["optedOut"]},
            "sample": [public_sample(member) for member in audience["sample"]]}


async def send_test(services: Services, account_id: str, campaign_id: str, contact_id: str | None,
                    by: Mapping[str, Any] | None = None) -> JSONObject:
    """POST /v1/campaigns/{id}/test: one real message, the body filled for this contact of the account, sent
    like the campaign's (same payload, campaignId and channel) but counted in no campaign: the campaign keeps
    its status. Refused for an opted-out contact. Returns {messageId, contactId, body}."""
    contact_id = (contact_id or "").strip()
    if not contact_id:
        raise Invalid("contactId is required", field="contactId")
    message = await services.db.write(store.send_test_in_tx, account_id, campaign_id, contact_id, by)
    if services.delivery is not None:
        services.delivery.notify()
    return {"messageId": message["id"], "contactId": message["contact_id"], "body": message["body"]}


async def get_campaign(db: Store, account_id: str, campaign_id: str) -> JSONObject:
    campaign = await store.get_campaign(db, account_id, campaign_id)
    if campaign is None:
        raise store.campaign_not_found(campaign_id)
    return public_campaign(campaign)


async def list_campaigns(db: Store, account_id: str, *, limit: str | None = None,
                         cursor: str | None = None) -> JSONObject:
    return await lists.keyset_page(lambda after, n: store.page_campaigns(db, account_id, after, n), limit, cursor,
                                   public_campaign)


async def recent_campaigns(db: Store, account_id: str, *, before: str | None = None, limit: int = 50) -> JSONObject:
    """{items, next_before}: the account's campaigns newest first (the UI's Campaigns page), each as the API
    shows it plus listName."""
    rows = await store.page_campaigns_newest(db, account_id, before or None, limit + 1)
    items = [{**public_campaign(row), "listName": row["list_name"]} for row in rows[:limit]]
    return {"items": items, "next_before": items[-1]["id"] if len(rows) > limit else None}


# What a person may do in each status, and the count that must be above 0 for it (None: none needed); the
# state changes in storage/campaigns.py refuse anything else with 409. The UI shows only these buttons.
ACTION_RULES: dict[str, dict[str, tuple[str, ...] | None]] = {
    "pause": {"running": None},
    "resume": {"paused": None},
    "cancel": {"draft": None, "scheduled": None, "running": None, "paused": None,
               "completed": ("queued", "retrying")},
    "retry-failed": {"running": ("failed",), "completed": ("failed",)},
}


def allowed_actions(campaign: Mapping[str, Any]) -> list[str]:
    """The actions (ACTION_RULES' names) a campaign, as public_campaign shows it, allows now."""
    allowed = []
    for action, rule in ACTION_RULES.items():
        if campaign["status"] in rule:
            needs = rule[campaign["status"]]
            if needs is None or any(campaign["counts"][count] > 0 for count in needs):
                allowed.append(action)
    return allowed


async def pause(db: Store, account_id: str, campaign_id: str) -> JSONObject:
    return public_campaign(await store.pause(db, account_id, campaign_id, "paused by a person"))


async def resume(db: Store, account_id: str, campaign_id: str) -> JSONObject:
    return public_campaign(await store.resume(db, account_id, campaign_id, now_iso()))


async def cancel(db: Store, account_id: str, campaign_id: str, by: Mapping[str, Any] | None = None) -> JSONObject:
    """Cancelled at once; a large campaign's recipients are dropped by the runner's batches after the first
    (pendingAction "cancel" until then: storage/campaign_actions.py)."""
    return public_campaign(await campaign_actions.cancel(db, account_id, campaign_id, now_iso(),
                                                         campaign_actions.BATCH, by))


async def retry_failed(db: Store, account_id: str, campaign_id: str) -> JSONObject:
    """The final failures whose delivery still exists are queued again (the runner's batches after the first:
    pendingAction "retry" until then); the answer's retry says how many ({requeued, notRetryable}: the
    others' deliveries were removed by retention, and they stay failed). Conflict when none can be."""
    campaign = await store.get_campaign(db, account_id, campaign_id)
    # no campaign: retry_failed below answers CAMPAIGN_NOT_FOUND
    counts = await campaign_actions.retryable(db, account_id, campaign_id) if campaign else \
        {"retryable": 0, "notRetryable": 0}
    if counts and counts["notRetryable"] and not counts["retryable"]:
        raise Conflict(f"none of the {counts['notRetryable']} failed recipients of campaign {campaign_id} can be "
                       "retried: their deliveries were removed by retention (--retention-webhook-days)",
                       code="CONFLICT")
    retried = public_campaign(await campaign_actions.retry_failed(db, account_id, campaign_id, now_iso(),
                                                                       campaign_actions.BATCH))
    return {**retried, "retry": {"requeued": counts["retryable"], "notRetryable": counts["notRetryable"]}}


ACTIONS: dict[str, Callable[[Store, str, str], Awaitable[JSONObject]]] = {
    "pause": pause, "resume": resume, "cancel": cancel, "retry-failed": retry_failed}


async def act(services: Services, account_id: str, campaign_id: str, action: str,
              by: Mapping[str, Any] | None = None) -> JSONObject:
    """One of ACTIONS (the API's POST /v1/campaigns/{id}/<action>, the UI's buttons): the campaign after it.
    A resumed campaign wakes the runner, retried messages the delivery worker. A cancel is audited by ``by``."""
    campaign = await (cancel(services.db, account_id, campaign_id, by) if action == "cancel"
                      else ACTIONS[action](services.db, account_id, campaign_id))
    if action == "resume" or campaign["pendingAction"]:
        services.campaigns.notify()  # resumed, or batches of a cancel or retry left for the runner
    if action == "retry-failed":
        services.delivery.notify()
    return campaign


def _status_filter(status: str | None) -> str | None:
    if status and status not in RECIPIENT_STATUSES:
        raise Invalid(f"status must be one of {', '.join(RECIPIENT_STATUSES)}")
    return status or None


def public_recipient(row: Mapping[str, Any]) -> JSONObject:
    return {"contactId": row["id"], "messageId": row["message_id"], "status": row["status"], "error": row["error"],
            "firstName": row["first_name"], "lastName": row["last_name"], "phone": row["phone"],
            "email": row["email"]}


async def list_recipients(db: Store, account_id: str, campaign_id: str, *, status: str | None = None,
                          limit: str | None = None, cursor: str | None = None) -> JSONObject:
    """GET /v1/campaigns/{id}/recipients?status=: {data: [...], nextCursor}, in contact-id order."""
    wanted = _status_filter(status)
    await get_campaign(db, account_id, campaign_id)
    return await lists.keyset_page(
        lambda after, n: store.page_recipients(db, account_id, campaign_id, wanted, after, n), limit, cursor,
        public_recipient)


async def recipients_csv(db: Store, account_id: str, campaign_id: str, *, status: str | None = None,
                         page_size: int = 2000) -> AsyncIterator[str]:
    """The recipients as CSV, yielded a page at a time (a 100k-recipient export never sits in memory)."""
    wanted = _status_filter(status)
    await get_campaign(db, account_id, campaign_id)

    def cells(row: Mapping[str, Any]) -> tuple[object, ...]:
        error = row["error"] or {}
        return (row["id"], row["first_name"], row["last_name"], row["phone"], row["email"], row["message_id"],
                row["status"], error.get("httpStatus"), error.get("error"), error.get("at"))
    async for chunk in csv_pages(CSV_COLUMNS, lambda after, n: store.page_recipients(
            db, account_id, campaign_id, wanted, after, n), cells, page_size):
        yield chunk
