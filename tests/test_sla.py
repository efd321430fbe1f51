"""Business hours, the outside-hours message and the SLA (issue 40) through the API and the services, on both
databases, with the services' clock moved by the test (no test sleeps): GET/PUT /v1/account/business-hours and
its bad input, the outside-hours message once per conversation per closed period delivered to a real receiver,
the SLA's due time in business minutes, the SlaWatcher breaching once (also two rounds at once), Due soon, and
the Reports' share within SLA per day and per agent."""
import asyncio
import json
from datetime import datetime, timedelta, timezone

import pytest

from common.ids import iso, utcnow
from services import inbox, messaging, sla
from storage import sla as sla_store
from tests.team_users import add_user
from tests.bot_helpers import configure, say as bot_say
from tests.event_helpers import events_of
from tests.waiting import Clock

pytestmark = pytest.mark.settings(webhook_timeout_seconds=1.0)

HOURS_URL = "/v1/account/business-hours"
WEEKDAYS = {day: [["09:00", "17:00"]] for day in ("mon", "tue", "wed", "thu", "fri")}


def utc(text):
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


@pytest.fixture
def clock(services):
    services.clock = Clock(utc("2026-03-07T12:00"))  # Saturday
    return services.clock


_sids = iter(range(1, 1_000_000))


async def say(services, account, from_id, body="Hello", **kw):
    message, _ = await messaging.receive_inbound(services, account["account_id"], message_sid=f"sla-{next(_sids)}",
                                                 from_id=from_id, to_id="shop", body=body, **kw)
    return message


async def outbound(api, key, contact_id):
    r = await api.get(f"/v1/contacts/{contact_id}/messages?limit=200", key=key)
    assert r.code == 200, r.body
    return [m for m in r.json["data"] if m["direction"] == "outbound"]


async def conversation(api, key, contact_id):
    r = await api.get(f"/v1/conversations/{contact_id}", key=key)
    assert r.code == 200, r.body
    return r.json


async def test_business_hours_are_set_read_and_refused_naming_the_field(api, account, other_account, clock):
    key = account["api_key"]
    r = await api.get(HOURS_URL, key=key)
    assert r.code == 200 and r.json["timezone"] is None and r.json["openNow"] is True, r.body
    body = {"timezone": "America/New_York", "weekly": WEEKDAYS, "holidays": ["2026-12-25"],
            "outsideHoursMessage": "Hi {{firstName}}, we answer from {{nextOpenAt}}."}
    r = await api.call("PUT", HOURS_URL, body, key=key)
    assert r.code == 200, r.body
    assert r.json["openNow"] is False and r.json["nextOpenAt"] == "2026-03-09T13:00:00.000Z"  # Monday 9:00 EDT
    clock.now = utc("2026-03-09T13:30")
    r = await api.get(HOURS_URL, key=key)
    assert r.json["openNow"] is True and r.json["closesAt"] == "2026-03-09T21:00:00.000Z" and r.json["nextOpenAt"] is None
    assert r.json["weekly"] == WEEKDAYS and r.json["holidays"] == ["2026-12-25"]
    for bad, field in [({**body, "timezone": "Europe/Atlantis"}, "timezone"),
                       ({**body, "weekly": {"mon": [["09:00", "25:00"]]}}, "weekly.mon[0][1]"),
                       ({**body, "weekly": {"mon": [["17:00", "09:00"]]}}, "weekly.mon[0]"),
                       ({**body, "weekly": {"mon": [["09:00", "12:00"], ["11:00", "13:00"]]}}, "weekly.mon[1]"),
                       ({**body, "weekly": {"someday": [["09:00", "12:00"]]}}, "weekly.someday"),
                       ({**body, "holidays": ["2026-02-29"]}, "holidays[0]"),
                       ({**body, "weekly": {"mon": "9-5"}}, "weekly.mon")]:
        r = await api.call("PUT", HOURS_URL, bad, key=key)
        assert r.code == 400 and r.json["error"]["code"] == "VALIDATION_ERROR", r.body
        assert field in r.json["error"]["message"], (field, r.json)
    assert (await api.get(HOURS_URL, key=key)).json == r_unchanged(body, clock)
    # another account's hours are its own
    assert (await api.get(HOURS_URL, key=other_account["api_key"])).json["timezone"] is None
    r = await api.patch("/v1/account/settings", {"sla": {"firstResponseMinutes": -5}}, key=key)
    assert r.code == 400 and "sla.firstResponseMinutes" in r.json["error"]["message"], r.body
    r = await api.patch("/v1/account/settings", {"sla": {"firstResponseMinutes": 2.5}}, key=key)
    assert r.code == 400 and "sla.firstResponseMinutes" in r.json["error"]["message"], r.body
    r = await api.patch("/v1/account/settings", {"sla": {"firstResponseMinutes": 30}}, key=key)
    assert r.code == 200 and r.json["sla"] == {"firstResponseMinutes": 30}, r.body


