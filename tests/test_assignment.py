"""Automatic assignment with capacity (issue 40): the settings and the users' available and capacity through the
API (bad input 400 naming the field, nothing changed), balanced and round robin spreads, the queue (oldest first)
draining as agents free up, conversations assigned or unassigned by hand left alone, reopened ones queued, away
agents (their switch, or no live page for awayAfterMinutes) skipped, every automatic assignment audited with
its reason and emitting conversation.updated, and two connections racing never assigning over capacity."""
import asyncio
import json
import threading
from datetime import timedelta

import pytest

from common.errors import DomainError
from common.ids import iso, utcnow
from services import accounts, contacts, conversation_status, users
from storage import assignment as assignment_store
from storage.erasure import erase_contact
from storage.db import fetch_all, reads
from tests.team_users import add_user
from tests.inbound_helpers import inbound
from tests.ui_helpers import PASSWORD
from tests.waiting import until

SETTINGS = "/v1/account/settings"


@pytest.fixture
def team(io_loop, services):
    """An account (its owner away: available false) with three agents, automatic assignment balanced and never
    away for idleness; another account with an agent of its own."""
    async def make():
        acme = await accounts.create_account(services.db, services.box, services.keys, name="Acme",
                                             email="owner@acme.example", password=PASSWORD)
        account_id = acme["account_id"]
        owner = (await users.list_users(services.db, account_id))["data"][0]["id"]
        await users.update(services.db, account_id, owner, changes={"available": False}, by=None,
                           actor_role="owner")
        agents = [await add_user(services, account_id, f"{name}@acme.example") for name in ("amy", "bo", "cy")]
        await accounts.update_settings(services.db, account_id,
                                       {"assignment": {"mode": "balanced", "awayAfterMinutes": None}})
        other = await accounts.create_account(services.db, services.box, services.keys, name="Other",
                                              email="eve@other.example", password=PASSWORD)
        eve = await add_user(services, other["account_id"], "ed@other.example")
        return {"account_id": account_id, "key": acme["api_key"], "owner": owner, "agents": agents,
                "other": other, "eve": eve}
    return io_loop.run_sync(make)


@reads
def _conversations(cx, account_id):
    return fetch_all(cx, "SELECT contact_id, status, assignee_user_id, queued_at FROM conversations"
                         " WHERE account_id = ? ORDER BY contact_id", (account_id,))


@reads
def _audit(cx, account_id):
    return fetch_all(cx, "SELECT actor, actor_label, subject_id, detail FROM audit_log WHERE account_id = ?"
                         " AND action = 'conversation.assigned' ORDER BY id", (account_id,), json_columns=("detail",))


@reads
def _assignment_events(cx, account_id):
    return [json.loads(row[0]) for row in cx.execute(
        "SELECT data FROM events WHERE account_id = ? AND type = 'conversation.updated' ORDER BY seq", (account_id,))
        if "assigneeUserId" in json.loads(row[0])]


async def _set_capacities(services, team, *capacities):
    for user_id, capacity in zip(team["agents"], capacities):
        await users.update(services.db, team["account_id"], user_id, changes={"capacity": capacity}, by=None,
                           actor_role="owner")


async def _arrive(services, account_id, n, prefix="+1415555"):
    return [(await inbound(services, account_id, f"{prefix}{i:04d}", f"Hello {i}"))["contact_id"] for i in range(n)]


def _loads(rows):
    loads = {}
    for row in rows:
        if row["assignee_user_id"] and row["status"] in ("open", "pending"):
            loads[row["assignee_user_id"]] = loads.get(row["assignee_user_id"], 0) + 1
    return loads


