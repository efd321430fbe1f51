"""Canned replies API: GET/POST /v1/canned-replies, GET/PATCH/DELETE /v1/canned-replies/{id}."""
from handlers.base import ApiHandler, idempotent
from handlers.openapi import Operation
from handlers.schemas_canned_notes import CannedReply, CannedReplyCreate, CannedReplyList, CannedReplyPatch, Deleted
from services import canned_replies

NOT_FOUND = "No such canned reply (NOT_FOUND)."
TAKEN = "The account has a canned reply with this code, compared without case (CONFLICT; error.existingId is its id)."
TAGS = ("canned replies",)


class CannedRepliesHandler(ApiHandler):
    role = "agent"
    operations = {
        "post": Operation("Create a canned reply", {201: (CannedReply, "Created.")}, body=CannedReplyCreate,
                          errors={409: TAKEN}, tags=TAGS, links={
                              "GetCannedReply": ("/v1/canned-replies/{cannedReplyId}", "get",
                                                 {"cannedReplyId": "$response.body#/id"})}),
        "get": Operation("The account's canned replies", {200: CannedReplyList}, tags=TAGS),
    }

    @idempotent
    async def post(self):
        body = self.json_body(CannedReplyCreate)
        self.respond(await canned_replies.create(self.services.db, self.principal.account_id, code=body.code,
                                                 body=body.body, by=self.actor), 201)

    async def get(self):
        self.respond(await canned_replies.list_all(self.services.db, self.principal.account_id))


class CannedReplyHandler(ApiHandler):
    role = "agent"
    path_params = {"cannedReplyId": "The canned reply's id."}
    operations = {
        "get": Operation("A canned reply by id", {200: CannedReply}, errors={404: NOT_FOUND}, tags=TAGS),
        "patch": Operation("Change a canned reply's code or body", {200: (CannedReply, "The changed reply.")},
                           body=CannedReplyPatch, errors={404: NOT_FOUND, 409: TAKEN}, tags=TAGS),
        "delete": Operation("Delete a canned reply", {200: Deleted}, errors={404: NOT_FOUND}, tags=TAGS),
    }

    async def get(self, reply_id):
        self.respond(await canned_replies.get(self.services.db, self.principal.account_id, reply_id))

    @idempotent
    async def patch(self, reply_id):
        body = self.json_body(CannedReplyPatch)
        self.respond(await canned_replies.update(self.services.db, self.principal.account_id, reply_id,
                                                 code=body.code, body=body.body, by=self.actor))

    @idempotent
    async def delete(self, reply_id):
        self.respond(await canned_replies.delete(self.services.db, self.principal.account_id, reply_id,
                                                 by=self.actor))
