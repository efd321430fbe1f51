"""Business hours and the SLA in the UI (issue 40), in-process with a cookie-keeping client and the services' clock
moved by the test: the Settings section (a bad field named with what was typed kept and nothing saved, then
saved), the inbox's Due soon view and badge turning to "SLA breached" at the due business minute (with the
live event that makes open inboxes refresh), and the Reports page's SLA sections."""
from datetime import datetime, timezone

from services import accounts, live, sla
from storage.db import reads
from tests.inbound_helpers import inbound
from tests.waiting import Clock

WEEKDAYS = {day: "09:00-12:30, 13:30-17:00" for day in ("mon", "tue", "wed", "thu", "fri")}


def utc(text):
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


@reads
def _sla_events(cx, account_id):
    return [tuple(row) for row in cx.execute("SELECT id, account_id, type FROM events WHERE account_id = ?"
                                             " AND type = 'conversation.sla_breached'", (account_id,))]


async def test_settings_inbox_badge_and_reports(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    services.clock = clock = Clock(utc("2026-06-05T14:00"))  # Friday 16:00 in Berlin
    page = (await signed_in.get("/settings")).text
    assert 'id="business-hours"' in page and "No business hours: always open" in page

    form = {"timezone": "Europe/Berlin", **WEEKDAYS, "fri": "09:00-25:00", "holidays": "2026-12-24",
            "holidayCountry": "", "outsideHoursMessage": "Back {{nextOpenAt}}", "firstResponseMinutes": "30",
            "nextResponseMinutes": ""}
    r = await signed_in.post("/settings/business-hours", form)
    assert r.code == 400 and "weekly.fri[0][1]" in r.text and 'value="09:00-25:00"' in r.text
    r = await signed_in.post("/settings/business-hours", {**form, "fri": "09:00-17:00", "firstResponseMinutes": "x"})
    assert r.code == 400 and "sla.firstResponseMinutes" in r.text
    settings = (await accounts.get_account(services.db, account_id))["settings"]
    assert "businessHours" not in settings and "sla" not in settings  # nothing saved

    r = await signed_in.post("/settings/business-hours", {**form, "fri": "09:00-17:00"})
    assert (r.code, r.headers["Location"]) == (303, "/settings#business-hours")
    settings = (await accounts.get_account(services.db, account_id))["settings"]
    assert settings["businessHours"]["weekly"]["mon"] == [["09:00", "12:30"], ["13:30", "17:00"]]
    assert settings["sla"] == {"firstResponseMinutes": 30}
    page = (await signed_in.get("/settings")).text
    assert "Open now, until" in page and 'value="09:00-12:30, 13:30-17:00"' in page and 'value="30"' in page

    # 16:45 Friday: 15 minutes today, 15 on Monday from 9:00 (07:00 UTC in summer time)
    clock.now = utc("2026-06-05T14:45")
    ann = (await inbound(services, account_id, "+4915100000001", "Where is my order?", first_name="Ann"))["contact_id"]
    due_soon = (await signed_in.get("/inbox?filter=due_soon")).text
    assert 'data-view="due_soon" aria-current="page"' in due_soon
    assert f'href="/inbox/{ann}"' not in due_soon  # due Monday 07:15 UTC: not within the hour
    clock.now = utc("2026-06-08T07:00")
    rows = (await signed_in.get("/inbox/conversations?filter=due_soon")).text
    assert f'href="/inbox/{ann}"' in rows and "badge-sla" in rows and "SLA breached" not in rows
    watcher = sla.SlaWatcher(services)
    clock.now = utc("2026-06-08T07:14:59")
    await watcher.round()
    assert "SLA breached" not in (await signed_in.get("/inbox/conversations?filter=all")).text
    clock.now = utc("2026-06-08T07:15")
    await watcher.round()
    assert "SLA breached" in (await signed_in.get("/inbox/conversations?filter=all")).text
    state = (await signed_in.get(f"/inbox/{ann}/state")).text
    assert 'id="sla-due"' in state and "SLA breached: the answer was due" in state and "2026-06-08 07:15 UTC" in state
    [event] = await _sla_events(services.db, account_id)
    assert live.may_see("agent", event)  # open inboxes get it, and refresh their list (static/inbox.js)

    page = (await signed_in.get("/reports?from=2026-06-01&to=2026-06-30")).text
    assert 'id="report-sla-days"' in page and 'id="report-sla-agents"' in page
    assert "No agent (the API, or unassigned)" in page
