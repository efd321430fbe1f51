"""A conversation's status and assignee (issue 21) through the API and the services: PATCH and bulk change,
tenancy, bad input naming the field with nothing changed, the reopen-on-inbound rule, snooze presets and
the SnoozeWaker, the inbox views Mine, Unassigned, Resolved and Snoozed, and a deactivated user's waiting
conversations returning to the unassigned queue."""
import asyncio
import json
from datetime import datetime, timedelta, timezone

import pytest

from common.ids import iso, utcnow
from services import accounts, conversation_status, inbox, messaging, users
from storage.db import fetch_all, reads
from storage.events import last_seq
from storage.users import update_user
from tests.team_users import add_user
from tests.inbound_helpers import inbound
from tests.live_helpers import FakeTransport
from tests.ui_helpers import PASSWORD

URL = "/v1/conversations"


@pytest.fixture
def team(io_loop, services):
    """An account with two users (alice the owner, bob) and two conversations; another account with its own
    user and conversation."""
    async def make():
        acme = await accounts.create_account(services.db, services.box, services.keys, name="Acme",
                                             email="alice@acme.example", password=PASSWORD)
        bob = await add_user(services, acme["account_id"], "bob@acme.example")
        ann = await inbound(services, acme["account_id"], "+14155550001", "Hello from Ann")
        ben = await inbound(services, acme["account_id"], "+14155550002", "Hello from Ben")
        other = await accounts.create_account(services.db, services.box, services.keys, name="Other",
                                              email="eve@other.example", password=PASSWORD)
        eve = await services.db.read(_owner, other["account_id"])
        theirs = await inbound(services, other["account_id"], "+14155550003", "Theirs")
        return {"account": acme, "key": acme["api_key"], "alice": await services.db.read(_owner, acme["account_id"]),
                "bob": bob, "ann": ann["contact_id"], "ben": ben["contact_id"], "other_key": other["api_key"],
                "other_account": other["account_id"], "eve": eve, "theirs": theirs["contact_id"]}
    return io_loop.run_sync(make)


def _owner(cx, account_id):
    return cx.execute("SELECT id FROM users WHERE account_id = ? AND is_owner = 1", (account_id,)).fetchone()[0]


@reads
def _state(cx, contact_id):
    return fetch_all(cx, "SELECT status, snoozed_until, assignee_user_id FROM conversations WHERE contact_id = ?",
                     (contact_id,))[0]


@reads
def _updates(cx, account_id):
    return [row[0] for row in cx.execute("SELECT data FROM events WHERE account_id = ? AND type = ? ORDER BY seq",
                                         (account_id, "conversation.updated"))]


async def test_patch_changes_status_and_assignee_and_emits_an_event(api, services, team):
    r = await api.patch(f"{URL}/{team['ann']}", {"status": "resolved", "assigneeUserId": team["bob"]}, key=team["key"])
    assert r.code == 200, r.body
    assert (r.json["id"], r.json["status"], r.json["assigneeUserId"]) == (team["ann"], "resolved", team["bob"])
    got = await api.get(f"{URL}/{team['ann']}", key=team["key"])
    assert got.json == r.json
    events = await _updates(services.db, team["account"]["account_id"])
    assert events[-1] == f'{{"contactId":"{team["ann"]}","status":"resolved","assigneeUserId":"{team["bob"]}"}}'

    again = await api.patch(f"{URL}/{team['ann']}", {"status": "resolved"}, key=team["key"])
    assert again.code == 200 and len(await _updates(services.db, team["account"]["account_id"])) == len(events)

    unassigned = await api.patch(f"{URL}/{team['ann']}", {"assigneeUserId": None}, key=team["key"])
    assert (unassigned.json["assigneeUserId"], unassigned.json["status"]) == (None, "resolved")


async def test_snooze_needs_a_future_time_and_other_statuses_clear_it(api, services, team):
    until = (utcnow() + timedelta(hours=2)).replace(microsecond=0)
    r = await api.patch(f"{URL}/{team['ann']}", {"snoozedUntil": until.isoformat()}, key=team["key"])
    assert (r.code, r.json["status"], r.json["snoozedUntil"]) == (200, "snoozed", iso(until))
    r = await api.patch(f"{URL}/{team['ann']}", {"status": "pending"}, key=team["key"])
    assert (r.json["status"], r.json["snoozedUntil"]) == ("pending", None)