def r_unchanged(body, clock):
    return {**body, "holidayCountry": None, "openNow": True, "closesAt": "2026-03-09T21:00:00.000Z", "nextOpenAt": None}


async def test_the_outside_hours_message_goes_once_per_conversation_per_closed_period(
        api, services, account, clock, receiver, workers):
    """Saturday: Ann's first message gets the message (placeholders filled, author auto, delivered to the reply
    webhook like any reply), her second none; an automatic reply gets none; open on Monday, nothing; Monday
    evening is another closed period: one more. The conversation still needs a reply."""
    key = account["api_key"]
    assert (await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url}, key=key)).code == 200
    r = await api.call("PUT", HOURS_URL, {"timezone": "Europe/Berlin", "weekly": WEEKDAYS,
                                          "outsideHoursMessage": "Hi {{firstName}}! We reply from {{nextOpenAt}}."},
                       key=key)
    assert r.code == 200, r.body
    ann = await say(services, account, "+4915112345678", "Anyone there?", first_name="Ann")
    await say(services, account, "+4915112345678", "Hello??")
    bot = await say(services, account, "+4915199999999", "I am out of office", auto_submitted=True)
    await workers().run_due(utcnow())
    [sent] = await outbound(api, key, ann["contact_id"])
    assert sent["author"] == "auto" and sent["body"] == "Hi Ann! We reply from Monday 09:00 (Europe/Berlin)."
    assert await outbound(api, key, bot["contact_id"]) == []
    [delivered] = [json.loads(q["body"]) for q in receiver.requests]
    assert delivered["author"] == "auto" and delivered["messageId"] == sent["id"] and delivered["toId"] == "+4915112345678"
    listed = await inbox.list_conversations(services, account["account_id"], filter="needs_reply")
    assert ann["contact_id"] in {item["contact_id"] for item in listed["items"]}
    clock.now = utc("2026-03-09T10:00")  # Monday 11:00 in Berlin: open
    await say(services, account, "+4915112345678", "Good morning")
    assert len(await outbound(api, key, ann["contact_id"])) == 1
    clock.now = utc("2026-03-09T18:00")  # Monday 19:00: closed again, a new period
    await say(services, account, "+4915112345678", "Still there?")
    await say(services, account, "+4915112345678", "Hm")
    later = await outbound(api, key, ann["contact_id"])
    assert [m["body"] for m in later] == ["Hi Ann! We reply from Monday 09:00 (Europe/Berlin).",
                                          "Hi Ann! We reply from Tuesday 09:00 (Europe/Berlin)."]


async def test_the_sla_counts_business_minutes_and_breaches_once(api, services, account, clock, receiver, workers):
    """New York, first response 30 business minutes, next 60. Friday 16:45 EST: due Monday 9:15 EDT (the clock
    changed over the weekend). The watcher sleeps until then, breaches once (event and notification), Due soon
    lists it; a reply ends the wait; the next message's target is the next response's; Reports count both."""
    key = account["api_key"]
    bob = await add_user(services, account["account_id"], "bob@acme.example")
    r = await api.patch("/v1/account/settings", {
        "customChannelWebhookUrl": receiver.url, "sla": {"firstResponseMinutes": 30, "nextResponseMinutes": 60},
        "notificationUrls": {"conversation.sla_breached": receiver.url + "/breached"}}, key=key)
    assert r.code == 200, r.body
    assert (await api.call("PUT", HOURS_URL, {"timezone": "America/New_York", "weekly": WEEKDAYS}, key=key)).code == 200
    clock.now = utc("2026-03-06T21:45")
    ann = await say(services, account, "+14155550001", "Order 17 is late")
    contact = ann["contact_id"]
    shown = await conversation(api, key, contact)
    assert shown["slaDueAt"] == "2026-03-09T13:15:00.000Z" and shown["slaBreached"] is False
    watcher = sla.SlaWatcher(services)
    clock.now = utc("2026-03-09T13:14:45")
    assert await watcher.round() == 15  # asleep until the due time
    assert await events_of(api, key, "conversation.sla_breached") == []
    due_soon = await inbox.list_conversations(services, account["account_id"], filter="due_soon")
    assert [item["contact_id"] for item in due_soon["items"]] == [contact] and due_soon["counts"]["due_soon"] == 1
    clock.now = utc("2026-03-09T13:15")
    await asyncio.gather(watcher.round(), sla.SlaWatcher(services).round())  # two at once: one breach
    await watcher.round()
    [event] = await events_of(api, key, "conversation.sla_breached")
    assert event["data"] == {"contactId": contact, "dueAt": "2026-03-09T13:15:00.000Z", "kind": "first",
                             "assigneeUserId": None}
    assert (await conversation(api, key, contact))["slaBreached"] is True
    await workers().run_due(utcnow())
    [notified] = [json.loads(q["body"]) for q in receiver.requests if q["path"] == "/hook/breached"]
    assert notified["event"] == "conversation.sla_breached" and notified["data"] == event["data"]
    # Bob answers late: the wait ends; Ann writes again and gets the next response's 60 minutes, answered in time
    clock.now = utc("2026-03-09T14:00")
    await messaging.send_reply(services, account["account_id"], contact, "Sorry!", author="user",
                               author_user_id=bob)
    shown = await conversation(api, key, contact)
    assert shown["slaDueAt"] is None and shown["slaBreached"] is False
    await say(services, account, "+14155550001", "Thanks, and order 18?")
    assert (await conversation(api, key, contact))["slaDueAt"] == "2026-03-09T15:00:00.000Z"
    # (a reply is stamped with the real time, as every message: the next wait starts at the real time too)
    await api.patch(f"/v1/conversations/{contact}", {"status": "pending"}, key=key)
    clock.now = utcnow()
    await say(services, account, "+14155550001", "And order 19?")
    due = (await conversation(api, key, contact))["slaDueAt"]
    assert due >= iso(clock.now + timedelta(minutes=60))
    await messaging.send_reply(services, account["account_id"], contact, "On its way", author="user",
                               author_user_id=bob)
    # Resolving drops a wait nobody answered; nothing breaches then
    ben = (await say(services, account, "+14155550002", "Hi"))["contact_id"]
    assert (await api.patch(f"/v1/conversations/{ben}", {"status": "resolved"}, key=key)).code == 200
    assert (await conversation(api, key, ben))["slaDueAt"] is None
    clock.now += timedelta(days=30)
    await watcher.round()
    assert len(await events_of(api, key, "conversation.sla_breached")) == 1
    today = utcnow().date()
    r = await api.get(f"/v1/reports/sla-days?from=2026-03-06&to={today.isoformat()}", key=key)
    assert r.code == 200, r.body
    days = {row["day"]: row for row in r.json["rows"] if row["waits"]}
    assert days == {"2026-03-06": {"day": "2026-03-06", "waits": 1, "withinSla": 0, "percentWithinSla": 0.0},
                    today.isoformat(): {"day": today.isoformat(), "waits": 1, "withinSla": 1,
                                        "percentWithinSla": 100.0}}
    r = await api.get(f"/v1/reports/sla-agents?from=2026-03-06&to={today.isoformat()}", key=key)
    assert r.json["rows"] == [{"userId": bob, "name": "bob@acme.example", "waits": 2, "withinSla": 1,
                               "percentWithinSla": 50.0}], r.body