async def test_settings_and_user_fields_through_the_api_and_bad_input(api, services, team):
    key, amy = team["key"], team["agents"][0]
    got = await api.patch(SETTINGS, {"assignment": {"mode": "round_robin"}}, key=key)
    assert got.code == 200, got.body
    assert got.json["assignment"] == {"mode": "round_robin", "awayAfterMinutes": 30}
    for bad, field in (({"mode": "fastest"}, "assignment.mode"), ({"mode": "balanced", "awayAfterMinutes": 0},
                                                                  "assignment.awayAfterMinutes"),
                       ({"mode": "balanced", "awayAfterMinutes": 1.5}, "assignment.awayAfterMinutes")):
        r = await api.patch(SETTINGS, {"assignment": bad}, key=key)
        assert r.code == 400 and field in r.json["error"]["message"], r.body
    account = await api.get("/v1/account", key=key)
    assert account.json["settings"]["assignment"] == {"mode": "round_robin", "awayAfterMinutes": 30}  # unchanged

    r = await api.patch(f"/v1/users/{amy}", {"capacity": 3, "available": False}, key=key)
    assert r.code == 200, r.body
    assert (r.json["capacity"], r.json["available"], r.json["lastSeenAt"]) == (3, False, None)
    for bad in (-1, 2.5, "3", True, 10_001):
        r = await api.patch(f"/v1/users/{amy}", {"capacity": bad}, key=key)
        assert r.code == 400 and "capacity" in r.json["error"]["message"], (bad, r.body)
    r = await api.patch(f"/v1/users/{amy}", {"available": "yes"}, key=key)
    assert r.code == 400 and "available" in r.json["error"]["message"]
    shown = await api.get(f"/v1/users/{amy}", key=key)
    assert (shown.json["capacity"], shown.json["available"]) == (3, False)
    r = await api.patch(f"/v1/users/{amy}", {"capacity": None, "available": True}, key=key)
    assert (r.json["capacity"], r.json["available"]) == (None, True)
    r = await api.patch(f"/v1/users/{team['eve']}", {"capacity": 1}, key=key)
    assert r.code == 404  # another account's user


async def test_balanced_spreads_by_capacity_and_the_queue_drains_oldest_first(services, team):
    account_id, (amy, bo, _cy) = team["account_id"], team["agents"]
    await _set_capacities(services, team, 1, 2, 0)  # cy takes nothing (capacity 0); the owner is away
    arrived = await _arrive(services, account_id, 5)
    await services.assigner.round()
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert _loads(rows.values()) == {amy: 1, bo: 2}
    waiting = sorted((row["queued_at"], cid) for cid, row in rows.items() if row["queued_at"])
    assert [cid for _, cid in waiting] == arrived[3:]  # the first three went, the two newest wait
    audit = await _audit(services.db, account_id)
    assert [(a["actor"], a["actor_label"]) for a in audit] == [("assignment", "Automatic assignment")] * 3
    assert sorted(a["subject_id"] for a in audit) == sorted(arrived[:3])  # ids within one millisecond: any order
    assert sorted(a["detail"]["reason"] for a in audit)[0] == "balanced: fewest open conversations (0 open, capacity 1)"
    assert {e["contactId"]: e["assigneeUserId"] for e in await _assignment_events(services.db, account_id)} == \
        {cid: rows[cid]["assignee_user_id"] for cid in arrived[:3]}

    bos = [cid for cid in arrived[:3] if rows[cid]["assignee_user_id"] == bo]
    await conversation_status.change(services, account_id, [bos[0]], status="resolved")
    await services.assigner.round()
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert rows[arrived[3]]["assignee_user_id"] == bo and rows[arrived[4]]["queued_at"]  # the oldest first

    until_later = utcnow() + timedelta(hours=1)
    amys = [cid for cid in arrived if rows[cid]["assignee_user_id"] == amy]
    await conversation_status.change(services, account_id, amys, status="snoozed", snoozed_until=until_later)
    await services.assigner.round()
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert rows[arrived[4]]["assignee_user_id"] == amy and not rows[arrived[4]]["queued_at"]


