"""The Reports page (issue 22 §2): every report's chart (SVG drawn by services/report_charts.py) and data for a
range of days, and each report as CSV. An agency also sees the roll-up over its sub-accounts (?scope=subaccounts)."""
from markupsafe import Markup
from tornado.web import authenticated

from common.errors import Invalid
from handlers.ui_base import UiHandler
from services import report_charts, reports


class ReportsUiPage(UiHandler):
    role = "admin"

    def scope(self):
        return self.get_query_argument("scope", None) or "account"

    async def account_ids(self):
        return await reports.account_ids(self.services.db, self.account_id, self.current_user.get("account_type"),
                                         self.scope())


class ReportsHandler(ReportsUiPage):
    @authenticated
    async def get(self):
        error, status = None, 200
        try:
            first, last = reports.parse_range(self.get_query_argument("from", None), self.get_query_argument("to", None))
        except Invalid as exc:  # the page with the default range and the message, 400
            error, status = str(exc), 400
            first, last = reports.parse_range(None, None)
        built = await reports.build_all(self.services.db, await self.account_ids(), first, last)
        sections = [{"report": r, "chart": Markup(report_charts.chart(r) or ""),
                     "rows": Markup(report_charts.data_rows(r)), "figure": _people_figure(r)} for r in built]
        self.render("reports.html", status=status, sections=sections, first=first.isoformat(), last=last.isoformat(),
                    presets=reports.preset_ranges(), scope=self.scope(),
                    is_agency=self.current_user.get("account_type") == "agency",
                    flashes=[{"kind": "error", "text": error}] if error else [])


class ReportCsvHandler(ReportsUiPage):
    @authenticated
    async def get(self, name):
        first, last = reports.parse_range(self.get_query_argument("from", None), self.get_query_argument("to", None))
        report = await reports.build(self.services.db, await self.account_ids(), name, first, last)
        self.set_header("Content-Type", "text/csv; charset=UTF-8")
        self.set_header("Content-Disposition", f'attachment; filename="{name}-{report["from"]}-{report["to"]}.csv"')
        self.finish(reports.csv_text(report))


def _people_figure(report):
    """First response: a person's, as a figure of its own (the bot's handoff message is no answer from a person):
    {median, p90, responses} as the page shows them, or None for the other reports."""
    if report["report"] != "first-response":
        return None
    row = next((r for r in report["rows"] if r["responder"] == reports.PEOPLE), None)
    return row and {"median": report_charts.duration(row["medianSeconds"]),
                    "p90": report_charts.duration(row["p90Seconds"]), "responses": row["responses"]}
