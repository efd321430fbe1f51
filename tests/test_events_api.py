"""GET /v1/events (docs/api.md "Events", issue 37): the account's events in commit order behind opaque cursors,
long-polls woken by the live events' hub, bad input, tenancy, retention (410) and erasure; on both databases
(every test takes the services fixture through api, so it runs on PostgreSQL too)."""
import asyncio
import json

import pytest
from pydantic import TypeAdapter

from handlers.event_schemas import EVENT_DATA, Event
from services import event_stream, messaging
from services.retention import RetentionWorker
from storage import events
from storage.db import fetch_all, reads
from tests.waiting import until
from tests.bot_helpers import BOT_SETTINGS, configure, say
from tests.campaign_helpers import create, deliver_all, make_list, people, run_all, set_webhook

pytestmark = pytest.mark.settings(**BOT_SETTINGS)  # as tests/test_bot.py

EVENT = TypeAdapter(Event)


async def inbound(services, account_id, sid, from_id="+14155552671", body="Hello"):
    message, created = await messaging.receive_inbound(services, account_id, message_sid=sid, from_id=from_id,
                                                       to_id="shop", body=body, channel="webchat")
    assert created
    return message


async def read(api, key, **query):
    path = "/v1/events?" + "&".join(f"{k}={v}" for k, v in query.items())
    return await api.get(path, key=key, query_key=False)


async def read_all(api, key, after=None, **query):
    """Every event after ``after``, page by page: (events, the last nextCursor)."""
    seen = []
    while True:
        r = await read(api, key, **({"after": after} if after else {}), **query)
        assert r.code == 200, r.body
        for event in r.json["data"]:
            EVENT.validate_python(event)  # each event against its type's schema
        seen += r.json["data"]
        if not r.json["data"]:
            return seen, r.json["nextCursor"]
        after = r.json["nextCursor"]


@reads
def _stored_count(cx, account_id):
    return cx.execute("SELECT COUNT(*) FROM events WHERE account_id = ?", (account_id,)).fetchone()[0]


async def test_events_page_in_commit_order_exactly_once_and_match_their_schema(services, api, account, tmp_path):
    key = account["api_key"]
    contact = (await api.post("/v1/contacts", {"phone": "+14155550100", "firstName": "Ada"}, key=key)).json
    await api.patch(f"/v1/contacts/{contact['id']}", {"lastName": "King"}, key=key)
    message = await inbound(services, account["account_id"], "sid-1")
    events, cursor = await read_all(api, key, limit=1)
    types = [e["type"] for e in events]
    assert types[:2] == ["contact.created", "contact.updated"]
    assert "message.created" in types and "conversation.updated" not in types[:2]
    created = next(e for e in events if e["type"] == "message.created")
    shown = (await api.get(f"/v1/messages/{message['id']}", key=key)).json
    assert created["data"] == {k: v for k, v in shown.items() if k != "attempts"}  # attempts: GET the message
    assert events[0]["data"] == {k: v for k, v in contact.items() if k in events[0]["data"]}
    assert len({e["id"] for e in events}) == len(events)
    # Resuming from the last cursor finds nothing more; a new event comes once.
    assert (await read(api, key, after=cursor)).json == {"data": [], "nextCursor": cursor}
    later = await inbound(services, account["account_id"], "sid-2", body="Again")
    more, _ = await read_all(api, key, after=cursor, types="message.created")
    assert [e["data"]["id"] for e in more] == [later["id"]]
    assert set(EVENT_DATA) == set(event_stream.TYPES)