async def test_breaches_are_fired_once_by_concurrent_rounds(services, account, clock):
    """Twenty waits due at once, breached by three rounds at the same moment (on PostgreSQL three connections,
    as three processes would): each conversation breaches once."""
    await services.db.write(_set_sla, account["account_id"])
    clock.now = utc("2026-03-09T13:00")
    for n in range(20):
        await say(services, account, f"+1415555{n:04d}", "help")
    now = iso(clock.now + timedelta(minutes=6))
    counts = await asyncio.gather(*(sla_store.breach_due(services.db, now, 500) for _ in range(3)))
    assert sum(counts) == 20, counts
    assert await sla_store.breach_due(services.db, now, 500) == 0


def _set_sla(cx, account_id):
    from storage import accounts as account_store
    settings = account_store.get_settings_in_tx(cx, account_id)
    account_store.set_settings_in_tx(cx, account_id, {**settings, "sla": {"firstResponseMinutes": 5}})


async def test_an_automatic_message_starts_no_wait_and_without_hours_every_minute_counts(api, services, account, clock):
    key = account["api_key"]
    assert (await api.patch("/v1/account/settings", {"sla": {"firstResponseMinutes": 5}}, key=key)).code == 200
    auto = await say(services, account, "+14155550009", "Out of office", auto_submitted=True)
    assert (await conversation(api, key, auto["contact_id"]))["slaDueAt"] is None
    plain = await say(services, account, "+14155550010", "Hi")
    assert (await conversation(api, key, plain["contact_id"]))["slaDueAt"] == "2026-03-07T12:05:00.000Z"  # no hours


async def test_the_bots_answers_start_no_wait_its_handoff_does(api, services, account, clock, receiver):
    """A message the bot answers is not waiting for a person; the bot's handoff starts the wait (the handoff's
    own time: the real clock), which a person's reply ends."""
    key = account["api_key"]
    assert (await api.patch("/v1/account/settings", {"sla": {"firstResponseMinutes": 5}}, key=key)).code == 200
    await configure(api, key, {"active": True, "handoffKeywords": ["human"],
                               "rules": [{"keywords": ["price"], "answer": "10 EUR"}]}, webhook=receiver.url)
    asked = await bot_say(api, services, key, "price?", fromId="+14155550011")
    assert (await conversation(api, key, asked["contactId"]))["slaDueAt"] is None
    await bot_say(api, services, key, "a human please", fromId="+14155550011")
    due = (await conversation(api, key, asked["contactId"]))["slaDueAt"]
    assert due is not None and due > iso(utcnow())