@reads
def _load_counters(cx, account_id):
    """{user id: users.open_load} of the account's users whose counter is not 0, and {user id: their open and
    pending conversations} counted."""
    kept = {row[0]: row[1] for row in cx.execute("SELECT id, open_load FROM users WHERE account_id = ?"
                                                 " AND open_load <> 0", (account_id,))}
    counted = {row[0]: row[1] for row in cx.execute(
        "SELECT assignee_user_id, COUNT(*) FROM conversations WHERE account_id = ? AND assignee_user_id IS NOT NULL"
        " AND status IN ('open', 'pending') GROUP BY assignee_user_id", (account_id,))}
    return kept, counted


async def test_a_conversation_is_assigned_on_the_write_of_the_message_that_opens_it(services, team):
    account_id, (amy, bo, cy) = team["account_id"], team["agents"]
    await _set_capacities(services, team, 1, 1, 0)
    first, second = await _arrive(services, account_id, 2)  # no Assigner round: the messages' own writes
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert (rows[first]["assignee_user_id"], rows[second]["assignee_user_id"]) == (amy, bo)
    assert not any(row["queued_at"] for row in rows.values())
    audit = await _audit(services.db, account_id)
    assert [(a["subject_id"], a["actor"], a["detail"]["reason"], a["detail"]["queuedAt"]) for a in audit] == [
        (first, "assignment", "balanced: fewest open conversations (0 open, capacity 1)", None),
        (second, "assignment", "balanced: fewest open conversations (0 open, capacity 1)", None)]
    assert [(e["contactId"], e["assigneeUserId"]) for e in await _assignment_events(services.db, account_id)] == \
        [(first, amy), (second, bo)]

    [third] = await _arrive(services, account_id, 1, "+1415559")  # nobody free: it waits
    await _set_capacities(services, team, 2, 1, 0)  # amy has room again, the Assigner has not run yet
    [fourth] = await _arrive(services, account_id, 1, "+1415560")  # behind the one that waits, not before it
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert rows[third]["queued_at"] and rows[fourth]["queued_at"] and not rows[fourth]["assignee_user_id"]
    await services.assigner.round()
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert rows[third]["assignee_user_id"] == amy and rows[fourth]["queued_at"]
    await conversation_status.change(services, account_id, [second], status="resolved", assignee_user_id=None)
    await services.assigner.round()
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert rows[fourth]["assignee_user_id"] == bo and not rows[fourth]["queued_at"]

    # The resolved one reopens with its contact's message while cy has room: cy takes it on that write.
    await _set_capacities(services, team, 2, 1, 1)
    await inbound(services, account_id, "+14155550001", "Me again")
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert (rows[second]["status"], rows[second]["assignee_user_id"], rows[second]["queued_at"]) == ("open", cy, None)
    assert (await _audit(services.db, account_id))[-1]["subject_id"] == second
    kept, counted = await _load_counters(services.db, account_id)
    assert kept == counted == {amy: 2, bo: 1, cy: 1}


async def test_the_loads_kept_equal_the_loads_counted_after_a_mixed_concurrent_workload(services, team):
    """New contacts assigned on their writes and waiting, reopenings, resolves, hand (un)assignments, an Assigner
    round, a capacity raised, an agent away and one deactivated, a merge and an erasure, all at once (PostgreSQL:
    on several connections): every agent's counter is their open and pending conversations, and nothing failed but
    for a conversation another change had taken away."""
    account_id, (amy, bo, cy) = team["account_id"], team["agents"]
    await _set_capacities(services, team, 3, 2, None)
    known = await _arrive(services, account_id, 8)
    await conversation_status.change(services, account_id, known[:2], status="resolved")
    work = [inbound(services, account_id, f"+1415561{i:04d}", "New") for i in range(10)]
    work += [inbound(services, account_id, f"+1415555{i:04d}", "Again") for i in range(4)]
    work += [conversation_status.change(services, account_id, known[2:4], status="resolved"),
             conversation_status.change(services, account_id, [known[4]], assignee_user_id=cy),
             conversation_status.change(services, account_id, [known[5]], assignee_user_id=None),
             conversation_status.change(services, account_id, [known[1]], status="open"),
             services.assigner.round(),
             users.update(services.db, account_id, bo, changes={"capacity": 6}, by=None, actor_role="owner"),
             users.update(services.db, account_id, cy, changes={"available": False}, by=None, actor_role="owner"),
             users.update(services.db, account_id, amy, changes={"active": False}, by=None, actor_role="owner"),
             contacts.merge_contacts(services.db, account_id, known[6], known[7]),
             erase_contact(services.db, account_id, known[3])]
    results = await asyncio.gather(*work, return_exceptions=True)
    assert all(not isinstance(r, Exception) or isinstance(r, DomainError) for r in results), results
    await services.assigner.round()
    kept, counted = await _load_counters(services.db, account_id)
    assert kept == counted and sum(counted.values()) > 0


