"""The Reports (issue 22 §2): each report's rows for an account (or an agency's sub-accounts together) and a
range of days, from the folded summaries plus the rows not folded yet (storage/reports.py). The page, its CSV
exports and GET /v1/reports/{name} all take their numbers from build()."""
from __future__ import annotations

import collections
import csv
import io
from collections.abc import Callable, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

from common.errors import Invalid
from common.spreadsheet import safe_cell
from common.report_buckets import GROUPS, percentile
from common.ids import utcnow
from services import csat, sla
from services.context import JSONObject
from services.users import author_name
from storage import reports as store
from storage.interface import Row, Store

DEFAULT_DAYS = 30
PRESETS = (7, 30, 90)
MAX_DAYS = 366
SCOPES = ("account", "subaccounts")

# name -> (title, columns): the columns are the JSON rows' keys and the CSV's header, in order.
REPORTS = {
    "messages": ("Messages per day", ("day", "inbound", "outbound")),
    "first-response": ("First-response time by responder",
                       ("responder", "name", "responses", "medianSeconds", "p90Seconds")),
    "bot-outcomes": ("Bot outcomes per day", ("day",) + GROUPS),
    "deliveries": ("Webhook deliveries per day", ("day", "attempts", "succeeded", "failed", "retries",
                                                  "retriesSucceeded")),
    "campaigns": ("Campaign results", ("campaignId", "name", "status", "startedAt", "sent", "failed", "retrying",
                                       "optedOut", "replies", "repliers")),
    "opt-outs": ("Opt-outs per day", ("day", "optedOut", "optedIn")),
    "sla-days": ("Within SLA per day", ("day", "waits", "withinSla", "percentWithinSla")),
    "sla-agents": ("Within SLA per agent", ("userId", "name", "waits", "withinSla", "percentWithinSla")),
    "csat-days": ("CSAT per day", ("day", "answers", "satisfied", "percentSatisfied", "averageRating")),
    "csat-agents": ("CSAT per agent", ("userId", "name", "answers", "satisfied", "percentSatisfied", "averageRating")),
}
# Each report's columns in words, as the page's tables head them (the API gives them as "labels").
LABELS = {
    "messages": {"day": "Day", "inbound": "Messages in", "outbound": "Messages out"},
    "first-response": {"responder": "Responder id", "name": "Responder", "responses": "First responses",
                       "medianSeconds": "Median time", "p90Seconds": "9 in 10 within"},
    "bot-outcomes": {"day": "Day", "rule": "Answered by a rule", "provider": "Answered by the model",
                     "handoff": "Handed to a person", "failed": "Failed", "other": "Other"},
    "deliveries": {"day": "Day", "attempts": "Attempts", "succeeded": "Succeeded", "failed": "Failed",
                   "retries": "Retries", "retriesSucceeded": "Retries that succeeded"},
    "campaigns": {"campaignId": "Campaign id", "name": "Campaign", "status": "Status", "startedAt": "Started",
                  "sent": "Sent", "failed": "Failed", "retrying": "Retrying", "optedOut": "Skipped (opted out)",
                  "replies": "Replies", "repliers": "Contacts who replied"},
    "opt-outs": {"day": "Day", "optedOut": "Opted out", "optedIn": "Opted back in"},
    "sla-days": {"day": "Day", "waits": "Answered or breached", "withinSla": "Answered within SLA",
                 "percentWithinSla": "% within SLA"},
    "sla-agents": {"userId": "Agent id", "name": "Agent", "waits": "Answered or breached",
                   "withinSla": "Answered within SLA", "percentWithinSla": "% within SLA"},
    "csat-days": {"day": "Day", "answers": "Answers", "satisfied": "Rated 4 or 5", "percentSatisfied": "CSAT score (%)",
                  "averageRating": "Average rating"},
    "csat-agents": {"userId": "Agent id", "name": "Agent", "answers": "Answers", "satisfied": "Rated 4 or 5",
                    "percentSatisfied": "CSAT score (%)", "averageRating": "Average rating"},
}
# The first-response row of all people together (a person's first response, the bot's messages passed over).
PEOPLE = "people"

def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        return None