async def test_concurrent_writers_are_read_exactly_once_in_commit_order(services, api, account, tmp_path):
    """Many inbound messages written at once while a reader pages: every one is read once, and in the order
    the reader's pages give, which never goes back (a page never skips one committed late)."""
    key, account_id = account["api_key"], account["account_id"]
    seen, cursor = [], None

    async def reader(until):
        nonlocal cursor
        while True:
            # Whether every write was answered before this read began: a read begun earlier may not see the last
            # commits, so only an empty page read after them ends the reading.
            answered = until.done()
            r = await read(api, key, types="message.created", limit=7, **({"after": cursor} if cursor else {}))
            assert r.code == 200, r.body
            seen.extend(e["data"]["id"] for e in r.json["data"])
            cursor = r.json["nextCursor"]
            if answered and not r.json["data"]:
                return
            await asyncio.sleep(0)

    writers = asyncio.gather(*(inbound(services, account_id, f"sid-{n}", from_id=f"+1415555{n:04d}")
                               for n in range(60)))
    await asyncio.gather(writers, reader(writers))
    written = [m["id"] for m in writers.result()]
    assert sorted(seen) == sorted(written) and len(seen) == len(set(seen))


async def test_bad_input_names_the_parameter_and_changes_nothing(services, api, account, other_account, tmp_path):
    key = account["api_key"]
    await inbound(services, account["account_id"], "sid-1")
    mine = (await read(api, key)).json["nextCursor"]
    theirs = (await read(api, other_account["api_key"])).json["nextCursor"]
    before = await _stored_count(services.db, account["account_id"])
    for query, named in [({"limit": "0"}, "limit"), ({"limit": "501"}, "limit"), ({"limit": "x"}, "limit"),
                         ({"wait": "31"}, "wait"), ({"wait": "-1"}, "wait"), ({"wait": "soon"}, "wait"),
                         ({"types": "message.created,message.deleted"}, "message.deleted"), ({"types": ""}, "types"),
                         ({"after": "nonsense"}, "after"), ({"after": mine[:-2]}, "after"),
                         ({"after": theirs}, "after")]:
        r = await read(api, key, **query)
        assert r.code == 400, (query, r.body)
        assert named in r.json["error"]["message"], (query, r.json)
    assert await _stored_count(services.db, account["account_id"]) == before


async def test_another_accounts_events_and_cursors_reveal_nothing(services, api, account, other_account, tmp_path):
    await inbound(services, account["account_id"], "sid-1")
    await inbound(services, other_account["account_id"], "sid-1", body="Theirs")
    mine, _ = await read_all(api, account["api_key"])
    theirs, _ = await read_all(api, other_account["api_key"])
    assert {e["data"]["body"] for e in theirs if e["type"] == "message.created"} == {"Theirs"}
    assert not {e["id"] for e in mine} & {e["id"] for e in theirs} or all(
        (await read(api, account["api_key"], after=e["id"])).code == 400 for e in theirs)
    for event in theirs:
        assert (await read(api, account["api_key"], after=event["id"])).code == 400


async def test_a_long_poll_answers_when_an_event_commits(services, api, account, tmp_path):
    key = account["api_key"]
    cursor = (await read(api, key)).json["nextCursor"]
    waiting = asyncio.ensure_future(read(api, key, after=cursor, wait="30", types="message.created"))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    message = await inbound(services, account["account_id"], "sid-1")
    r = await asyncio.wait_for(waiting, 10)
    assert [e["data"]["id"] for e in r.json["data"]] == [message["id"]]


def _count_reads(monkeypatch):
    """The list of the account pages read from here on (each read appends its account id)."""
    reads_made, real_page = [], events.account_page

    async def counted(*args, **kwargs):
        reads_made.append(args[1])
        return await real_page(*args, **kwargs)

    monkeypatch.setattr(events, "account_page", counted)
    return reads_made


async def test_long_polls_at_one_position_share_their_reads(services, api, account, monkeypatch, tmp_path):
    """Issue 37's bench: 1,000 integrations long-polling one account each read the same page when a commit woke
    them all; now waiters at one position share one read (and still each get the event)."""
    key = account["api_key"]
    services.long_polls.per_key = services.long_polls.per_account = 40
    cursor = (await read(api, key)).json["nextCursor"]
    reads_made = _count_reads(monkeypatch)
    waiting = [asyncio.ensure_future(read(api, key, after=cursor, wait="30", types="message.created"))
               for _ in range(40)]
    await until(lambda: services.long_polls.waiting == 40)
    before = len(reads_made)
    message = await inbound(services, account["account_id"], "sid-shared")
    for r in await asyncio.wait_for(asyncio.gather(*waiting), 10):
        assert [e["data"]["id"] for e in r.json["data"]] == [message["id"]]
    assert len(reads_made) - before < 10  # 40 without sharing