async def test_raised_capacity_and_an_agent_back_take_waiting_conversations(api, services, team):
    account_id, key, (amy, _bo, cy) = team["account_id"], team["key"], team["agents"]
    await _set_capacities(services, team, 0, 0, 0)
    await users.update(services.db, account_id, cy, changes={"available": False, "capacity": None}, by=None,
                       actor_role="owner")
    arrived = await _arrive(services, account_id, 3)
    await services.assigner.round()
    assert all(row["queued_at"] and not row["assignee_user_id"]
               for row in await _conversations(services.db, account_id))
    assert (await api.patch(f"/v1/users/{amy}", {"capacity": 1}, key=key)).code == 200
    await services.assigner.round()
    assert _loads(await _conversations(services.db, account_id)) == {amy: 1}
    assert (await api.patch(f"/v1/users/{cy}", {"available": True}, key=key)).code == 200
    await services.assigner.round()
    rows = await _conversations(services.db, account_id)
    assert _loads(rows) == {amy: 1, cy: 2} and not any(row["queued_at"] for row in rows)
    assert len(await _audit(services.db, account_id)) == len(arrived)
    other = await _conversations(services.db, team["other"]["account_id"])
    assert other == []  # nothing crossed accounts


async def test_round_robin_takes_turns(services, team):
    account_id, agents = team["account_id"], team["agents"]
    await accounts.update_settings(services.db, account_id,
                                   {"assignment": {"mode": "round_robin", "awayAfterMinutes": None}})
    first = await _arrive(services, account_id, 2, "+1415556")
    await services.assigner.round()
    await conversation_status.change(services, account_id, first, status="resolved")  # loads back to 0
    later = await _arrive(services, account_id, 4, "+1415557")
    await services.assigner.round()
    by_contact = {row["contact_id"]: row["assignee_user_id"] for row in await _conversations(services.db, account_id)}
    order = [by_contact[cid] for cid in first + later]
    assert order == [agents[0], agents[1], agents[2], agents[0], agents[1], agents[2]]
    audit = await _audit(services.db, account_id)
    assert audit[-1]["detail"]["reason"].startswith("round robin: longest since an automatic assignment")