@pytest.mark.parametrize("body, field", [
    ({"status": "closed"}, "status"),
    ({"status": "snoozed"}, "snoozedUntil"),
    ({"status": "open", "snoozedUntil": "2999-01-01T00:00:00Z"}, "snoozedUntil"),
    ({"snoozedUntil": "2001-01-01T00:00:00Z"}, "snoozedUntil"),
    ({"snoozedUntil": "tomorrow"}, "snoozedUntil"),
    ({"assigneeUserId": "usr_nobody"}, "assigneeUserId"),
    ({"assigneeUserId": 7}, "assigneeUserId"),
    ({"status": "resolved", "priority": "high"}, "priority"),
    ({}, "nothing to change"),
])
async def test_bad_input_is_400_naming_the_field_and_changes_nothing(api, services, team, body, field):
    before = await _state(services.db, team["ann"])
    r = await api.patch(f"{URL}/{team['ann']}", body, key=team["key"])
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR" and field in r.json["error"]["message"]
    bulk = await api.post(f"{URL}/bulk", {"conversationIds": [team["ann"]], **body}, key=team["key"])
    assert bulk.code == 400 and field in bulk.json["error"]["message"]
    assert await _state(services.db, team["ann"]) == before


async def test_another_accounts_key_sees_and_changes_nothing(api, services, team):
    for key, contact_id in ((team["other_key"], team["ann"]), (team["key"], team["theirs"])):
        assert (await api.get(f"{URL}/{contact_id}", key=key)).code == 404
        r = await api.patch(f"{URL}/{contact_id}", {"status": "resolved"}, key=key)
        assert (r.code, r.json["error"]["code"]) == (404, "CONVERSATION_NOT_FOUND")
    # Another account's user is no assignee here; a bulk change naming another account's conversation is
    # refused whole (the own conversation in it stays as it was).
    r = await api.patch(f"{URL}/{team['ann']}", {"assigneeUserId": team["eve"]}, key=team["key"])
    assert r.code == 400 and "assigneeUserId" in r.json["error"]["message"]
    r = await api.post(f"{URL}/bulk", {"conversationIds": [team["ben"], team["theirs"]], "status": "resolved"},
                       key=team["key"])
    assert (r.code, r.json["error"]["code"]) == (404, "CONVERSATION_NOT_FOUND")
    assert team["theirs"] in r.json["error"]["message"]
    for contact_id in (team["ann"], team["ben"], team["theirs"]):
        assert await _state(services.db, contact_id) == {"status": "open", "snoozed_until": None,
                                                         "assignee_user_id": None}
    assert await _updates(services.db, team["other_account"]) == []


async def test_a_deactivated_user_is_no_assignee(api, services, team):
    account_id = team["account"]["account_id"]
    await users.update(services.db, account_id, team["bob"], changes={"active": False}, by={"actor": "operator"},
                       actor_role="owner")
    r = await api.patch(f"{URL}/{team['ann']}", {"assigneeUserId": team["bob"]}, key=team["key"])
    assert r.code == 400 and "assigneeUserId: no active user" in r.json["error"]["message"]
    assert await _state(services.db, team["ann"]) == {"status": "open", "snoozed_until": None, "assignee_user_id": None}
    assert team["bob"] not in [u["id"] for u in await conversation_status.assignable_users(services, account_id)]


async def test_bulk_changes_every_conversation_in_one_go(api, services, team):
    r = await api.post(f"{URL}/bulk", {"conversationIds": [team["ann"], team["ben"]], "assigneeUserId": team["alice"]},
                       key=team["key"])
    assert r.code == 200, r.body
    assert [(c["id"], c["assigneeUserId"]) for c in r.json["data"]] == [(team["ann"], team["alice"]),
                                                                        (team["ben"], team["alice"])]
    assert len(await _updates(services.db, team["account"]["account_id"])) == 2


async def test_an_inbound_message_reopens_a_resolved_or_snoozed_conversation(services, team):
    account_id = team["account"]["account_id"]
    await conversation_status.change(services, account_id, [team["ann"]], status="resolved")
    await conversation_status.change(services, account_id, [team["ben"]], status="snoozed",
                                     snoozed_until=utcnow() + timedelta(days=1))
    await accounts.update_settings(services.db, account_id, {"customChannelWebhookUrl": "https://127.0.0.1:9/hook"})
    await messaging.send_reply(services, account_id, team["ann"], "We are done here", author="api")
    assert (await _state(services.db, team["ann"]))["status"] == "resolved"  # our own reply does not reopen it
    await inbound(services, account_id, "+14155550001", "One more question")
    await inbound(services, account_id, "+14155550002", "Are you there?")
    assert await _state(services.db, team["ann"]) == {"status": "open", "snoozed_until": None, "assignee_user_id": None}
    assert await _state(services.db, team["ben"]) == {"status": "open", "snoozed_until": None, "assignee_user_id": None}

    await conversation_status.change(services, account_id, [team["ann"]], status="pending")
    await inbound(services, account_id, "+14155550001", "Still waiting")
    assert (await _state(services.db, team["ann"]))["status"] == "pending"  # pending is not put away