async def _one_waiting(services, api, key, cursor):
    """A long-poll of another type already waiting: the hub listens, so its position is current."""
    first = asyncio.ensure_future(read(api, key, after=cursor, wait="30", types="contact.created"))
    await until(lambda: services.long_polls.waiting == 1)
    return first


async def test_a_long_poll_reads_once_when_no_round_ran_before_it_waits(services, api, account, monkeypatch,
                                                                        tmp_path):
    """Its first read stands when no round ran between it and the watch (whatever it missed is after the hub's
    position, and the next round wakes the watch): one read per long-poll cycle, not two (issue 37's bench)."""
    key = account["api_key"]
    cursor = (await read(api, key)).json["nextCursor"]
    first = await _one_waiting(services, api, key, cursor)
    reads_made = _count_reads(monkeypatch)
    waiting = asyncio.ensure_future(read(api, key, after=cursor, wait="30", types="message.created"))
    await until(lambda: services.long_polls.waiting == 2)
    assert len(reads_made) == 1
    message = await inbound(services, account["account_id"], "sid-1")
    r = await asyncio.wait_for(waiting, 10)
    assert [e["data"]["id"] for e in r.json["data"]] == [message["id"]]
    first.cancel()


async def test_an_event_read_by_a_round_before_a_long_poll_watches_still_answers_it(services, api, account,
                                                                                 monkeypatch, tmp_path):
    """A commit that a round reads after the long-poll's first read and before its watch wakes nobody: the
    long-poll reads again and answers it, rather than waiting for a later event."""
    key = account["api_key"]
    cursor = (await read(api, key)).json["nextCursor"]
    first = await _one_waiting(services, api, key, cursor)
    hub, committed = services.hub, []
    real_watch = hub.watch

    async def watch_after_a_round(account_id, **kwargs):
        if not committed:
            before = hub.position
            committed.append(await inbound(services, account["account_id"], "sid-between"))
            await until(lambda: hub.position != before)  # the round read it: it wakes only who watched then
        return await real_watch(account_id, **kwargs)

    monkeypatch.setattr(hub, "watch", watch_after_a_round)
    r = await asyncio.wait_for(read(api, key, after=cursor, wait="30", types="message.created"), 10)
    assert [e["data"]["id"] for e in r.json["data"]] == [committed[0]["id"]]
    first.cancel()


async def test_a_long_poll_wakes_for_an_event_another_process_commits(settings, services, api, account, tmp_path):
    """PostgreSQL with several processes: another process's commit reaches this one's long-poll by
    LISTEN/NOTIFY (this hub is not started, so no backstop poll could have found it)."""
    if not settings.uses_postgres:
        pytest.skip("one process holds a SQLite database")
    import server
    key = account["api_key"]
    cursor = (await read(api, key)).json["nextCursor"]
    other = await server.open_services(settings)
    try:
        waiting = asyncio.ensure_future(read(api, key, after=cursor, wait="30", types="message.created"))
        await asyncio.sleep(0.3)
        message = await inbound(other, account["account_id"], "sid-1")
        r = await asyncio.wait_for(waiting, 10)
        assert [e["data"]["id"] for e in r.json["data"]] == [message["id"]]
    finally:
        await other.close()


async def test_a_long_poll_with_nothing_answers_empty_with_its_cursor(services, api, account, tmp_path):
    key = account["api_key"]
    await inbound(services, account["account_id"], "sid-1")
    cursor = (await read(api, key)).json["nextCursor"]
    r = await read(api, key, after=cursor, wait="0.2")
    assert r.code == 200 and r.json == {"data": [], "nextCursor": cursor}


