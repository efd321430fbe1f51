"""Business hours' time arithmetic (issue 40; the settings' validation and API are services/business_hours.py): an
account's IANA time zone, open intervals per weekday (several a day, in local wall-clock time), holidays by date (and
optionally a country's public holidays from the `holidays` package). Pure, no I/O: whether it is open at a moment,
when it next opens, a moment plus N business minutes (the SLA's clock) and the outside-hours message, asked by the
writer's transactions (storage/sla.py) as by the services.

Intervals are local times, so a daylight-saving change moves them in UTC: 09:00-17:00 is 13:00-21:00 UTC in New
York's summer and 14:00-22:00 UTC in its winter, and the day of a change is an hour shorter or longer when an
interval spans the change. A local time the change skips (02:30 on a spring-forward night) counts as the moment
after the gap; one it repeats, as its first occurrence."""
from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from datetime import date, datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from common.errors import Invalid
from common.ids import iso
from common.placeholders import fill

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # date.weekday() order
# How far ahead the next opening or the end of N business minutes is looked for: a schedule with no open
# minute within this many days (every day closed, or holidays over it) has none (nextOpenAt null, no SLA due).
HORIZON_DAYS = 400
_HHMM = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])|24:00")
_UTC = timezone.utc
KEY = "businessHours"  # where the validated object is kept in the account's settings
Interval = tuple[datetime, datetime]  # an open period [opens, closes) in UTC
State = tuple[bool, datetime | None, datetime | None]  # Schedule.state's (open now, closes, next opens)


def minutes_of(text: object, field: str) -> int:
    if not isinstance(text, str) or not _HHMM.fullmatch(text):
        raise Invalid(f"{field} must be a time HH:MM from 00:00 to 24:00, not {text!r}", field=field)
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


@functools.lru_cache(maxsize=256)
def country_holidays(code: str, year: int) -> frozenset[date]:
    import holidays
    return frozenset(holidays.country_holidays(code, years=year))


class Schedule:
    """A stored business-hours object (validate()'s result) made usable: open intervals as UTC datetimes."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.zone = ZoneInfo(config["timezone"])
        self.weekly = [[(minutes_of(a, ""), minutes_of(b, "")) for a, b in config["weekly"].get(day, [])]
                       for day in DAYS]
        self.holidays = frozenset(date.fromisoformat(text) for text in config.get("holidays") or [])
        self.country = config.get("holidayCountry")
        # what the writer asks again and again, kept
        self._days: dict[date, list[Interval]] = {}
        self._dues: dict[tuple[datetime, int], datetime | None] = {}
        self._window: tuple[datetime, datetime, State] | None = None

    def closed_on(self, day: date) -> bool:
        """Whether a local date is a holiday (the account's own, or its country's)."""
        return day in self.holidays or (self.country is not None and day in country_holidays(self.country, day.year))

    def _at(self, day: date, minutes: int) -> datetime:
        """The UTC moment of a local date's minute (24:00: the next day's midnight), through the zone's rules."""
        local = datetime.combine(day, time()) + timedelta(minutes=minutes)
        # fold=0 (the first of a repeated time); a skipped time comes back from UTC as the moment after the gap
        return local.replace(tzinfo=self.zone).astimezone(_UTC)

    def _day(self, day: date) -> list[Interval]:
        """A local date's open intervals in UTC, [(opens, closes)]: kept per date (a Schedule lives as long as its
        settings' version, storage/sla.py, and the writer asks for the same few days with every message)."""
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


def local_opening(schedule: Schedule, opens: datetime | None) -> str:
    """The next opening as the contact reads it in the outside-hours message: "Monday 09:00" in the account's
    zone (with the zone's name), or "soon" when none is known."""
    if opens is None:
        return "soon"
    local = opens.astimezone(schedule.zone)
    return f"{local.strftime('%A %H:%M')} ({schedule.config['timezone']})"


@functools.lru_cache(maxsize=256)
def schedule_of_text(text: str) -> tuple[dict[str, Any], Schedule]:
    """(config, Schedule) of an account's businessHours as stored (JSON text): parsed once per version in a
    process (the writer's transactions ask for it with every contact's message)."""
    config = json.loads(text)
    return config, Schedule(config)


def outside_hours_body(template: str, contact: Mapping[str, Any], schedule: Schedule, opens: datetime | None) -> str:
    """The outside-hours message for this contact: the contact placeholders ({{firstName}} ...) and
    {{nextOpenAt}} (the next opening in the account's zone, e.g. "Monday 09:00 (Europe/Berlin)") filled."""
    return fill(template.replace("{{nextOpenAt}}", local_opening(schedule, opens)), contact)