def parse_range(from_text: str | None, to_text: str | None, today: date | None = None) -> tuple[date, date]:
    """(first day, last day) of ?from=&to= (YYYY-MM-DD, UTC, both included); to defaults to today and from to
    DEFAULT_DAYS days ending at to. Invalid names the field."""
    today = today or utcnow().date()
    last = today if to_text is None else _day(to_text)
    if last is None:
        raise Invalid("to must be a date as YYYY-MM-DD")
    first = last - timedelta(days=DEFAULT_DAYS - 1) if from_text is None else _day(from_text)
    if first is None:
        raise Invalid("from must be a date as YYYY-MM-DD")
    if first > last:
        raise Invalid("from must not be after to")
    if (last - first).days + 1 > MAX_DAYS:
        raise Invalid(f"from must be at most {MAX_DAYS} days before to")
    return first, last


def preset_ranges(today: date | None = None) -> list[tuple[int, str, str]]:
    """The page's presets: [(days, from, to)] ending today."""
    today = today or utcnow().date()
    return [(n, (today - timedelta(days=n - 1)).isoformat(), today.isoformat()) for n in PRESETS]


async def account_ids(db: Store, principal_account_id: str, account_type: str | None,
                      scope: str | None) -> list[str]:
    """The accounts a report covers: the caller's own, or (scope "subaccounts", agencies only) its sub-accounts."""
    if scope in (None, "account"):
        return [principal_account_id]
    if scope != "subaccounts":
        raise Invalid("scope must be account or subaccounts")
    if account_type != "agency":
        raise Invalid("scope subaccounts is for an agency (the roll-up of its sub-accounts)")
    return await store.account_ids_of_agency(db, principal_account_id)