async def test_long_polls_are_bounded_per_key_and_account(services, api, account, tmp_path):
    key = account["api_key"]
    cursor = (await read(api, key)).json["nextCursor"]
    services.long_polls.per_key = 2
    waiting = [asyncio.ensure_future(read(api, key, after=cursor, wait="30")) for _ in range(2)]
    await asyncio.sleep(0.3)
    r = await read(api, key, after=cursor, wait="30")
    assert r.code == 429 and "wait" in r.json["error"]["message"] and r.headers["Retry-After"]
    await services.hub.stop()  # a server shutting down answers its long-polls at once
    for done in await asyncio.wait_for(asyncio.gather(*waiting), 10):
        assert done.code == 200 and done.json["data"] == []
    assert services.long_polls.waiting == 0


async def test_long_polls_in_all_take_at_most_their_share_of_the_connections(services, api, account, settings):
    """Long-polls are counted apart from the connections the API needs: at most --events-long-polls-share of
    --max-connections wait at once on a process, across accounts (429 with Retry-After beyond); the API
    still answers meanwhile."""
    from pydantic import ValidationError
    from services import accounts
    from settings import Settings
    assert services.long_polls.total == settings.events_long_polls_max == int(settings.max_connections * 0.25)
    with pytest.raises(ValidationError, match="events_long_polls_share"):
        Settings(live_sockets_share=0.8, events_long_polls_share=0.2)
    services.long_polls.total = 2  # as --max-connections 8: room for 2
    other = await accounts.create_account(services.db, services.box, services.keys, name="Other",
                                          email="owner@other.example", password="correct horse battery staple")
    cursors = {k: (await read(api, k)).json["nextCursor"] for k in (account["api_key"], other["api_key"])}
    waiting = [asyncio.ensure_future(read(api, k, after=c, wait="30")) for k, c in cursors.items()]
    await asyncio.sleep(0.3)
    key = other["api_key"]
    r = await read(api, key, after=cursors[key], wait="30")  # within its key's and account's bounds
    assert r.code == 429 and r.headers["Retry-After"] == "5", r.body
    assert "--events-long-polls-share" in r.json["error"]["message"] and "wait" in r.json["error"]["message"]
    assert (await read(api, key, after=cursors[key])).code == 200  # without wait: answered as ever
    await services.hub.stop()
    for done in await asyncio.wait_for(asyncio.gather(*waiting), 10):
        assert done.code == 200
    assert services.long_polls.waiting == 0


async def test_a_cursor_older_than_retention_is_410(services, api, account, tmp_path):
    key = account["api_key"]
    await inbound(services, account["account_id"], "sid-1")
    first = (await read(api, key, limit=1)).json["data"][0]["id"]
    for n in range(2, 5):
        await inbound(services, account["account_id"], f"sid-{n}")
    await services.db.write(_age_events, "2000-01-01T00:00:00.000Z")
    assert (await RetentionWorker(services).run_once())["live events"] > 0
    r = await read(api, key, after=first)
    assert r.code == 410 and r.json["error"]["code"] == "CURSOR_EXPIRED" and "after" in r.json["error"]["message"]
    assert (await read(api, key)).code == 200  # from the oldest kept


def _age_events(cx, created_at):
    cx.execute("UPDATE events SET created_at = ?", (created_at,))


async def test_erasure_leaves_only_contact_erased_in_kept_events(services, api, account, tmp_path):
    key = account["api_key"]
    contact = (await api.post("/v1/contacts", {"phone": "+14155552671", "firstName": "Grace",
                                               "email": "grace@example.org"}, key=key)).json
    await inbound(services, account["account_id"], "sid-1", body="my secret words")
    cursor = None
    r = await api.delete(f"/v1/contacts/{contact['id']}", key=key, headers={"Idempotency-Key": "erase"})
    assert r.code == 200, r.body
    events, _ = await read_all(api, key, after=cursor)
    assert [e["type"] for e in events if e["data"].get("contactId") == contact["id"]
            or e["data"].get("id") == contact["id"]] == ["contact.erased"]
    assert events[-1]["data"] == {"contactId": contact["id"]}
    stored = await _stored_data(services.db, account["account_id"])
    for secret in ("Grace", "grace@example.org", "+14155552671", "my secret words"):
        assert secret not in stored


