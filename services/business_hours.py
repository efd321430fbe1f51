"""Business hours (issue 40): an account's IANA time zone, open intervals per weekday (several a day, in local
wall-clock time), holidays by date (and optionally a country's public holidays from the `holidays` package), and
the message a contact gets when writing while the business is closed: their validation, the API's object and the
Settings page's form. The time arithmetic (whether it is open at a moment, when it next opens, a moment plus N
business minutes) is common/business_hours.py, which the writer's transactions use too. No HTTP, no SQL."""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from common.errors import Invalid
from common.placeholders import placeholder_parts
from common.business_hours import DAYS, KEY, Schedule, country_holidays, iso_or_none, minutes_of
from services.context import JSONObject, Services

MAX_INTERVALS_PER_DAY = 10
MAX_HOLIDAYS = 500
MAX_MESSAGE_CHARS = 1000
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")



def _zone(name: object, field: str = "timezone") -> ZoneInfo:
    if not isinstance(name, str) or not name or name.startswith(("/", ".")) or ".." in name:
        raise Invalid(f"{field} must be an IANA time zone such as Europe/Berlin", field=field)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise Invalid(f"{field}: unknown time zone {name!r} (an IANA name such as Europe/Berlin)", field=field) from None


def validate(body: object) -> JSONObject:
    """PUT /v1/account/business-hours' body as the object to store; Invalid naming the field otherwise (nothing
    is stored then). {timezone, weekly: {mon: [["09:00", "17:00"], ...], ...}, holidays: ["YYYY-MM-DD"],
    holidayCountry: "DE" or null, outsideHoursMessage: text or null}."""
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object")
    unknown = sorted(set(body) - {"timezone", "weekly", "holidays", "holidayCountry", "outsideHoursMessage"})
    if unknown:
        raise Invalid(f"{unknown[0]} is not a business-hours field", field=unknown[0])
    if "timezone" not in body:
        raise Invalid("timezone is required (an IANA time zone such as Europe/Berlin)", field="timezone")
    _zone(body["timezone"])
    weekly = body.get("weekly") or {}
    if not isinstance(weekly, dict):
        raise Invalid("weekly must be an object of days (mon ... sun) to intervals", field="weekly")
    stored_weekly: dict[str, list[list[str]]] = {}
    for day, intervals in weekly.items():
        if day not in DAYS:
            raise Invalid(f"weekly.{day} is not a day: use {', '.join(DAYS)}", field=f"weekly.{day}")
        if not isinstance(intervals, list) or len(intervals) > MAX_INTERVALS_PER_DAY:
            raise Invalid(f"weekly.{day} must be a list of at most {MAX_INTERVALS_PER_DAY} [\"HH:MM\", \"HH:MM\"] "
                          "intervals", field=f"weekly.{day}")
        spans: list[tuple[int, int, int]] = []
        for i, interval in enumerate(intervals):
            field = f"weekly.{day}[{i}]"
            if not isinstance(interval, list) or len(interval) != 2:
                raise Invalid(f"{field} must be [\"HH:MM\", \"HH:MM\"] (opens, closes)", field=field)
            start, end = minutes_of(interval[0], f"{field}[0]"), minutes_of(interval[1], f"{field}[1]")
            if start == 24 * 60:
                raise Invalid(f"{field}[0]: an interval cannot open at 24:00", field=f"{field}[0]")
            if end <= start:
                raise Invalid(f"{field} ends ({interval[1]}) before it starts ({interval[0]})", field=field)
            spans.append((start, end, i))
        spans.sort()
        for (_, end, _), (start, _, i) in zip(spans, spans[1:]):
            if start < end:
                raise Invalid(f"weekly.{day}[{i}] overlaps another interval of {day}", field=f"weekly.{day}[{i}]")
        stored_weekly[day] = [list(interval) for interval in sorted(intervals, key=lambda pair: pair[0])]
    holidays = body.get("holidays") or []
    if not isinstance(holidays, list) or len(holidays) > MAX_HOLIDAYS:
        raise Invalid(f"holidays must be a list of at most {MAX_HOLIDAYS} dates YYYY-MM-DD", field="holidays")
    for i, text in enumerate(holidays):
        try:
            if not isinstance(text, str) or not _DATE.fullmatch(text):
                raise ValueError
            date.fromisoformat(text)
        except ValueError:
            raise Invalid(f"holidays[{i}] is not a date YYYY-MM-DD: {text!r}", field=f"holidays[{i}]") from None
    country = body.get("holidayCountry")
    if country is not None:
        country = _country(country)
    message = body.get("outsideHoursMessage")
    if message is not None:
        if not isinstance(message, str):
            raise Invalid("outsideHoursMessage must be a text or null", field="outsideHoursMessage")
        message = message.strip() or None
        if message and len(message) > MAX_MESSAGE_CHARS:
            raise Invalid(f"outsideHoursMessage is longer than {MAX_MESSAGE_CHARS} characters",
                          field="outsideHoursMessage")
        if message:
            placeholder_parts(message.replace("{{nextOpenAt}}", ""), field="outsideHoursMessage")
    return {"timezone": body["timezone"], "weekly": stored_weekly, "holidays": sorted(set(holidays)),
            "holidayCountry": country, "outsideHoursMessage": message}


