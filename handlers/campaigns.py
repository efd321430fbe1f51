"""Campaigns API: POST/GET /v1/campaigns, GET /v1/campaigns/{id}, a draft's preview, test and start, its
pause/resume/cancel/retry-failed actions, and its recipients (JSON pages, or the whole list as CSV)."""
from handlers.base import ApiHandler, idempotent, send_csv
from handlers.openapi import CSV, Operation
from handlers.campaign_schemas import (Campaign, CampaignAction, CampaignCreate, CampaignPage, CampaignPreview,
                                      CampaignPreviewRequest, CampaignStart, CampaignTestRequest, CampaignTestSent,
                                      RecipientCsvQuery, RecipientPage, RecipientQuery)
from handlers.schemas import PageQuery
from services import campaigns

_NOT_FOUND = {404: "No such campaign (NOT_FOUND)."}
_LINKS = {"GetCampaign": ("/v1/campaigns/{campaignId}", "get", {"campaignId": "$response.body#/id"}),
          "GetRecipients": ("/v1/campaigns/{campaignId}/recipients", "get", {"campaignId": "$response.body#/id"})}


class CampaignsHandler(ApiHandler):
    operations = {
        "post": Operation("Create a campaign", {201: (Campaign, "Created: running (its recipients snapshotted), "
                                                                "scheduled for startAt, or a draft (draft: true).")},
                          body=CampaignCreate, links=_LINKS, tags=("campaigns",),
                          errors={400: "Invalid field (the message names it), both or neither of listId and tag, "
                                       "an unknown placeholder, or no Custom Channel Webhook URL configured.",
                                  404: "No such list (LIST_NOT_FOUND)."}),
        "get": Operation("The account's campaigns, oldest first", {200: CampaignPage}, query=PageQuery,
                         tags=("campaigns",), errors={400: "Invalid limit or cursor."}),
    }

    @idempotent
    async def post(self):
        body = self.json_body(CampaignCreate)
        self.respond(await campaigns.create_campaign(
            self.services.db, self.principal.account_id, name=body.name, list_id=body.listId, tag=body.tag,
            body=body.body, campaign_id=body.campaignId, channel=body.channel, start_at=body.startAt,
            rate_per_minute=body.ratePerMinute, draft=body.draft, by=self.actor), 201)
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


class CampaignStartHandler(ApiHandler):
    """POST /v1/campaigns/{id}/start {startAt?}."""
    path_params = {"campaignId": "The campaign's id."}
    operations = {"post": Operation(
        "Start a draft now or schedule it", {200: (Campaign, "The campaign after it: running (its recipients "
                                                             "snapshotted now) or scheduled.")},
        body=CampaignStart, body_optional=True, tags=("campaigns",),
        errors={**_NOT_FOUND, 400: "startAt not in the future, or no Custom Channel Webhook URL configured.",
                409: "Not a draft or scheduled campaign (CONFLICT)."},
        description="A draft (or a scheduled campaign, earlier or at another time) starts now, or at startAt. With "
                    "an Idempotency-Key a retry gets the first answer again.")}

    @idempotent
    async def post(self, campaign_id):
        body = self.json_body(CampaignStart, optional=True)
        self.respond(await campaigns.start_campaign(self.services, self.principal.account_id, campaign_id,
                                                    start_at=body.startAt, by=self.actor))


class CampaignPreviewHandler(ApiHandler):
    """POST /v1/campaigns/{id}/preview {contactId?}."""
    path_params = {"campaignId": "The campaign's id."}
    operations = {"post": Operation(
        "The body filled for a contact, and whom the campaign would send to", {200: CampaignPreview},
        body=CampaignPreviewRequest, body_optional=True, tags=("campaigns",),
        errors={404: "No such campaign (NOT_FOUND) or contact (CONTACT_NOT_FOUND)."},
        description="Sends and changes nothing. Without contactId the body is filled for the list's first "
                    "contact.")}

    async def post(self, campaign_id):
        body = self.json_body(CampaignPreviewRequest, optional=True)
        self.respond(await campaigns.preview(self.services.db, self.principal.account_id, campaign_id,
                                             body.contactId))


class CampaignTestHandler(ApiHandler):
    """POST /v1/campaigns/{id}/test {contactId}."""
    path_params = {"campaignId": "The campaign's id."}
    operations = {"post": Operation(
        "Send one test message to one contact", {200: CampaignTestSent}, body=CampaignTestRequest,
        tags=("campaigns",),
        errors={400: "The contact opted out, or no Custom Channel Webhook URL configured.",
                404: "No such campaign (NOT_FOUND) or contact (CONTACT_NOT_FOUND)."},
        description="One real message, filled for the contact and delivered like the campaign's (its campaignId "
                    "and channel), to the Custom Channel Webhook. The campaign does not start and its counts do "
                    "not move.")}

    @idempotent
    async def post(self, campaign_id):
        body = self.json_body(CampaignTestRequest)
        self.respond(await campaigns.send_test(self.services, self.principal.account_id, campaign_id,
                                               body.contactId, by=self.actor))


class CampaignActionHandler(ApiHandler):
    """POST /v1/campaigns/{id}/(pause|resume|cancel|retry-failed)."""
    path_params = {"campaignId": "The campaign's id.", "action": "pause, resume, cancel or retry-failed."}
    operations = {"post": Operation(
        "Pause, resume, cancel a campaign or retry its failed recipients",
        {200: (CampaignAction, "The campaign after it.")},
        tags=("campaigns",), errors={**_NOT_FOUND, 409: "Not allowed in the campaign's status (CONFLICT)."},
        description="pause: running -> paused (queued messages are held). resume: paused -> running. cancel: "
                    "-> cancelled (a draft or scheduled one sends nothing; pending recipients and queued messages are dropped, scheduled retries stop; sent "
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
    await send_csv(handler, campaigns.recipients_csv(handler.services.db, account_id, campaign_id,
                                                     status=handler.get_query_argument("status", None)),
                   f"{campaign_id}-recipients.csv")
