"""Business hours (issue 40): an account's IANA time zone, open intervals per weekday (several a day, in local
wall-clock time), holidays by date (and optionally a country's public holidays from the `holidays` package), and
the message a contact gets when writing while the business is closed. Pure time arithmetic, no HTTP, no SQL:
whether it is open at a moment, when it next opens, and a moment plus N business minutes (the SLA's clock).

Intervals are local times, so a daylight-saving change moves them in UTC: 09:00-17:00 is 13:00-21:00 UTC in New
York's summer and 14:00-22:00 UTC in its winter, and the day of a change is an hour shorter or longer when an
interval spans the change. A local time the change skips (02:30 on a spring-forward night) counts as the moment
after the gap; one it repeats, as its first occurrence."""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import date, datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from common.errors import Invalid
from common.ids import iso
from services.context import JSONObject, Services

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # date.weekday() order
MAX_INTERVALS_PER_DAY = 10
MAX_HOLIDAYS = 500
MAX_MESSAGE_CHARS = 1000
# How far ahead the next opening or the end of N business minutes is looked for: a schedule with no open
# minute within this many days (every day closed, or holidays over it) has none (nextOpenAt null, no SLA due).
HORIZON_DAYS = 400
_HHMM = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])|24:00")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_UTC = timezone.utc
KEY = "businessHours"  # where the validated object is kept in the account's settings
Interval = tuple[datetime, datetime]  # an open period [opens, closes) in UTC
State = tuple[bool, datetime | None, datetime | None]  # Schedule.state's (open now, closes, next opens)



def _minutes(text: object, field: str) -> int:
    if not isinstance(text, str) or not _HHMM.fullmatch(text):
        raise Invalid(f"{field} must be a time HH:MM from 00:00 to 24:00, not {text!r}", field=field)
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


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
            start, end = _minutes(interval[0], f"{field}[0]"), _minutes(interval[1], f"{field}[1]")
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
            from services.placeholders import placeholder_parts
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


@functools.lru_cache(maxsize=256)
def _country_holidays(code: str, year: int) -> frozenset[date]:
    import holidays
    return frozenset(holidays.country_holidays(code, years=year))


