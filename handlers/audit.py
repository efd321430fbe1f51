"""Audit API: GET /v1/audit, the account's audit list newest first (issue 21)."""
from handlers.base import ApiHandler
from handlers.openapi import Operation
from handlers.schemas import PageQuery
from handlers.team_schemas import AuditPage
from services import audit


class AuditHandler(ApiHandler):
    operations = {"get": Operation(
        "The account's audit list, newest first", {200: AuditPage}, query=PageQuery, tags=("audit",),
        description="Who changed settings, API keys, the webhook secret, users, credit grants, and who erased "
                    "a contact: one entry each, written in the change's own transaction.",
        errors={400: "Invalid limit or cursor."})}

    async def get(self):
        self.respond(await audit.list_audit(self.services.db, self.principal.account_id,
                                            limit=self.get_query_argument("limit", None),
                                            cursor=self.get_query_argument("cursor", None)))