async def test_hand_assignments_are_left_alone_and_reopened_conversations_wait(services, team):
    account_id, (amy, bo, _cy) = team["account_id"], team["agents"]
    await _set_capacities(services, team, 0, 0, 0)  # nobody takes anything: what waits stays visible
    by_hand, unassigned_by_hand, resolved_unassigned, resolved_assigned = await _arrive(services, account_id, 4)
    await conversation_status.change(services, account_id, [by_hand], assignee_user_id=amy)
    await conversation_status.change(services, account_id, [unassigned_by_hand], assignee_user_id=None)
    await conversation_status.change(services, account_id, [resolved_unassigned], status="resolved")
    await conversation_status.change(services, account_id, [resolved_assigned], status="resolved",
                                     assignee_user_id=bo)
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert not any(row["queued_at"] for row in rows.values())
    await _set_capacities(services, team, None, None, None)
    await services.assigner.round()
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert (rows[by_hand]["assignee_user_id"], rows[unassigned_by_hand]["assignee_user_id"]) == (amy, None)
    assert await _audit(services.db, account_id) == []

    # The contacts write again: both resolved ones reopen; the unassigned one waits and is assigned, the other
    # stays with whoever handled it.
    for i in (2, 3):
        await inbound(services, account_id, f"+1415555{i:04d}", "Me again")
    await services.assigner.round()
    rows = {row["contact_id"]: row for row in await _conversations(services.db, account_id)}
    assert rows[resolved_unassigned]["status"] == "open" and rows[resolved_unassigned]["assignee_user_id"]
    assert rows[resolved_assigned]["assignee_user_id"] == bo
    assert [a["subject_id"] for a in await _audit(services.db, account_id)] == [resolved_unassigned]
    assert rows[unassigned_by_hand]["assignee_user_id"] is None  # a message to an open one is no reopening


async def test_idle_agents_are_away_until_a_live_page_is_seen(services, team):
    account_id, (_amy, bo, cy) = team["account_id"], team["agents"]
    await accounts.update_settings(services.db, account_id,
                                   {"assignment": {"mode": "balanced", "awayAfterMinutes": 10}})
    now = utcnow()
    await assignment_store.mark_seen(services.db, [bo], iso(now - timedelta(minutes=11)), iso(now))
    await _arrive(services, account_id, 1)
    await services.assigner.round()
    assert _loads(await _conversations(services.db, account_id)) == {}  # amy, cy never seen; bo 11 minutes ago
    await assignment_store.mark_seen(services.db, [cy], iso(now), iso(now))
    await services.assigner.round()
    assert _loads(await _conversations(services.db, account_id)) == {cy: 1}


async def test_the_seen_beat_writes_who_has_a_live_page_and_wakes_the_assigner(services, team, monkeypatch):
    account_id, amy = team["account_id"], team["agents"][0]
    monkeypatch.setattr(services.hub, "connected_users", lambda: {amy})
    woken = []
    monkeypatch.setattr(services.assigner, "notify", lambda: woken.append(True))
    await services.seen.round()
    shown = await users.get_user(services.db, account_id, amy)
    assert shown["lastSeenAt"] and woken == [True]
    await services.seen.round()  # written a moment ago: not again, and nobody new
    assert (await users.get_user(services.db, account_id, amy))["lastSeenAt"] == shown["lastSeenAt"]
    assert woken == [True]


async def test_turning_assignment_off_queues_nothing_and_empties_the_queue(services, team):
    account_id = team["account_id"]
    await _set_capacities(services, team, 0, 0, 0)
    await _arrive(services, account_id, 2)
    assert all(row["queued_at"] for row in await _conversations(services.db, account_id))
    await accounts.update_settings(services.db, account_id, {"assignment": {"mode": "off"}})
    await services.assigner.round()
    await _arrive(services, account_id, 3, "+1415558")
    rows = await _conversations(services.db, account_id)
    assert len(rows) == 5 and not any(row["queued_at"] or row["assignee_user_id"] for row in rows)


async def test_a_deactivated_agents_open_conversations_wait_for_another(services, team):
    account_id, (amy, bo, cy) = team["account_id"], team["agents"]
    await _set_capacities(services, team, 2, 0, 0)
    await _arrive(services, account_id, 2)
    await services.assigner.round()
    assert _loads(await _conversations(services.db, account_id)) == {amy: 2}
    await users.update(services.db, account_id, amy, changes={"active": False}, by=None, actor_role="owner")
    await _set_capacities(services, team, None, 1, 1)
    await services.assigner.round()
    assert _loads(await _conversations(services.db, account_id)) == {bo: 1, cy: 1}


# ---- two connections racing (PostgreSQL: each write is its own transaction on its own connection) ----------