def _country(code: object) -> str:
    if not isinstance(code, str) or not re.fullmatch(r"[A-Za-z]{2}", code):
        raise Invalid("holidayCountry must be a country code such as DE (ISO 3166 alpha-2) or null",
                      field="holidayCountry")
    code = code.upper()
    if code not in _supported_countries():
        raise Invalid(f"holidayCountry: no public holidays are known for {code}", field="holidayCountry")
    return code


@functools.cache
def _supported_countries() -> frozenset[str]:
    import holidays  # imported when first needed: ~0.4 s, which accounts without a country never pay
    return frozenset(holidays.list_supported_countries())


def public(config: Mapping[str, Any] | None, now: datetime) -> JSONObject:
    """GET /v1/account/business-hours: the stored object with openNow, closesAt and nextOpenAt at now. An
    account without business hours is always open (and its SLA counts every minute)."""
    if not config:
        return {"timezone": None, "weekly": {}, "holidays": [], "holidayCountry": None, "outsideHoursMessage": None,
                "openNow": True, "closesAt": None, "nextOpenAt": None}
    open_now, closes, opens = Schedule(config).state(now)
    return {**config, "openNow": open_now, "closesAt": iso_or_none(closes), "nextOpenAt": iso_or_none(opens)}


def short_opening(schedule: Schedule, opens: datetime, now: datetime) -> str:
    """The next opening as the chat widget's line says it, in the account's zone: "9:00 (Europe/Berlin)" today,
    "Mon 9:00 (…)" within a week, "Mon 12 Jan 9:00 (…)" later."""
    local, today = opens.astimezone(schedule.zone), now.astimezone(schedule.zone).date()
    days = (local.date() - today).days
    day = "" if days == 0 else local.strftime("%a ") if days < 7 else local.strftime("%a %-d %b ")
    return f"{day}{local.hour}:{local.minute:02d} ({schedule.config['timezone']})"


@functools.cache
def zones() -> tuple[str, ...]:
    """Every IANA zone name, sorted (the Settings page's choices): read from the zone files once per process."""
    return tuple(sorted(available_timezones()))


async def get(services: Services, account_id: str, now: datetime) -> JSONObject:
    """GET /v1/account/business-hours at now (an aware datetime)."""
    from services import accounts
    account = await accounts.get_account(services.db, account_id)
    return public(account["settings"].get(KEY), now)


async def put(services: Services, account_id: str, body: object, now: datetime, by: Mapping[str, Any] | None = None,
              more: Mapping[str, Any] | None = None) -> JSONObject:
    """PUT /v1/account/business-hours: the whole object replaced (validate(); Invalid changes nothing); returns
    it as GET shows it. body None removes the business hours (always open again). more: other settings saved
    in the same change (the Settings page's SLA), validated already."""
    from services import accounts
    config = validate(body) if body is not None else None
    if config and config["holidayCountry"]:
        # The country's holidays are loaded here, off the event loop, not first by the writer's transaction.
        import asyncio
        await asyncio.to_thread(country_holidays, config["holidayCountry"], now.year)
    await accounts.update_settings(services.db, account_id, {KEY: config, **(more or {})}, by=by)
    return public(config, now)


def day_text(intervals: Iterable[tuple[str, str] | list[str]]) -> str:
    """A day's intervals as the Settings page writes them: "09:00-12:30, 13:30-17:00"."""
    return ", ".join(f"{a}-{b}" for a, b in intervals)


def form_body(form: Mapping[str, str]) -> JSONObject | None:
    """The Settings page's form (timezone, one text per day as day_text writes it, holidays one per line or
    comma-separated, holidayCountry, outsideHoursMessage) as PUT's body; None when the time zone is empty (no
    business hours). Invalid naming the day for an interval that is not "HH:MM-HH:MM"."""
    if not form.get("timezone", "").strip():
        return None
    weekly: dict[str, list[list[str]]] = {}
    for day in DAYS:
        text = form.get(day, "").strip()
        if not text:
            continue
        weekly[day] = []
        for i, part in enumerate(piece.strip() for piece in text.split(",")):
            opens, dash, closes = part.partition("-")
            if not dash:
                raise Invalid(f"weekly.{day}[{i}] must be HH:MM-HH:MM, e.g. 09:00-17:00, not {part!r}",
                              field=f"weekly.{day}[{i}]")
            weekly[day].append([opens.strip(), closes.strip()])
    holidays = [d.strip() for d in form.get("holidays", "").replace(",", "\n").splitlines() if d.strip()]
    return {"timezone": form["timezone"].strip(), "weekly": weekly, "holidays": holidays,
            "holidayCountry": form.get("holidayCountry", "").strip() or None,
            "outsideHoursMessage": form.get("outsideHoursMessage", "").strip() or None}
