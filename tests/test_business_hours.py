"""Business hours' time arithmetic (issue 40, common/business_hours.py): open now, the next opening and N
business minutes later, across daylight-saving changes in New York and Berlin (northern hemisphere, whole-hour
offsets) and Adelaide (southern hemisphere, a 30-minute offset), merged periods across midnight, holidays (the
account's and a country's), and bad input refused naming the field. Pure functions: no database."""
from datetime import datetime, timezone

import pytest

from common.errors import Invalid
from services import business_hours
from common.business_hours import Schedule
from services.business_hours import validate

WEEKDAYS = {day: [["09:00", "17:00"]] for day in ("mon", "tue", "wed", "thu", "fri")}


def utc(text):
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def schedule(zone, weekly=WEEKDAYS, **more):
    return Schedule(validate({"timezone": zone, "weekly": weekly, **more}))


def test_new_york_across_the_spring_forward_change():
    """9-17 is 14-22 UTC before 8 March 2026 and 13-21 UTC after; business minutes skip the closed weekend."""
    hours = schedule("America/New_York")
    assert hours.state(utc("2026-03-06T21:59")) == (True, utc("2026-03-06T22:00"), None)  # Friday, EST
    assert hours.state(utc("2026-03-07T12:00")) == (False, None, utc("2026-03-09T13:00"))  # Monday 9:00 EDT
    # 16:00 EST Friday + 120 business minutes: 60 on Friday, 60 from Monday's opening (now an hour earlier in UTC)
    assert hours.add_business_minutes(utc("2026-03-06T21:00"), 120) == utc("2026-03-09T14:00")
    # An interval spanning the change is an hour shorter: Sunday 00:00-06:00 is 05:00-10:00 UTC, five hours.
    night = schedule("America/New_York", {"sun": [["00:00", "06:00"]]})
    assert night.add_business_minutes(utc("2026-03-08T05:00"), 300) == utc("2026-03-08T10:00")
    assert night.add_business_minutes(utc("2026-03-08T05:00"), 301) == utc("2026-03-15T04:01")  # next Sunday, EDT


def test_berlin_across_the_fall_back_change():
    """9-17 is 07-15 UTC in summer time and 08-16 UTC after 25 October 2026; a night interval spanning the change
    is an hour longer."""
    hours = schedule("Europe/Berlin")
    assert hours.state(utc("2026-10-23T14:30")) == (True, utc("2026-10-23T15:00"), None)  # Friday, CEST
    assert hours.state(utc("2026-10-24T10:00")) == (False, None, utc("2026-10-26T08:00"))  # Monday, CET
    assert hours.add_business_minutes(utc("2026-10-23T14:30"), 60) == utc("2026-10-26T08:30")
    night = schedule("Europe/Berlin", {"sun": [["01:00", "05:00"]]})
    assert night.state(utc("2026-10-25T00:30")) == (True, utc("2026-10-25T04:00"), None)  # 02:30 CEST, then CET
    assert night.add_business_minutes(utc("2026-10-24T23:00"), 300) == utc("2026-10-25T04:00")  # five hours


def test_adelaide_a_half_hour_zone_in_the_southern_spring():
    """Adelaide (+09:30, +10:30 in summer time from 4 October 2026): 9:00 is 23:30 UTC the day before, then
    22:30."""
    hours = schedule("Australia/Adelaide")
    assert hours.state(utc("2026-10-02T07:00")) == (True, utc("2026-10-02T07:30"), None)  # Friday 16:30 ACST
    assert hours.state(utc("2026-10-03T00:00")) == (False, None, utc("2026-10-04T22:30"))  # Monday 9:00 ACDT
    assert hours.add_business_minutes(utc("2026-10-02T07:00"), 45) == utc("2026-10-04T22:45")


