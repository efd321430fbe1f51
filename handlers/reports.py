"""GET /v1/reports/{name}: the Reports page's numbers as JSON (the page and its CSV exports: handlers/ui/reports.py)."""
from handlers.base import ApiHandler
from handlers.openapi import Operation
from handlers.report_schemas import Report, ReportQuery
from services import reports

NAMES = "|".join(reports.REPORTS)


class ReportHandler(ApiHandler):
    path_params = {"name": "messages, first-response, bot-outcomes, deliveries, campaigns, opt-outs, sla-days or "
                           "sla-agents."}
    operations = {"get": Operation(
        "A report's numbers for a range of days", {200: Report}, query=ReportQuery, tags=("reports",),
        errors={400: "Invalid from, to or scope (the message names it), from after to, or a range over "
                     f"{reports.MAX_DAYS} days.",
                404: "No such report (NOT_FOUND): the name is none of those above."},
        description="The same numbers as the Reports page and its CSV exports, for the key's account or (scope="
                    "subaccounts, an agency's key) the sum over the agency's sub-accounts.")}

    async def get(self, name):
        principal = self.principal
        first, last = reports.parse_range(self.get_query_argument("from", None), self.get_query_argument("to", None))
        ids = await reports.account_ids(self.services.db, principal.account_id, principal.type,
                                        self.get_query_argument("scope", None))
        self.respond(await reports.build(self.services.db, ids, name, first, last))