@reads
def _stored_data(cx, account_id):
    return json.dumps([list(r) for r in cx.execute("SELECT type, data FROM events WHERE account_id = ?",
                                                   (account_id,))])


def _old_batch(cx, account_id):
    events.emit_in_tx(cx, account_id, events.MESSAGES_CREATED, {"campaignId": "cmp_old", "contactIds": ["ct_x"]})


async def test_a_stored_batch_without_messages_is_passed_over(services, api, account, tmp_path):
    """A campaign batch stored before batches named their messages has no public event: paging goes past it
    rather than stopping at it."""
    for _ in range(3):
        await services.db.write(_old_batch, account["account_id"])
    message = await inbound(services, account["account_id"], "sid-1")
    found, _ = await read_all(api, account["api_key"], limit=1, types="message.created")
    assert [e["data"]["id"] for e in found] == [message["id"]]


NOTIFY = "http://127.0.0.1:9/notifications"


async def test_every_notification_is_an_event_with_the_same_data(services, api, account, tmp_path):
    """contact.created, .updated, .tagged and conversation.handoff: each notification queued has its event,
    of the same type with the same data, and every event matches its type's schema (read_all)."""
    key = account["api_key"]
    types = ("contact.created", "contact.updated", "contact.tagged", "conversation.handoff")
    r = await api.patch("/v1/account/settings", {"notificationUrls": {t: NOTIFY for t in types}}, key=key)
    assert r.code == 200, r.body
    await configure(api, key, {"active": True, "handoffKeywords": ["human"]})
    contact = (await api.post("/v1/contacts", {"phone": "+14155550100"}, key=key)).json
    await api.patch(f"/v1/contacts/{contact['id']}", {"firstName": "Ada"}, key=key)
    listed = (await api.post("/v1/lists", {"name": "VIP"}, key=key)).json
    assert (await api.post(f"/v1/lists/{listed['id']}/contacts", {"contactId": contact["id"]}, key=key)).code < 300
    await say(api, services, key, "a human please")
    events, _ = await read_all(api, key)
    notifications = await services.db.read(fetch_all, "SELECT payload FROM outbox WHERE account_id = ? AND"
                                                       " kind = 'notification' ORDER BY id", (account["account_id"],))
    sent = [(n["event"], n["data"]) for n in (json.loads(r["payload"]) for r in notifications)]
    assert {t for t, _ in sent} == set(types)
    for pair in sent:
        assert pair in [(e["type"], e["data"]) for e in events]


async def test_a_campaigns_batches_are_one_event_per_message(services, api, account, runner, worker, receiver,
                                                             tmp_path):
    key = account["api_key"]
    await set_webhook(api, account, receiver.url)
    list_id, contact_ids = await make_list(services, account, people(3))
    receiver.answers = [(410, {}, b"gone")] * 3
    cursor = (await read(api, key)).json["nextCursor"]
    created = await create(api, account, list_id)
    await run_all(runner)
    await deliver_all(worker)
    events, _ = await read_all(api, key, after=cursor, types="message.created,message.updated", limit=2)
    made = [e["data"] for e in events if e["type"] == "message.created"]
    assert sorted(m["contactId"] for m in made) == sorted(contact_ids)
    assert {m["campaignId"] for m in made} == {created.json["campaignKey"] if "campaignKey" in created.json
                                               else made[0]["campaignId"]}
    assert {e["data"]["id"] for e in events if e["type"] == "message.updated"} == {m["id"] for m in made}
    assert (await api.post(f"/v1/campaigns/{created.json['id']}/retry-failed", key=key)).code == 200
    assert (await api.post(f"/v1/campaigns/{created.json['id']}/cancel", key=key)).code == 200
    cancelled, _ = await read_all(api, key, after=events[-1]["id"], types="message.updated")
    assert {e["data"]["status"] for e in cancelled} >= {"Cancelled"}