def test_periods_across_midnight_are_one_and_holidays_close_whole_days():
    hours = schedule("Europe/Berlin", {"mon": [["22:00", "24:00"]], "tue": [["00:00", "06:00"], ["10:00", "12:00"]]},
                     holidays=["2026-06-16"])
    # Monday 23:30 CEST: open until Tuesday 06:00, one period
    assert hours.state(utc("2026-06-08T21:30")) == (True, utc("2026-06-09T04:00"), None)
    assert hours.state(utc("2026-06-09T05:00")) == (False, None, utc("2026-06-09T08:00"))
    # Tuesday 16 June is a holiday: Monday 15th's night ends at midnight, next opening is Monday 22nd
    assert hours.state(utc("2026-06-15T21:30")) == (True, utc("2026-06-15T22:00"), None)
    assert hours.state(utc("2026-06-15T22:00")) == (False, None, utc("2026-06-22T20:00"))


def test_a_countrys_public_holidays_close_too():
    hours = schedule("Europe/Berlin", holidayCountry="de")
    assert hours.config["holidayCountry"] == "DE"
    # Friday 25 December 2026 (Christmas) is closed: Thursday 24th closes at 17:00, Monday 28th opens (26th: Saturday)
    assert hours.state(utc("2026-12-24T16:00")) == (False, None, utc("2026-12-28T08:00"))
    assert not hours.state(utc("2026-12-25T10:00"))[0]


def test_a_schedule_without_open_hours_never_opens_and_has_no_due_time():
    hours = schedule("UTC", {})
    assert hours.state(utc("2026-01-01T00:00")) == (False, None, None)
    assert hours.add_business_minutes(utc("2026-01-01T00:00"), 10) is None


def test_the_public_shape_and_an_account_without_hours():
    assert business_hours.public(None, utc("2026-01-01T00:00"))["openNow"] is True
    shown = business_hours.public(validate({"timezone": "America/New_York", "weekly": WEEKDAYS}),
                                  utc("2026-03-07T12:00"))
    assert shown["openNow"] is False and shown["nextOpenAt"] == "2026-03-09T13:00:00.000Z" and shown["closesAt"] is None


@pytest.mark.parametrize("body, field", [
    ({"timezone": "Mars/Olympus", "weekly": {}}, "timezone"),
    ({"timezone": "../../etc/passwd"}, "timezone"),
    ({"weekly": {}}, "timezone"),
    ({"timezone": "UTC", "weekly": {"mon": [["09:00", "25:00"]]}}, "weekly.mon[0][1]"),
    ({"timezone": "UTC", "weekly": {"mon": [["9:00", "17:00"]]}}, "weekly.mon[0][0]"),
    ({"timezone": "UTC", "weekly": {"mon": [["17:00", "09:00"]]}}, "weekly.mon[0]"),
    ({"timezone": "UTC", "weekly": {"mon": [["09:00", "09:00"]]}}, "weekly.mon[0]"),
    ({"timezone": "UTC", "weekly": {"tue": [["09:00", "12:00"], ["11:00", "13:00"]]}}, "weekly.tue[1]"),
    ({"timezone": "UTC", "weekly": {"tue": [["13:00", "18:00"], ["09:00", "13:30"]]}}, "weekly.tue[0]"),
    ({"timezone": "UTC", "weekly": {"funday": [["09:00", "12:00"]]}}, "weekly.funday"),
    ({"timezone": "UTC", "weekly": {"mon": [["09:00"]]}}, "weekly.mon[0]"),
    ({"timezone": "UTC", "holidays": ["2026-02-30"]}, "holidays[0]"),
    ({"timezone": "UTC", "holidays": ["2026-01-01", "26-1-1"]}, "holidays[1]"),
    ({"timezone": "UTC", "holidayCountry": "XX"}, "holidayCountry"),
    ({"timezone": "UTC", "outsideHoursMessage": "Hi {{firstname}}"}, "outsideHoursMessage"),
    ({"timezone": "UTC", "color": "red"}, "color"),
])
def test_bad_input_names_the_field(body, field):
    with pytest.raises(Invalid) as caught:
        validate(body)
    assert caught.value.field == field, caught.value.message