_inside, _go = threading.Event(), threading.Event()


def _assign_one_then_wait(cx, account_id, now):
    """The first of two racing assigners: assigns one conversation, then holds its transaction open until the
    test has seen the second one wait."""
    assigned = assignment_store.assign_queued_in_tx(cx, account_id, now, 1)
    _inside.set()
    _go.wait(20)
    return assigned


@reads
def _lock_waits(cx):
    return cx.execute("SELECT COUNT(*) FROM pg_locks WHERE NOT granted").fetchone()[0]


async def test_two_connections_assigning_at_once_never_exceed_capacity(services, team):
    account_id, (amy, bo, _cy) = team["account_id"], team["agents"]
    await _set_capacities(services, team, 0, 0, 0)  # they wait (nobody takes them on their message's write)
    await _arrive(services, account_id, 3)
    await _set_capacities(services, team, 1, 1, 0)
    _inside.clear()
    _go.clear()
    first = asyncio.ensure_future(services.db.write(_assign_one_then_wait, account_id, utcnow()))
    try:
        assert await until(_inside.is_set)
        second = asyncio.ensure_future(services.db.write(assignment_store.assign_queued_in_tx, account_id, utcnow(), 100))
        if services.settings.uses_postgres:  # the second transaction waits for the first one's lock
            for _ in range(500):
                if await _lock_waits(services.db):
                    break
                await asyncio.sleep(0.02)
            else:
                pytest.fail("the second assigner never waited for the first")
    finally:
        _go.set()
    assigned = await first + await second
    rows = await _conversations(services.db, account_id)
    assert _loads(rows) == {amy: 1, bo: 1} and len(assigned) == 2
    assert sum(1 for row in rows if row["queued_at"]) == 1


# ---- the UI's forms (the browser test, tests/test_assignment_e2e.py, goes through the header's switch) -------

async def test_the_settings_users_and_away_forms(services, signed_in, ui_account):
    account_id = ui_account["account_id"]
    r = await signed_in.post("/settings/assignment", {"assignmentMode": "fastest", "awayAfterMinutes": "30"})
    assert r.code == 400 and "assignment.mode" in r.text
    r = await signed_in.post("/settings/assignment", {"assignmentMode": "round_robin", "awayAfterMinutes": ""})
    assert r.code == 303
    shown = (await accounts.get_account(services.db, account_id))["settings"]["assignment"]
    assert shown == {"mode": "round_robin", "awayAfterMinutes": None}
    page = await signed_in.get("/settings")
    assert 'value="round_robin" selected' in page.text

    agent = await add_user(services, account_id, "agent@acme.example")
    for bad in ("-1", "2.5", "many"):
        r = await signed_in.post(f"/users/{agent}", {"capacity": bad})
        assert r.code == 400 and "capacity" in r.text, bad
    assert (await users.get_user(services.db, account_id, agent))["capacity"] is None  # nothing changed
    assert (await signed_in.post(f"/users/{agent}", {"capacity": "4"})).code == 303
    assert (await users.get_user(services.db, account_id, agent))["capacity"] == 4
    assert (await signed_in.post(f"/users/{agent}", {"capacity": ""})).code == 303
    assert (await users.get_user(services.db, account_id, agent))["capacity"] is None

    owner = (await users.list_users(services.db, account_id))["data"][0]
    r = await signed_in.post("/availability", {"available": "0", "next": "/inbox?filter=mine"})
    assert (r.code, r.headers["Location"]) == (303, "/inbox?filter=mine")
    assert (await users.get_user(services.db, account_id, owner["id"]))["available"] is False
    page = await signed_in.get("/inbox")
    assert 'id="availability" class="link away"' in page.text
    r = await signed_in.post("/availability", {"available": "1", "next": "//evil.example"})
    assert r.headers["Location"] != "//evil.example"
    assert (await users.get_user(services.db, account_id, owner["id"]))["available"] is True
