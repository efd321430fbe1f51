"""Live events read in commit order on PostgreSQL (issue 19: "sequence ids in PostgreSQL are not commit-ordered, so
a page reading 'events after N' can miss one that commits late with a smaller id"; docs/design.md#wave-3-contracts: "Live events are read
in commit order on both"). Two writers whose commits interleave: the one that took the smaller event id commits
last. The hub (services/live.py) and a page that joins between the two commits must still get the late event, once.
SQLite's single writer cannot interleave two transactions, so these run on PostgreSQL only."""
import json

import pytest

from storage import events
from tests.live_helpers import FakeTransport

pytestmark = pytest.mark.postgres_only


def begin_event(services, account_id, contact_id):
    """A transaction that has written a live event of the account and not committed yet: (connection, id)."""
    cx = services.db.connect_sync()
    cx.execute("BEGIN")
    event_id = events.emit_in_tx(cx, account_id, events.CONVERSATION_UPDATED, {"contactId": contact_id})
    return cx, event_id


def commit(cx):
    cx.execute("COMMIT")
    cx.close()


def sent_events(transport):
    return [event for frame in transport.frames for event in json.loads(frame).get("events", [])]


def received(transport):
    """The contactIds of the events a page was sent, in order."""
    return [event["data"]["contactId"] for event in sent_events(transport)]


@pytest.fixture
def two_accounts(make_account):
    return make_account(), make_account()


@pytest.fixture
def six_accounts(make_account):
    return [make_account()["account_id"] for _ in range(6)]


async def test_the_hub_does_not_skip_an_event_that_commits_after_a_newer_one(services, two_accounts):
    """Writer A takes an event id, writer B takes the next one and commits, a hub round runs, then A commits:
    the next round still sends A's event to A's page (a reader that moved its position past B's id would never
    read A's), and nothing is sent twice."""
    (first, second), hub = two_accounts, services.hub
    page_a, page_b = FakeTransport(), FakeTransport()
    assert await hub.subscribe(first["account_id"], "usr_a", 0, page_a)
    assert await hub.subscribe(second["account_id"], "usr_b", 0, page_b)
    hub.min_interval = 30  # rounds run when this test says
    cx_a, id_a = begin_event(services, first["account_id"], "ct_late")
    cx_b, id_b = begin_event(services, second["account_id"], "ct_early")
    assert id_a < id_b  # the interleaving this test is about
    commit(cx_b)
    await hub._round()
    assert received(page_b) == ["ct_early"] and received(page_a) == []
    commit(cx_a)
    await hub._round()
    await hub._round()
    assert received(page_a) == ["ct_late"]
    assert received(page_b) == ["ct_early"]


async def test_a_page_that_joins_between_the_commits_gets_the_late_event(services, two_accounts):
    """A page renders (its position: the account's newest event) after B committed and before A did; it joins
    the hub, which starts reading from there: A's event, committed next, still reaches it."""
    (first, second), hub = two_accounts, services.hub
    hub.min_interval = 30
    cx_a, id_a = begin_event(services, first["account_id"], "ct_late")
    cx_b, id_b = begin_event(services, second["account_id"], "ct_early")
    assert id_a < id_b
    commit(cx_b)
    page = FakeTransport()
    rendered_at = await events.last_seq(services.db, first["account_id"])
    assert await hub.subscribe(first["account_id"], "usr_a", rendered_at, page)  # the hub's first listener
    commit(cx_a)
    await hub._round()
    await hub._round()
    assert received(page) == ["ct_late"]


async def test_many_interleaved_writers_each_event_reaches_its_page_once(services, six_accounts):
    """Six open transactions, one per account (an account's events are numbered under a lock of its own, so
    its writers queue), commit in the reverse of their id order with a round after each commit: every event
    reaches its account's page exactly once."""
    hub = services.hub
    hub.min_interval = 30
    accounts = six_accounts
    pages = {account_id: FakeTransport() for account_id in accounts}
    for account_id, page in pages.items():
        assert await hub.subscribe(account_id, "usr", 0, page)
    writers = [begin_event(services, account_id, f"ct_{n}") for n, account_id in enumerate(accounts)]
    assert [event_id for _, event_id in writers] == sorted(event_id for _, event_id in writers)
    for cx, _ in reversed(writers):
        commit(cx)
        await hub._round()
    await hub._round()
    assert [received(pages[account_id]) for account_id in accounts] == [[f"ct_{n}"] for n in range(6)]
    assert all(event["id"] == 1 for page in pages.values() for event in sent_events(page))  # each account's seq
