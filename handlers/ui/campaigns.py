"""Campaigns pages: the account's campaigns (newest first) with the create form, which makes a draft, a
campaign's page (a draft's or scheduled one's preview, test send, "Send to N contacts?" and schedule; status,
counts, progress, its recipients, the CSV export) and its actions. The API's services and request model do the
work; counts and statuses move live from campaign.progress events (static/campaigns.js), and the fragments
below are what that script fetches when more than the counts changed."""
from datetime import datetime, timezone

import pydantic
from tornado.web import authenticated

from common.errors import Conflict, DomainError, IdempotencyKeyReused, Invalid
from common.ids import new_id
from common.validation import validation_message
from handlers.ui_base import UiHandler
from handlers.campaigns import send_recipients_csv
from handlers.campaign_schemas import CampaignCreate, CampaignStart
from services import campaigns, contacts, idempotency, inbox, lists

PAGE_SIZE = 50
STATUS_LABELS = {"draft": "Draft", "scheduled": "Scheduled", "running": "Sending", "paused": "Paused", "completed": "Completed",
                 "cancelled": "Cancelled"}
ACTION_LABELS = {"pause": "Pause", "resume": "Resume", "cancel": "Cancel campaign", "retry-failed": "Retry failed"}
DRAFT_ACTION_LABELS = {**ACTION_LABELS, "cancel": "Discard draft"}
ACTION_DONE = {"pause": "Campaign paused: its queued messages are held.", "resume": "Campaign resumed.",
               "cancel": "Campaign cancelled: nothing more is sent; sent messages stay sent.",
               "retry-failed": "The failed recipients' messages are being sent again."}
# The create form makes a draft: its page previews, tests, then sends or schedules it (POST /v1/campaigns's
# draft: true); the start time is chosen there.
FORM_FIELDS = ("name", "audience", "listId", "tag", "body", "campaignId", "channel", "ratePerMinute")
# Errors raised by code rather than by a field's check, and the form field they belong to.
FIELD_OF_CODE = {"LIST_NOT_FOUND": "listId"}


def new_form(lists_shown):
    """An empty create form; its Idempotency-Key is made now, so that the same form sent twice (a double click,
    a browser resend) creates one campaign."""
    return {"name": "", "audience": "list", "listId": lists_shown[0]["id"] if len(lists_shown) == 1 else "",
            "tag": "", "body": "",
            "campaignId": "", "channel": "", "ratePerMinute": str(campaigns.DEFAULT_RATE_PER_MINUTE),
            "idempotencyKey": new_id("uicmp")}


def _start_at(form):
    """startAt as the API takes it: the page's script sends the local time typed as UTC (startAtUtc); without
    the script, the typed time is read as UTC. Text that is no time goes on as typed (the model names it)."""
    if form.get("startAtUtc", "").strip():
        return form["startAtUtc"].strip()
    typed = form.get("startAt", "").strip()
    if not typed:
        return None
    try:
        when = datetime.fromisoformat(typed)
    except ValueError:
        return typed
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).isoformat()


def request_body(form):
    """The form as POST /v1/campaigns's body, a draft, validated by the API's own model (CampaignCreate): Invalid
    naming the field (DomainError.field) as the API words it. Empty optional fields are left out. The audience
    choice sends the list or the tag, not both."""
    audience = "tag" if form.get("audience") == "tag" else "listId"
    body = {name: form[name] for name in ("name", audience, "body")}
    for name in ("campaignId", "channel", "ratePerMinute"):
        if form[name].strip():
            body[name] = form[name].strip()
    return _validated(CampaignCreate, {**body, "draft": True})


def _validated(model, body):
    try:
        return model.model_validate(body)
    except pydantic.ValidationError as exc:
        loc = exc.errors()[0]["loc"]
        raise Invalid(validation_message(exc), field=str(loc[0]) if loc else None) from None


class CampaignsPage(UiHandler):
    role = "admin"

    async def campaigns_page(self):
        return await campaigns.recent_campaigns(self.services.db, self.account_id,
                                                before=self.get_query_argument("before", None), limit=PAGE_SIZE)

    async def render_list(self, status=200, form=None, error=None):
        event_id = await inbox.current_event_id(self.services, self.account_id)  # first: events after it may already show
        choices = (await lists.list_lists(self.services.db, self.account_id, limit=str(lists.MAX_LIMIT)))["data"]
        self.render("campaigns.html", status=status, event_id=event_id, page=await self.campaigns_page(),
                    lists=choices, form=form or new_form(choices), error=error, status_labels=STATUS_LABELS,
                    placeholders=list(campaigns.FIELDS), paged=bool(self.get_query_argument("before", None)),
                    max_rate=campaigns.MAX_RATE_PER_MINUTE)