@pytest.mark.parametrize("event_type", sorted(EVENT_DATA))
def test_every_type_is_documented_once(event_type):
    assert EVENT_DATA[event_type].__doc__


async def test_every_event_type_can_be_subscribed_with_the_events_data(services, api, account, worker, receiver,
                                                                       tmp_path):
    """Issue 37: notificationUrls takes every event type (an unknown one is 400 naming it, as before), and
    each notification a real receiver gets is an event of the stream, of the same type with the same data
    (a message's: the message as GET /v1/messages/{id} shows it when sent); contact.erased lets the receiver
    erase too."""
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"message.deleted": receiver.url}}, key=key)
    assert r.code == 400 and "notificationUrls.message.deleted" in r.json["error"]["message"], r.body
    urls = {t: f"{receiver.url}/{t}" for t in event_stream.TYPES}
    r = await api.patch("/v1/account/settings", {"notificationUrls": urls, "customChannelWebhookUrl": f"{receiver.url}/replies"},
                        key=key)
    assert r.code == 200 and r.json["notificationUrls"] == urls, r.body
    await configure(api, key, {"active": True, "handoffKeywords": ["human"]}, webhook=f"{receiver.url}/replies")
    contact = (await api.post("/v1/contacts", {"phone": "+14155550100"}, key=key)).json
    await api.patch(f"/v1/contacts/{contact['id']}", {"firstName": "Ada"}, key=key)
    listed = (await api.post("/v1/lists", {"name": "VIP"}, key=key)).json
    assert (await api.post(f"/v1/lists/{listed['id']}/contacts", {"contactId": contact["id"]}, key=key)).code < 300
    await say(api, services, key, "a human please", fromId="+14155550100")  # message.created, handoff, replies
    r = await api.patch(f"/v1/conversations/{contact['id']}", {"status": "resolved"}, key=key)
    assert r.code == 200, r.body
    twin = (await api.post("/v1/contacts", {"email": "ada@example.com"}, key=key)).json  # contact.merged
    assert (await api.post(f"/v1/contacts/{contact['id']}/merge", {"otherId": twin["id"]}, key=key)).code == 200
    await deliver_all(worker)  # the bot's reply turns Sent: message.updated

    def received():
        requests = [q for q in receiver.requests if q["path"] != "/hook/replies"]
        notes = [json.loads(q["body"]) for q in requests]
        assert [q["path"] for q in requests] == [f"/hook/{n['event']}" for n in notes]  # each to its type's URL
        return [(n["event"], n["data"]) for n in notes]

    events, _ = await read_all(api, key)
    stream = [(e["type"], e["data"]) for e in events]
    got = received()
    # Not made here: contact.erased (below), subaccount.auto_recharge (agencies), message.failed (a delivery
    # failed for good: tests/test_delivery_bridges.py), conversation.sla_breached (tests/test_sla.py),
    # csat.submitted (tests/test_csat.py).
    assert {t for t, _ in got} == set(event_stream.TYPES) - {"contact.erased", "subaccount.auto_recharge",
                                                            "message.failed", "conversation.sla_breached",
                                                            "csat.submitted"}, got

    def same(pair):  # a message is filled in when sent, or read: its status may have moved on between the two
        kind, data = pair
        return (kind, {k: v for k, v in data.items() if k not in ("status", "error")} if kind.startswith("message.")
                else data)
    for pair in got:
        assert same(pair) in [same(e) for e in stream], pair
    assert [t for t, _ in got].count("message.created") == len([t for t, _ in stream if t == "message.created"])

    r = await api.delete(f"/v1/contacts/{contact['id']}", key=key, headers={"Idempotency-Key": "erase"})
    assert r.code == 200, r.body
    await deliver_all(worker)
    assert received()[-1] == ("contact.erased", {"contactId": contact["id"]})