async def test_the_snooze_waker_reopens_a_conversation_when_its_time_comes(services, team):
    account_id = team["account"]["account_id"]
    now = utcnow()
    await conversation_status.change(services, account_id, [team["ann"]], status="snoozed",
                                     snoozed_until=now + timedelta(minutes=30))
    events = len(await _updates(services.db, account_id))
    waker = conversation_status.SnoozeWaker(services, clock=lambda: now + timedelta(minutes=10))
    assert await waker.round() == waker.poll_seconds  # 20 minutes to go: it sleeps a poll, at most
    waker.clock = lambda: now + timedelta(minutes=29)
    assert 59 <= await waker.round() <= 60  # then exactly until the snooze ends
    assert (await _state(services.db, team["ann"]))["status"] == "snoozed"
    waker.clock = lambda: now + timedelta(minutes=31)
    assert await waker.round() is None  # nothing else snoozed
    assert (await _state(services.db, team["ann"]))["status"] == "open"
    updates = await _updates(services.db, account_id)
    assert len(updates) == events + 1 and '"status":"open"' in updates[-1]


def test_snooze_presets_count_in_the_viewers_zone():
    wednesday = datetime(2026, 11, 25, 22, 30, tzinfo=timezone.utc)
    assert conversation_status.snooze_until("1h", wednesday) == wednesday + timedelta(hours=1)
    assert conversation_status.snooze_until("tomorrow", wednesday) == datetime(2026, 11, 26, 9, tzinfo=timezone.utc)
    # 22:30 UTC is already Thursday 07:30 in UTC+9: tomorrow is Friday 9:00 there (00:00 UTC).
    assert conversation_status.snooze_until("tomorrow", wednesday, 9 * 60) == datetime(2026, 11, 27, 0,
                                                                                      tzinfo=timezone.utc)
    assert conversation_status.snooze_until("next_week", wednesday, -5 * 60) == datetime(2026, 11, 30, 14,
                                                                                        tzinfo=timezone.utc)
    with pytest.raises(Exception, match="snooze must be one of"):
        conversation_status.snooze_until("later", wednesday)


async def test_views_mine_unassigned_resolved_and_snoozed(services, team):
    account_id = team["account"]["account_id"]
    await conversation_status.change(services, account_id, [team["ann"]], assignee_user_id=team["bob"])

    async def view(name, user):
        page = await inbox.list_conversations(services, account_id, filter=name, user_id=user)
        return [c["contact_id"] for c in page["items"]], page["counts"]

    assert (await view("mine", team["bob"]))[0] == [team["ann"]]
    assert (await view("mine", team["alice"]))[0] == []
    assert (await view("unassigned", team["alice"]))[0] == [team["ben"]]
    await conversation_status.change(services, account_id, [team["ann"]], status="resolved")
    await conversation_status.change(services, account_id, [team["ben"]], status="snoozed",
                                     snoozed_until=utcnow() + timedelta(hours=1))
    assert (await view("mine", team["bob"]))[0] == []  # put away: out of Mine and Needs reply
    assert (await view("needs_reply", team["bob"]))[0] == []
    assert (await view("resolved", team["bob"]))[0] == [team["ann"]]
    ids, counts = await view("snoozed", team["bob"])
    assert ids == [team["ben"]]
    assert counts == {"all": 2, "needs_reply": 0, "mine": 0, "unassigned": 0, "resolved": 1, "snoozed": 1,
                      "due_soon": 0, "unread": 2, "failed": 0, "paused": 0, "handed_off": 0}
    assert set((await view("all", team["bob"]))[0]) == {team["ann"], team["ben"]}


def _live_updates(transport):
    """The conversation.updated data a page was sent, in order."""
    frames = [json.loads(frame) for frame in transport.frames]
    return [e["data"] for f in frames if f["type"] == "events" for e in f["events"]
            if e["type"] == "conversation.updated"]