class Schedule:
    """A stored business-hours object (validate()'s result) made usable: open intervals as UTC datetimes."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.zone = ZoneInfo(config["timezone"])
        self.weekly = [[(_minutes(a, ""), _minutes(b, "")) for a, b in config["weekly"].get(day, [])]
                       for day in DAYS]
        self.holidays = frozenset(date.fromisoformat(text) for text in config.get("holidays") or [])
        self.country = config.get("holidayCountry")
        # what the writer asks again and again, kept
        self._days: dict[date, list[Interval]] = {}
        self._dues: dict[tuple[datetime, int], datetime | None] = {}
        self._window: tuple[datetime, datetime, State] | None = None

    def closed_on(self, day: date) -> bool:
        """Whether a local date is a holiday (the account's own, or its country's)."""
        return day in self.holidays or (self.country is not None and day in _country_holidays(self.country, day.year))

    def _at(self, day: date, minutes: int) -> datetime:
        """The UTC moment of a local date's minute (24:00: the next day's midnight), through the zone's rules."""
        local = datetime.combine(day, time()) + timedelta(minutes=minutes)
        # fold=0 (the first of a repeated time); a skipped time comes back from UTC as the moment after the gap
        return local.replace(tzinfo=self.zone).astimezone(_UTC)

    def _day(self, day: date) -> list[Interval]:
        """A local date's open intervals in UTC, [(opens, closes)]: kept per date (a Schedule lives as long as its
        settings' version, services/sla.py, and the writer asks for the same few days with every message)."""
        found = self._days.get(day)
        if found is None:
            if len(self._days) > 2000:
                self._days.clear()
            found = self._days[day] = [] if self.closed_on(day) else [
                (opens, closes) for opens, closes in ((self._at(day, a), self._at(day, b))
                                                      for a, b in self.weekly[day.weekday()])
                if closes > opens]  # not an interval inside a skipped hour
        return found

    def intervals(self, start: datetime) -> Iterator[Interval]:
        """Open periods [opens, closes) in UTC that end after start, in order, adjacent ones merged (Monday
        22:00-24:00 and Tuesday 00:00-06:00 are one period), within HORIZON_DAYS."""
        day = start.astimezone(self.zone).date() - timedelta(days=1)
        pending: Interval | None = None
        for _ in range(HORIZON_DAYS + 2):
            for opens, closes in self._day(day):
                if pending is not None and opens <= pending[1]:
                    pending = (pending[0], max(pending[1], closes))
                    continue
                if pending is not None and pending[1] > start:
                    yield pending
                pending = (opens, closes)
            day += timedelta(days=1)
        if pending is not None and pending[1] > start:
            yield pending

    def state(self, at: datetime) -> State:
        """(open now, when the current period closes or None, when the next one opens or None). The answer holds
        for the whole period around `at` (from `at` to the opening, or the open period itself), so it is kept:
        the writer asks again with every contact's message."""
        window = self._window
        if window is not None and window[0] <= at < window[1]:
            return window[2]
        state: State = (False, None, None)
        lo, hi = at, at + timedelta(days=1)
        for opens, closes in self.intervals(at):
            state, lo, hi = ((True, closes, None), opens, closes) if opens <= at else ((False, None, opens), at, opens)
            break
        self._window = (lo, hi, state)
        return state

    def add_business_minutes(self, start: datetime, minutes: int) -> datetime | None:
        """The moment `minutes` open minutes after start (the SLA's due time); None when the schedule has not
        that many open minutes within HORIZON_DAYS. Quick within an open period, and kept per opening for a
        start while closed (every message of a closed period is due at the same time)."""
        left = timedelta(minutes=minutes)
        open_now, closes, opens = self.state(start)
        if open_now and closes is not None and start + left <= closes:
            return start + left
        if not open_now and opens is not None:
            key = (opens, minutes)
            if key not in self._dues:
                if len(self._dues) > 1000:
                    self._dues.clear()
                self._dues[key] = self._add(opens, left)
            return self._dues[key]
        return self._add(start, left)

    def _add(self, start: datetime, left: timedelta) -> datetime | None:
        for opens, closes in self.intervals(start):
            opens = max(opens, start)
            if opens + left <= closes:
                return opens + left
            left -= closes - opens
        return None


def schedule_of(settings: Mapping[str, Any] | None) -> Schedule | None:
    """The account's Schedule from its settings, or None when it has no business hours (always open)."""
    config = settings.get(KEY) if settings else None
    return Schedule(config) if config else None


def add_business_minutes(schedule: Schedule | None, start: datetime, minutes: int) -> datetime | None:
    """start + minutes, counted in business minutes when the account has business hours, else on the clock."""
    return start + timedelta(minutes=minutes) if schedule is None else schedule.add_business_minutes(start, minutes)


def iso_or_none(moment: datetime | None) -> str | None:
    """A moment as Parley stores and shows times (ISO 8601 UTC with milliseconds: they sort as text), or None."""
    return iso(moment) if moment else None


def public(config: Mapping[str, Any] | None, now: datetime) -> JSONObject:
    """GET /v1/account/business-hours: the stored object with openNow, closesAt and nextOpenAt at now. An
    account without business hours is always open (and its SLA counts every minute)."""
    if not config:
        return {"timezone": None, "weekly": {}, "holidays": [], "holidayCountry": None, "outsideHoursMessage": None,
                "openNow": True, "closesAt": None, "nextOpenAt": None}
    open_now, closes, opens = Schedule(config).state(now)
    return {**config, "openNow": open_now, "closesAt": iso_or_none(closes), "nextOpenAt": iso_or_none(opens)}


def local_opening(schedule: Schedule, opens: datetime | None) -> str:
    """The next opening as the contact reads it in the outside-hours message: "Monday 09:00" in the account's
    zone (with the zone's name), or "soon" when none is known."""
    if opens is None:
        return "soon"
    local = opens.astimezone(schedule.zone)
    return f"{local.strftime('%A %H:%M')} ({schedule.config['timezone']})"


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
        await asyncio.to_thread(_country_holidays, config["holidayCountry"], now.year)
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
