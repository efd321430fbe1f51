"""Campaigns API: POST/GET /v1/campaigns, GET /v1/campaigns/{id}, its pause/resume/cancel/retry-failed
actions, and its recipients (JSON pages, or the whole list as CSV)."""
from handlers.base import ApiHandler, idempotent
from handlers.openapi import CSV, Operation
from handlers.campaign_schemas import (Campaign, CampaignAction, CampaignCreate, CampaignPage, RecipientCsvQuery,
                                      RecipientPage, RecipientQuery)
from handlers.schemas import PageQuery
from services import campaigns

_NOT_FOUND = {404: "No such campaign (NOT_FOUND)."}
_LINKS = {"GetCampaign": ("/v1/campaigns/{campaignId}", "get", {"campaignId": "$response.body#/id"}),
          "GetRecipients": ("/v1/campaigns/{campaignId}/recipients", "get", {"campaignId": "$response.body#/id"})}


class CampaignsHandler(ApiHandler):
    operations = {
        "post": Operation("Create a campaign", {201: (Campaign, "Created: running (its recipients snapshotted), "
                                                                "or scheduled for startAt.")},
                          body=CampaignCreate, links=_LINKS, tags=("campaigns",),
                          errors={400: "Invalid field (the message names it), an unknown placeholder, or no "
                                       "Custom Channel Webhook URL configured.",
                                  404: "No such list (LIST_NOT_FOUND)."}),
        "get": Operation("The account's campaigns, oldest first", {200: CampaignPage}, query=PageQuery,
                         tags=("campaigns",), errors={400: "Invalid limit or cursor."}),
    }

    @idempotent
    async def post(self):
        body = self.json_body(CampaignCreate)
        self.respond(await campaigns.create_campaign(
            self.services.db, self.principal.account_id, name=body.name, list_id=body.listId, body=body.body,
            campaign_id=body.campaignId, channel=body.channel, start_at=body.startAt,
            rate_per_minute=body.ratePerMinute, by=self.actor), 201)
        self.services.campaigns.notify()

    async def get(self):
        self.respond(await campaigns.list_campaigns(self.services.db, self.principal.account_id,
                                                    limit=self.get_query_argument("limit", None),
                                                    cursor=self.get_query_argument("cursor", None)))


class CampaignHandler(ApiHandler):
    path_params = {"campaignId": "The campaign's id."}
    operations = {"get": Operation("A campaign with its counts", {200: Campaign}, tags=("campaigns",),
                                   errors=_NOT_FOUND)}

    async def get(self, campaign_id):
        self.respond(await campaigns.get_campaign(self.services.db, self.principal.account_id, campaign_id))


class CampaignActionHandler(ApiHandler):
    """POST /v1/campaigns/{id}/(pause|resume|cancel|retry-failed)."""
    path_params = {"campaignId": "The campaign's id.", "action": "pause, resume, cancel or retry-failed."}
    operations = {"post": Operation(
        "Pause, resume, cancel a campaign or retry its failed recipients",
        {200: (CampaignAction, "The campaign after it.")},
        tags=("campaigns",), errors={**_NOT_FOUND, 409: "Not allowed in the campaign's status (CONFLICT)."},
        description="pause: running -> paused (queued messages are held). resume: paused -> running. cancel: "
                    "-> cancelled (pending recipients and queued messages are dropped, scheduled retries stop; sent "
                    "ones stay). retry-failed: the failed recipients' messages are sent again at the campaign's "
                    "rate, those whose delivery retention removed excepted (retry.notRetryable). A large "
                    "campaign's cancel or retry finishes in batches after the answer (pendingAction).")}

    @idempotent
    async def post(self, campaign_id, action):
        self.respond(await campaigns.act(self.services, self.principal.account_id, campaign_id, action,
                                         by=self.actor))


class RecipientsHandler(ApiHandler):
    path_params = {"campaignId": "The campaign's id."}
    operations = {"get": Operation("A campaign's recipients with their status and error", {200: RecipientPage},
                                   query=RecipientQuery, tags=("campaigns",),
                                   errors={**_NOT_FOUND, 400: "Invalid status, limit or cursor."})}

    async def get(self, campaign_id):
        self.respond(await campaigns.list_recipients(
            self.services.db, self.principal.account_id, campaign_id, status=self.get_query_argument("status", None),
            limit=self.get_query_argument("limit", None), cursor=self.get_query_argument("cursor", None)))


class RecipientsCsvHandler(ApiHandler):
    path_params = {"campaignId": "The campaign's id."}
    operations = {"get": Operation("A campaign's recipients as CSV", {200: (CSV, "contactId, firstName, lastName, "
                                                                               "phone, email, messageId, status, "
                                                                               "httpStatus, error, errorAt")},
                                   query=RecipientCsvQuery, tags=("campaigns",),
                                   errors={**_NOT_FOUND, 400: "Invalid status."},
                                   description="Cells that a spreadsheet would run as a formula (=, +, -, @) "
                                               "start with a quote.")}

    async def get(self, campaign_id):
        await send_recipients_csv(self, self.principal.account_id, campaign_id)


async def send_recipients_csv(handler, account_id, campaign_id):
    """Stream the campaign's recipients (?status=) as CSV: the API's export, and the UI's (session) one."""
    chunks = campaigns.recipients_csv(handler.services.db, account_id, campaign_id,
                                      status=handler.get_query_argument("status", None))
    first = await anext(chunks)  # errors (404, 400) are answered before any CSV is sent
    handler.set_header("Content-Type", "text/csv; charset=UTF-8")
    handler.set_header("Content-Disposition", f'attachment; filename="{campaign_id}-recipients.csv"')
    handler.write(first)
    async for chunk in chunks:
        await handler.flush()
        handler.write(chunk)
    handler.finish()