async def test_deactivating_a_user_returns_their_waiting_conversations_to_the_queue(api, services, team):
    """Open, pending and snoozed conversations of a deactivated user become unassigned in the deactivation's
    transaction, each with its live conversation.updated; resolved ones keep the assignee; other assignees and
    other accounts are untouched; reactivating reassigns nothing."""
    account_id, bob = team["account"]["account_id"], team["bob"]
    cat = (await inbound(services, account_id, "+14155550004", "Hello from Cat"))["contact_id"]
    dan = (await inbound(services, account_id, "+14155550005", "Hello from Dan"))["contact_id"]
    await conversation_status.change(services, account_id, [team["ann"], team["ben"], cat], assignee_user_id=bob)
    await conversation_status.change(services, account_id, [team["ben"]], status="snoozed",
                                     snoozed_until=utcnow() + timedelta(days=1))
    await conversation_status.change(services, account_id, [cat], status="resolved")
    await conversation_status.change(services, account_id, [dan], assignee_user_id=team["alice"])
    await conversation_status.change(services, team["other_account"], [team["theirs"]], assignee_user_id=team["eve"])
    hub, page, their_page = services.hub, FakeTransport(), FakeTransport()
    hub.min_interval = 30  # rounds run when this test says
    hub._last_round = asyncio.get_running_loop().time()
    assert await hub.subscribe(account_id, team["alice"], await last_seq(services.db, account_id), page)
    assert await hub.subscribe(team["other_account"], team["eve"], await last_seq(services.db, team["other_account"]),
                               their_page)

    r = await api.patch(f"/v1/users/{bob}", {"active": False}, key=team["key"])
    assert r.code == 200, r.body
    assert set(r.json) == {"id", "email", "name", "role", "active", "invitationPending", "available", "capacity",
                           "lastSeenAt", "emailNotifications", "createdAt"} and r.json["active"] is False
    expected = {team["ann"]: {"status": "open", "snoozed_until": None, "assignee_user_id": None},
                cat: {"status": "resolved", "snoozed_until": None, "assignee_user_id": bob},
                dan: {"status": "open", "snoozed_until": None, "assignee_user_id": team["alice"]},
                team["theirs"]: {"status": "open", "snoozed_until": None, "assignee_user_id": team["eve"]}}
    for contact_id, state in expected.items():
        assert await _state(services.db, contact_id) == state, contact_id
    ben = await _state(services.db, team["ben"])
    assert (ben["status"], ben["assignee_user_id"]) == ("snoozed", None) and ben["snoozed_until"]
    page_view = await inbox.list_conversations(services, account_id, filter="unassigned", user_id=team["alice"])
    assert [c["contact_id"] for c in page_view["items"]] == [team["ann"]]  # ben too, once it wakes

    await hub._round()
    assert sorted(_live_updates(page), key=lambda d: d["contactId"]) == sorted(
        [{"contactId": team["ann"], "status": "open", "assigneeUserId": None},
         {"contactId": team["ben"], "status": "snoozed", "assigneeUserId": None}], key=lambda d: d["contactId"])
    assert _live_updates(their_page) == []
    audit = (await api.get("/v1/audit", key=team["key"])).json["data"]
    assert (audit[0]["action"], audit[0]["detail"]) == (
        "user.updated", {"email": "bob@acme.example", "active": [True, False], "unassignedConversations": 2})

    events = await _updates(services.db, account_id)
    r = await api.patch(f"/v1/users/{bob}", {"active": True}, key=team["key"])
    assert r.code == 200 and r.json["active"] is True
    for contact_id, state in expected.items():
        assert await _state(services.db, contact_id) == state, contact_id
    assert (await _state(services.db, team["ben"]))["assignee_user_id"] is None
    assert await _updates(services.db, account_id) == events
    audit = (await api.get("/v1/audit", key=team["key"])).json["data"]
    assert audit[0]["detail"] == {"email": "bob@acme.example", "active": [False, True]}


@pytest.mark.postgres_only
async def test_an_assignment_racing_a_deactivation_never_leaves_the_user_assigned(api, services, team):
    """The assignee is checked inside the assignment's transaction, under the lock the deactivation takes: an
    assignment that starts while a deactivation is uncommitted waits for it and is then refused. (SQLite's one
    writer runs the two one after the other already.)"""
    account_id, bob = team["account"]["account_id"], team["bob"]
    cx = services.db.connect_sync()
    try:
        cx.execute("BEGIN")
        update_user.sync(cx, account_id, bob, {"active": 0}, None, True)
        assigning = asyncio.ensure_future(api.patch(f"{URL}/{team['ann']}", {"assigneeUserId": bob}, key=team["key"]))
        # Time for the assignment to reach its check: a check outside the lock would commit bob meanwhile.
        await asyncio.sleep(0.5)
        cx.execute("COMMIT")
    finally:
        cx.close()
    r = await assigning
    assert r.code == 400 and "assigneeUserId: no active user" in r.json["error"]["message"], r.body
    assert (await _state(services.db, team["ann"]))["assignee_user_id"] is None