def _days(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


async def build(db: Store, ids: Sequence[str], name: str, first: date, last: date,
                data: Mapping[str, Any] | None = None) -> JSONObject:
    """One report: {report, title, from, to, columns, rows}; rows are dicts keyed by the columns. data: the
    summaries read once for several reports (build_all)."""
    if name not in REPORTS:
        raise Invalid(f"name must be one of {', '.join(REPORTS)}")
    title, columns = REPORTS[name]
    start, end = first.isoformat() + "T00:00:00.000Z", (last + timedelta(days=1)).isoformat() + "T00:00:00.000Z"
    if name == "opt-outs":
        changes = await store.opt_out_changes(db, ids, start, end)
        rows = [{"day": d, "optedOut": changes[d][0], "optedIn": changes[d][1]} for d in _days(first, last)]
    elif name.startswith("sla-"):
        rows = _sla_rows(name, await sla.report(db, ids, first, last), _days(first, last))
    elif name.startswith("csat-"):
        rows = _csat_rows(name, await csat.report(db, ids, first, last), _days(first, last))
    else:
        data = data or await store.summaries(db, ids, first.isoformat(), last.isoformat())
        if name == "campaigns":
            rows = _campaign_rows(await store.campaigns(db, ids, start, end), data["replies"])
        else:
            rows = _ROWS[name](data, _days(first, last))
    return {"report": name, "title": title, "from": first.isoformat(), "to": last.isoformat(),
            "columns": list(columns), "labels": [LABELS[name][c] for c in columns], "rows": rows}


async def build_all(db: Store, ids: Sequence[str], first: date, last: date) -> list[JSONObject]:
    """Every report, in REPORTS order, from one read of the summaries."""
    data = await store.summaries(db, ids, first.isoformat(), last.isoformat())
    return [await build(db, ids, name, first, last, data) for name in REPORTS]


def csv_text(report: Mapping[str, Any]) -> str:
    """A report's rows as CSV: the columns as header (cells a spreadsheet would run as formulas quoted)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(report["columns"])
    for row in report["rows"]:
        writer.writerow([safe_cell(row[c]) for c in report["columns"]])
    return out.getvalue()


def _message_rows(data: Mapping[str, Any], days: Sequence[str]) -> list[JSONObject]:
    return [{"day": d, "inbound": data["daily"][d]["messages_in"] if d in data["daily"] else 0,
             "outbound": data["daily"][d]["messages_out"] if d in data["daily"] else 0} for d in days]


def _bot_rows(data: Mapping[str, Any], days: Sequence[str]) -> list[JSONObject]:
    return [{"day": d, **{g: data["daily"][d][f"bot_{g}"] if d in data["daily"] else 0 for g in GROUPS}}
            for d in days]


def _delivery_rows(data: Mapping[str, Any], days: Sequence[str]) -> list[JSONObject]:
    rows = []
    for d in days:
        c = data["daily"].get(d) or {}
        attempts, ok = c.get("attempts", 0), c.get("attempts_ok", 0)
        rows.append({"day": d, "attempts": attempts, "succeeded": ok, "failed": attempts - ok,
                     "retries": c.get("retries", 0), "retriesSucceeded": c.get("retries_ok", 0)})
    return rows


def _response_rows(data: Mapping[str, Any], days: Sequence[str]) -> list[JSONObject]:
    """The bot's first responses, then people's: all people together (PEOPLE) and each person by name (a user's
    name, else their email); medians and p90s from the histogram (common/report_buckets.py)."""
    def row(responder: str, name: str, counts: Mapping[int, int]) -> JSONObject:
        return {"responder": responder, "name": name, "responses": sum(counts.values()),
                "medianSeconds": percentile(counts, 0.5), "p90Seconds": percentile(counts, 0.9)}
    people: collections.Counter[int] = collections.Counter()
    rows: list[JSONObject] = []
    for responder, counts in data["responses"].items():
        if responder == "bot":
            continue
        people.update(counts)
        rows.append(row(responder, author_name(*data["users"][responder]) if responder in data["users"]
                        else "a person no longer here", counts))
    rows.sort(key=lambda r: r["name"].lower())
    if people:
        rows.insert(0, row(PEOPLE, "All people", people))
    if "bot" in data["responses"]:
        rows.insert(0, row("bot", "Bot", data["responses"]["bot"]))
    return rows


_ROWS: dict[str, Callable[[Mapping[str, Any], Sequence[str]], list[JSONObject]]] = {
    "messages": _message_rows, "bot-outcomes": _bot_rows, "deliveries": _delivery_rows,
    "first-response": _response_rows}


def _sla_rows(name: str, counted: Mapping[str, Any], days: Sequence[str]) -> list[JSONObject]:
    """The SLA's waits (a contact waiting for a person's answer, services/sla.py) that were answered or breached:
    per day they started (every day of the range), or per agent who answered (or was assigned at the breach)."""
    if name == "sla-days":
        return [{"day": d, "waits": w, "withinSla": m, "percentWithinSla": sla.percent(m, w)}
                for d, (w, m) in ((d, counted["days"].get(d, (0, 0))) for d in days)]
    return sorted(({"userId": user_id, "name": agent, "waits": w, "withinSla": m, "percentWithinSla": sla.percent(m, w)}
                   for user_id, (agent, w, m) in counted["agents"].items()), key=lambda r: r["name"].lower())


def _csat_rows(name: str, counted: Mapping[str, Any], days: Sequence[str]) -> list[JSONObject]:
    """The CSAT answers given (services/csat.py): per day (every day of the range), or per agent who had the
    conversation when it was resolved. The score is the percentage rated 4 or 5."""
    def figures(answers: int, satisfied: int, total: int) -> JSONObject:
        return {"answers": answers, "satisfied": satisfied, "percentSatisfied": csat.score(satisfied, answers),
                "averageRating": round(total / answers, 2) if answers else None}
    if name == "csat-days":
        return [{"day": d, **figures(*counted["days"].get(d, (0, 0, 0)))} for d in days]
    return sorted(({"userId": user_id, "name": agent, **figures(*numbers)}
                   for user_id, (agent, *numbers) in counted["agents"].items()), key=lambda r: r["name"].lower())


def _campaign_rows(campaigns: Sequence[Row], replies: Mapping[str, Sequence[int]]) -> list[JSONObject]:
    """Campaign counts as the campaign row keeps them; optedOut: recipients skipped because they had opted out.
    replies/repliers: the replies to it (all days), and the contacts that sent them."""
    return [{"campaignId": c["id"], "name": c["name"], "status": c["status"], "startedAt": c["started_at"],
             "sent": c["sent"], "failed": c["failed"], "retrying": c["retrying"], "optedOut": c["skipped"],
             "replies": replies.get(c["id"], [0, 0])[1], "repliers": replies.get(c["id"], [0, 0])[0]}
            for c in campaigns]