class CampaignsHandler(CampaignsPage):
    """GET /campaigns?before=: the campaigns and the create form; POST /campaigns: create one."""

    @authenticated
    async def get(self):
        await self.render_list()

    @authenticated
    async def post(self):
        form = {name: self.get_body_argument(name, "") for name in (*FORM_FIELDS, "startAtUtc", "idempotencyKey")}
        try:
            created, replayed = await self.create(request_body(form), form["idempotencyKey"].strip() or None)
        except IdempotencyKeyReused:
            form["idempotencyKey"] = new_id("uicmp")
            await self.render_list(422, form, {"field": None, "message": "This form already created a campaign with "
                                                                         "other fields; nothing was created. Check "
                                                                         "the fields and send it again."})
            return
        except DomainError as exc:
            await self.render_list(exc.status, form, {"field": exc.field or FIELD_OF_CODE.get(exc.code),
                                                      "message": exc.message})
            return
        self.services.campaigns.notify()
        if replayed:
            message = "This campaign was already created (the form was sent twice); nothing more was created."
        else:
            message = "Draft saved: nothing is sent yet. Check the preview, send a test, then send or schedule it."
        self.action_done(f"/campaigns/{created['id']}", message)

    async def create(self, body, key):
        """(campaign, replayed) through the same service as POST /v1/campaigns, under the form's key."""
        async def fingerprint():
            return idempotency.fingerprint({"endpoint": "ui:campaigns", "body": body.model_dump(mode="json")})
        with idempotency.covering(self.account_id, key, fingerprint) as claim:
            created = await campaigns.create_campaign(
                self.services.db, self.account_id, name=body.name, list_id=body.listId, tag=body.tag, body=body.body,
                campaign_id=body.campaignId, channel=body.channel, rate_per_minute=body.ratePerMinute,
                draft=body.draft, by=self.actor)
        return created, bool(claim and claim.replayed)


class CampaignRowsHandler(CampaignsPage):
    """GET /campaigns/rows: the first page of the list alone, for the list page's live refresh."""
    live_fragment = True

    @authenticated
    async def get(self):
        self.render("_campaign_rows.html", page=await self.campaigns_page(), status_labels=STATUS_LABELS)


class CampaignPage(UiHandler):
    role = "admin"

    def status_filter(self):
        return self.get_query_argument("status", "")

    async def recipients(self, campaign_id):
        return await campaigns.list_recipients(self.services.db, self.account_id, campaign_id,
                                               status=self.status_filter() or None, limit=str(PAGE_SIZE),
                                               cursor=self.get_query_argument("cursor", None))

    async def summary(self, campaign_id):
        """What the campaign's summary shows: the campaign, its list (None for a tag campaign) and the actions its
        status allows."""
        campaign = await campaigns.get_campaign(self.services.db, self.account_id, campaign_id)
        lst = await lists.get_list(self.services.db, self.account_id, campaign["listId"]) if campaign["listId"] else None
        return {"c": campaign, "list": lst, "actions": campaigns.allowed_actions(campaign),
                "action_labels": DRAFT_ACTION_LABELS if campaign["status"] == "draft" else ACTION_LABELS,
                "status_labels": STATUS_LABELS}


class CampaignHandler(CampaignPage):
    """GET /campaigns/{id}?status=&cursor=: the campaign, its progress, its recipients and its actions."""

    @authenticated
    async def get(self, campaign_id):
        event_id = await inbox.current_event_id(self.services, self.account_id)
        summary = await self.summary(campaign_id)
        preview = None
        if summary["c"]["status"] in BEFORE_SENDING:
            preview = await campaigns.preview(self.services.db, self.account_id, campaign_id,
                                              self.get_query_argument("contactId", None) or None)
        self.render("campaign.html", event_id=event_id, recipients=await self.recipients(campaign_id),
                    statuses=campaigns.RECIPIENT_STATUSES, filter_status=self.status_filter(),
                    cursor=self.get_query_argument("cursor", ""), preview=preview, **summary)


class CampaignSummaryHandler(CampaignPage):
    """GET /campaigns/{id}/summary: the status, counts, facts and buttons alone (live refresh)."""
    live_fragment = True

    @authenticated
    async def get(self, campaign_id):
        self.render("_campaign_summary.html", **await self.summary(campaign_id))


class CampaignRecipientsHandler(CampaignPage):
    """GET /campaigns/{id}/recipients?status=&cursor=: the recipients table alone (live refresh)."""
    live_fragment = True

    @authenticated
    async def get(self, campaign_id):
        campaign = await campaigns.get_campaign(self.services.db, self.account_id, campaign_id)  # paused or not
        self.render("_recipients.html", c=campaign, recipients=await self.recipients(campaign_id),
                    filter_status=self.status_filter())


class CampaignRecipientsCsvHandler(UiHandler):
    """GET /campaigns/{id}/recipients.csv?status=: the API's CSV export, for the signed-in user."""
    role = "admin"

    @authenticated
    async def get(self, campaign_id):
        await send_recipients_csv(self, self.account_id, campaign_id)


BEFORE_SENDING = ("draft", "scheduled")  # the statuses whose page previews, tests, sends and schedules


class CampaignStartHandler(UiHandler):
    """POST /campaigns/{id}/start (startAt, startAtUtc: empty to send now): the page's "Send to N contacts"
    (which asks first) and "Schedule", through POST /v1/campaigns/{id}/start's model and service."""
    role = "admin"

    @authenticated
    async def post(self, campaign_id):
        form = {name: self.get_body_argument(name, "") for name in ("startAt", "startAtUtc")}
        start_at = _start_at(form)
        try:
            body = _validated(CampaignStart, {"startAt": start_at} if start_at else {})
            started = await campaigns.start_campaign(self.services, self.account_id, campaign_id,
                                                     start_at=body.startAt, by=self.actor)
        except (Invalid, Conflict) as exc:
            self.flash("error", exc.message)
            self.redirect(f"/campaigns/{campaign_id}", status=303)
            return
        if started["status"] == "scheduled":
            message = "Campaign scheduled: it starts at the time shown; until then it can be sent now or cancelled."
        else:
            message = f"Sending to {started['counts']['total']} contacts."
        self.action_done(f"/campaigns/{campaign_id}", message)


class CampaignTestHandler(UiHandler):
    """POST /campaigns/{id}/test (contact: a phone, email or id): one test message, through POST
    /v1/campaigns/{id}/test's service."""
    role = "admin"

    @authenticated
    async def post(self, campaign_id):
        await campaigns.get_campaign(self.services.db, self.account_id, campaign_id)  # 404 page when not ours
        text = self.get_body_argument("contact", "")
        try:
            contact_id = await contacts.resolve_contact_id(self.services.db, self.account_id, text)
            sent = await campaigns.send_test(self.services, self.account_id, campaign_id, contact_id, by=self.actor)
        except DomainError as exc:
            self.flash("error", f"No test sent: {exc.message}")
            self.redirect(f"/campaigns/{campaign_id}", status=303)
            return
        contact = await contacts.get_contact_row(self.services.db, self.account_id, contact_id)
        self.action_done(f"/campaigns/{campaign_id}?contactId={contact_id}",
                         f"Test sent to {contact['name']}: \u201c{sent['body']}\u201d. The campaign has not started.")


class CampaignActionHandler(UiHandler):
    """POST /campaigns/{id}/(pause|resume|cancel|retry-failed): through the same service as the API's actions;
    one the status does not allow (the page was behind) comes back as a message."""
    role = "admin"

    @authenticated
    async def post(self, campaign_id, action):
        try:
            result = await campaigns.act(self.services, self.account_id, campaign_id, action, by=self.actor)
        except Conflict as exc:
            self.flash("error", exc.message)
            self.redirect(f"/campaigns/{campaign_id}", status=303)
            return
        self.action_done(f"/campaigns/{campaign_id}", action_message(action, result))


def action_message(action, result):
    """What the page says after an action: retry-failed says how many it queued again and how many it could
    not (their deliveries were removed by retention)."""
    retry = result.get("retry")
    if action == "cancel" and result["startedAt"] is None:
        return "Cancelled before it started: nothing was sent."
    if action != "retry-failed" or not retry:
        return ACTION_DONE[action]
    text = f"{retry['requeued']} failed recipients' messages are being sent again."
    if retry["notRetryable"]:
        text += (f" {retry['notRetryable']} cannot be: their deliveries were removed by retention; they stay "
                 "failed.")
    return text
