"""Live events (docs/design.md#api-decisions "Inbox (UI) and live events"): events written in the transaction of the change,
conversations kept incrementally, and the /ws WebSocket: session and origin checks, resume from the last
event id, the reload signal, tenancy, and a slow page's bounded queue. In-process, on a real SQLite file."""
import asyncio
import json

import pytest
from tornado.httpclient import HTTPClientError

from common.ids import now_iso
from services import accounts, messaging
from services.live import CLOSE_GOING_AWAY, CLOSE_RELOAD, CLOSE_REPLACED, STREAM_ONLY, Hub, Subscriber
from services.retention import RetentionWorker
from storage import bot_state, conversations, events
from storage import delivery as delivery_store
from storage.db import fetch_all, reads
from tests.campaign_helpers import create, deliver_all, make_list, people, run_all, set_webhook
from tests.delivery_helpers import Receiver
from tests import db_direct
from tests.live_helpers import FakeTransport, Socket, inbound, ui_user
from tests.ui_helpers import FormClient
from tests.waiting import until



# ---- helpers --------------------------------------------------------------------------------

# The events pages are sent (GET /v1/events alone reads the others: services.live.STREAM_ONLY).
PAGE_TYPES = "type NOT IN (" + ", ".join(f"'{t}'" for t in sorted(STREAM_ONLY)) + ")"

# ---- events and conversations, inside the transaction --------------------------------------

async def test_every_message_insert_emits_message_created_in_its_transaction(services, account):
    account_id = account["account_id"]
    await accounts.update_settings(services.db, account_id, {"customChannelWebhookUrl": "http://127.0.0.1:9/x"})
    first = await inbound(services, account_id, "sid-1")
    reply = await messaging.send_reply(services, account_id, first["contact_id"], "Thanks", author="bot")
    sent = await messaging.send_custom_channel_message(services, account_id, from_id="+14155552672",
                                                       custom_channel="webchat", body="Hi from the API")
    rows = await services.db.read(fetch_all, f"SELECT account_id, type, data FROM events WHERE {PAGE_TYPES}"
                                             " ORDER BY id")
    # The API's send is a person's reply: it pauses the bot for that contact (conversation.updated) too.
    assert [(r["account_id"], r["type"]) for r in rows] == [(account_id, "message.created")] * 3 + [
        (account_id, "conversation.updated")]
    rows = rows[:3]
    assert [json.loads(r["data"]) for r in rows] == [
        {"messageId": first["id"], "contactId": first["contact_id"], "direction": "inbound", "author": "contact",
         "status": "received"},
        {"messageId": reply["messageId"], "contactId": first["contact_id"], "direction": "outbound",
         "author": "bot", "status": "Pending"},
        {"messageId": sent["messageId"], "contactId": sent["contactId"], "direction": "outbound", "author": "api",
         "status": "Pending"}]
    # A repeated messageSid stores nothing, so it emits nothing.
    last = await events.last_id(services.db)
    await messaging.receive_inbound(services, account_id, message_sid="sid-1", from_id="+14155552671",
                                    to_id="shop", body="Hello", channel="webchat")
    assert await events.last_id(services.db) == last


def _emit_then_fail(cx, account_id):
    events.emit_in_tx(cx, account_id, "test.event", {"n": 1})
    raise ValueError("rolled back")


async def test_an_event_of_a_rolled_back_write_is_never_seen(services, account):
    with pytest.raises(ValueError):
        await services.db.write(_emit_then_fail, account["account_id"])
    assert await events.last_id(services.db) == 0


async def test_delivery_outcomes_and_manual_retry_emit_message_status_and_keep_the_failed_count(
        services, account, io_loop):
    account_id = account["account_id"]
    receiver = Receiver().start()
    try:
        await accounts.update_settings(services.db, account_id, {"customChannelWebhookUrl": receiver.url})
        message = await inbound(services, account_id, "sid-1")
        contact_id = message["contact_id"]
        receiver.answers = [(410, {}, b"gone")]
        reply = await messaging.send_reply(services, account_id, contact_id, "Thanks", author="user")
        await services.delivery.run_due()
        conversation = await conversations.get(services.db, account_id, contact_id, now_iso())
        assert conversation["failed_count"] == 1 and conversation["last_direction"] == "outbound"
        await services.delivery.retry_now(account_id, reply["messageId"])
        assert (await conversations.get(services.db, account_id, contact_id, now_iso()))["failed_count"] == 0
        await services.delivery.run_due()
        rows = await services.db.read(fetch_all, "SELECT type, data FROM events WHERE type = 'message.status'"
                                                 " ORDER BY id")
        assert [json.loads(r["data"])["status"] for r in rows] == ["Failed", "Pending", "Sent"]
        assert all(json.loads(r["data"]) == {"messageId": reply["messageId"], "contactId": contact_id,
                                             "status": json.loads(r["data"])["status"]} for r in rows)
        assert (await conversations.get(services.db, account_id, contact_id, now_iso()))["failed_count"] == 0
    finally:
        await receiver.close()


async def test_the_bot_outcome_and_pauses_reach_open_pages_as_events(services, account):
    account_id = account["account_id"]
    message = await inbound(services, account_id, "sid-1")
    await services.db.write(bot_state.set_outcome_in_tx, account_id, message["id"],
                            {"outcome": "answered", "detail": "rule: price"})
    await services.db.write(bot_state.pause_in_tx, account_id, message["contact_id"], "2999-01-01T00:00:00.000Z",
                            "human_reply", now_iso())
    await bot_state.clear_pause(services.db, account_id, message["contact_id"])
    rows = await services.db.read(fetch_all, f"SELECT type, data FROM events WHERE {PAGE_TYPES} ORDER BY id")
    assert [(r["type"], json.loads(r["data"])) for r in rows[1:]] == [
        ("message.updated", {"messageId": message["id"], "contactId": message["contact_id"]}),
        ("conversation.updated", {"contactId": message["contact_id"]}),
        ("conversation.updated", {"contactId": message["contact_id"]})]


async def _counts_from_messages(services, account_id):
    """What the conversations table must say, recomputed from the messages (unread: inbound since the read mark)."""
    def compute(cx):
        return {row[0]: (row[1], row[2], row[3]) for row in cx.execute(
            "SELECT contact_id, MAX(id), SUM(CASE WHEN direction = 'outbound' AND status = 'Failed' THEN 1 ELSE 0 END),"
            " SUM(CASE WHEN direction = 'inbound' AND body LIKE 'unread%' THEN 1 ELSE 0 END)"
            " FROM messages WHERE account_id = ? GROUP BY contact_id",
            (account_id,))}
    return await services.db.read(compute)


async def test_conversation_counts_stay_right_under_concurrent_writes(services, account):
    """Concurrent inbound messages, replies, delivery outcomes (Failed, then some Sent) and reads of many
    contacts, all at once: each conversation's last message, failed count and unread count equal what the
    messages say. Counts are kept incrementally in each write's transaction, never recounted."""
    account_id = account["account_id"]
    await accounts.update_settings(services.db, account_id, {"customChannelWebhookUrl": "http://127.0.0.1:9/x"})
    phones = [f"+1415555{2600 + i:04d}" for i in range(12)]
    firsts = await asyncio.gather(*(inbound(services, account_id, f"first-{i}", from_id=p, body="read first")
                                    for i, p in enumerate(phones)))
    for message in firsts:  # read: the unread count starts again from 0
        await conversations.mark_read(services.db, account_id, message["contact_id"], message["id"])
    contacts = [m["contact_id"] for m in firsts]

    async def contact_traffic(i, contact_id):
        replies = []
        for n in range(6):
            await inbound(services, account_id, f"c{i}-m{n}", from_id=phones[i], body=f"unread {n}")
            replies.append(await messaging.send_reply(services, account_id, contact_id, f"reply {n}", author="bot"))
        return replies

    async def outcomes(replies):
        now = now_iso()
        for n, reply in enumerate(replies):
            row = await delivery_store.get_outbox_for_message(services.db, account_id, reply["messageId"])
            attempt = {"at": now, "http_status": 500, "error": "HTTP 500", "response_excerpt": "", "duration_ms": 1}
            await delivery_store.record_attempt(services.db, row, attempt, status="pending", next_attempt_at=now,
                                                error={"at": now, "error": "HTTP 500"})
            if n % 2:  # every other one recovers
                row = await delivery_store.get_outbox_for_message(services.db, account_id, reply["messageId"])
                await delivery_store.record_attempt(services.db, row, {**attempt, "http_status": 200, "error": None},
                                                    status="sent", next_attempt_at=None, error=None)

    replies = await asyncio.gather(*(contact_traffic(i, c) for i, c in enumerate(contacts)))
    await asyncio.gather(*(outcomes(r) for r in replies))
    expected = await _counts_from_messages(services, account_id)
    page = await conversations.page(services.db, account_id, now_iso(), limit=100)
    assert len(page) == len(contacts)
    got = {row["contact_id"]: (row["last_message_id"], row["failed_count"], row["unread_count"]) for row in page}
    assert got == expected
    assert {v[1] for v in got.values()} == {3} and {v[2] for v in got.values()} == {6}
    # Newest activity first: the order of the last message ids.
    assert [row["last_message_id"] for row in page] == sorted((v[0] for v in got.values()), reverse=True)


async def test_mark_read_keeps_messages_that_arrived_after_the_page_was_shown(services, account):
    account_id = account["account_id"]
    first = await inbound(services, account_id, "sid-1")
    await inbound(services, account_id, "sid-2")  # arrives after the page showed only the first
    assert not await conversations.mark_read(services.db, account_id, first["contact_id"], first["id"])
    assert (await conversations.get(services.db, account_id, first["contact_id"], now_iso()))["unread_count"] == 2
    last = await inbound(services, account_id, "sid-3")
    assert await conversations.mark_read(services.db, account_id, first["contact_id"], last["id"])
    assert (await conversations.get(services.db, account_id, first["contact_id"], now_iso()))["unread_count"] == 0


@pytest.mark.sqlite_only("migrates an SQLite file of its own")
def test_migration_backfills_conversations_of_existing_messages(tmp_path, monkeypatch):
    """A database with messages from before 0041 gets one conversation per contact, read, failures counted."""
    import shutil
    from storage import db
    older = tmp_path / "migrations"
    older.mkdir()
    for path in sorted(db.MIGRATIONS.glob("00[0-3]*.sql")):
        shutil.copy(path, older)
    all_migrations = db.MIGRATIONS
    monkeypatch.setattr(db, "MIGRATIONS", older)
    cx = db.connect_sync(tmp_path / "old.db")
    db.migrate(cx)
    cx.execute("INSERT INTO accounts (id, name, email, type, webhook_secret, created_at)"
               " VALUES ('acc_1', 'A', 'a@x', 'standard', 's', 'now')")
    cx.execute("INSERT INTO contacts (id, account_id, created_at) VALUES ('ct_1', 'acc_1', 'now')")
    for mid, direction, status, channel in (("msg_1", "inbound", "received", "webchat"),
                                            ("msg_2", "outbound", "Failed", None),
                                            ("msg_3", "outbound", "Sent", None)):
        cx.execute("INSERT INTO messages (id, account_id, contact_id, direction, status, body, channel, created_at,"
                   " author) VALUES (?, 'acc_1', 'ct_1', ?, ?, ?, ?, 'now', 'api')",
                   (mid, direction, status, f"body {mid}", channel))
    monkeypatch.setattr(db, "MIGRATIONS", all_migrations)
    db.migrate(cx)
    row = cx.execute("SELECT last_message_id, last_preview, channel, unread_count, failed_count FROM conversations"
                     " WHERE account_id = 'acc_1' AND contact_id = 'ct_1'").fetchone()
    assert tuple(row) == ("msg_3", "body msg_3", "webchat", 0, 1)
    cx.close()


# ---- the WebSocket --------------------------------------------------------------------------

async def test_handshake_needs_the_session_and_this_sites_origin(services, http_server_client, signed_in_as):
    _, client = await signed_in_as("owner@live.example")
    refusals = [({}, "same", 401), (client.cookies, "https://evil.example", 403), (client.cookies, None, 403),
                (client.cookies, f"http://127.0.0.1:{http_server_client.get_http_port()}", 403),
                ({"parley_user": "usr_forged"}, "same", 401)]
    for cookies, origin, status in refusals:
        with pytest.raises(HTTPClientError) as refused:
            await Socket.open(http_server_client, cookies, 0, origin=origin)
        assert refused.value.code == status, (cookies, origin)
    with pytest.raises(HTTPClientError) as refused:
        await Socket.open(http_server_client, client.cookies, "x1")
    assert refused.value.code == 400
    socket = await Socket.open(http_server_client, client.cookies, 0)
    assert await socket.next() == {"type": "ready"}
    socket.close()


async def test_events_arrive_live_for_the_signed_in_account_only(services, http_server_client, signed_in_as):
    """Tenancy: another account's socket receives nothing of this account's events."""
    mine, client = await signed_in_as("owner@live.example")
    theirs, other_client = await signed_in_as("owner@other.example")
    socket = await Socket.open(http_server_client, client.cookies, 0)
    other = await Socket.open(http_server_client, other_client.cookies, 0)
    assert await socket.next() == {"type": "ready"} and await other.next() == {"type": "ready"}

    message = await inbound(services, mine["account_id"], "sid-1", body="for me")
    [event] = await socket.events(1)
    assert event["type"] == "message.created" and event["data"]["messageId"] == message["id"]
    assert isinstance(event["id"], int) and event["at"].endswith("Z")
    # The other account's next frame is its own event: nothing of ours came before it.
    theirs_message = await inbound(services, theirs["account_id"], "sid-1", body="for them")
    [event] = await other.events(1)
    assert event["data"]["messageId"] == theirs_message["id"]
    assert all(f["type"] == "ready" or f["events"] == [event] for f in other.frames)
    socket.close()
    other.close()


async def test_pages_that_offer_compression_get_one_deflated_copy_of_each_frame(services, http_server_client,
                                                                                signed_in_as):
    """permessage-deflate with server_no_context_takeover: each frame is deflated once for every page, and
    decodes on its own (a client's inflater sees valid messages, frame after frame)."""
    mine, client = await signed_in_as("owner@live.example")
    sockets = [await Socket.open(http_server_client, client.cookies, 0, deflate=True) for _ in range(2)]
    for socket in sockets:
        assert await socket.next() == {"type": "ready"}
        assert socket.connection.headers["Sec-WebSocket-Extensions"] == "permessage-deflate; server_no_context_takeover"
    sent = []
    for n in range(3):  # three rounds, three frames
        sent.append((await inbound(services, mine["account_id"], f"sid-{n}", body="x" * 500))["id"])
        for socket in sockets:
            [event] = await socket.events(1)
            assert event["data"]["messageId"] == sent[-1]
    for socket in sockets:
        socket.close()


async def test_a_session_and_an_account_keep_a_bounded_number_of_live_pages(services, http_server_client, signed_in_as):
    """Issue 18, item 2: one signed-in session opened 999 sockets and took every connection. Beyond the
    session's limit (2 here) and the account's (3), a new page closes the oldest (4002: its script stops
    reconnecting); the newer pages stay live."""
    services.hub.max_per_session, services.hub.max_per_account = 2, 3
    mine, client = await signed_in_as("owner@live.example")
    second = FormClient(http_server_client)  # the same owner signed in elsewhere: another session
    assert (await second.login("owner@live.example")).code == 303
    first = await Socket.open(http_server_client, client.cookies, 0)
    await first.next()
    pages = [await Socket.open(http_server_client, client.cookies, 0) for _ in range(2)]
    for page in pages:
        await page.next()
    assert await first.next() is None and first.connection.close_code == CLOSE_REPLACED
    others = [await Socket.open(http_server_client, second.cookies, 0) for _ in range(2)]
    for page in others:
        await page.next()
    assert await pages[0].next() is None and pages[0].connection.close_code == CLOSE_REPLACED
    assert services.hub.subscriber_count == 3
    message = await inbound(services, mine["account_id"], "sid-1")
    for page in [pages[1], *others]:
        assert [e["data"]["messageId"] for e in await page.events(1)] == [message["id"]]
        page.close()


async def test_pages_showing_only_the_counts_are_closed_before_a_live_inbox(services, http_server_client, signed_in_as):
    """Issue 37: every page opens a socket for the navigation's counts; opening more of them than the session may
    keep closes those first (oldest first), never the inbox page that shows events."""
    services.hub.max_per_session = 2
    mine, client = await signed_in_as("owner@live.example")
    inbox_page = await Socket.open(http_server_client, client.cookies, 0)
    await inbox_page.next()
    settings_pages = [await Socket.open(http_server_client, client.cookies, "counts") for _ in range(2)]
    for page in settings_pages:
        await page.next()
    assert await settings_pages[0].next() is None and settings_pages[0].connection.close_code == CLOSE_REPLACED
    message = await inbound(services, mine["account_id"], "sid-1")
    assert [e["data"]["messageId"] for e in await inbox_page.events(1)] == [message["id"]]
    inbox_page.close()
    settings_pages[1].close()


async def test_websockets_never_take_the_connections_kept_for_the_api(app, services, http_server_client, signed_in_as):
    """Issue 18, item 2: a share of --max-connections is never the WebSockets'. At their limit (2 of a cap of
    4 here, held by two pages' streams) /ws answers 503 with Retry-After and the API still answers; once one
    of them closes, a page may go live again."""
    from connection_guard import ConnectionGuard

    class Held:  # a connection a WebSocket holds, as the guard sees it
        def __init__(self):
            self.open = True

        def closed(self):
            return not self.open

    mine, client = await signed_in_as("owner@live.example")
    guard = ConnectionGuard(4, socket_share=0.5)
    held = [Held(), Held()]
    guard.open.update(held)
    guard.detached.update(held)
    app.connection_guard = guard
    with pytest.raises(HTTPClientError) as refused:
        await Socket.open(http_server_client, client.cookies, 0)
    assert refused.value.code == 503 and refused.value.response.headers["Retry-After"] == "30"
    assert (await http_server_client.fetch(f"/v1/account?apiKey={mine['api_key']}")).code == 200
    held[0].open = False
    socket = await Socket.open(http_server_client, client.cookies, 0)
    assert await socket.next() == {"type": "ready"}
    socket.close()


async def test_what_a_page_sees_of_event_ids_says_nothing_of_other_accounts(services, http_server_client,
                                                                            signed_in_as):
    """Issue 18, item 10: event ids were global, so data-live-after and the gaps between a page's event ids
    counted other accounts' traffic. They are the account's own numbers now: 1, 2, 3 ..., whatever other
    accounts do in between, and resuming from them works the same."""
    mine, client = await signed_in_as("owner@live.example")
    theirs, _ = await signed_in_as("owner@other.example")
    page = await client.get("/inbox")
    assert 'data-live-after="0"' in page.text  # nothing of this account yet (the other one has events)
    socket = await Socket.open(http_server_client, client.cookies, 0)
    await socket.next()
    seen = []
    for n in range(3):
        for k in range(5):  # the other account's traffic between two of ours
            await inbound(services, theirs["account_id"], f"theirs-{n}-{k}")
        await inbound(services, mine["account_id"], f"mine-{n}")
        seen += await socket.events(1)
    assert [e["id"] for e in seen] == [2, 3, 4]  # 1: the contact's contact.created, which pages are not sent
    socket.close()
    await inbound(services, theirs["account_id"], "theirs-late")
    page = await client.get("/inbox")
    assert 'data-live-after="4"' in page.text
    await inbound(services, mine["account_id"], "mine-late")
    socket = await Socket.open(http_server_client, client.cookies, 3)  # resumes after its second message
    assert [e["id"] for e in await socket.events(2)] == [4, 5]
    socket.close()


async def test_a_page_resumes_from_its_last_event_id(services, http_server_client, signed_in_as):
    """A page that reconnects gets exactly the events it missed, in order, then live ones: none lost, none twice."""
    mine, client = await signed_in_as("owner@live.example")
    theirs, _ = await signed_in_as("owner@other.example")
    account_id = mine["account_id"]
    socket = await Socket.open(http_server_client, client.cookies, 0)
    await socket.next()
    await inbound(services, account_id, "sid-0")
    seen = await socket.events(1)
    socket.close()  # the network drops

    missed = [await inbound(services, account_id, f"sid-{n}", body=f"missed {n}") for n in range(1, 4)]
    await inbound(services, theirs["account_id"], "other-1")  # another account's, in between
    socket = await Socket.open(http_server_client, client.cookies, seen[-1]["id"])
    replayed = await socket.events(3)
    assert [e["data"]["messageId"] for e in replayed] == [m["id"] for m in missed]
    assert [e["id"] for e in replayed] == sorted(e["id"] for e in replayed) and replayed[0]["id"] > seen[-1]["id"]
    assert await socket.next() == {"type": "ready"}
    live = await inbound(services, account_id, "sid-9")
    assert [e["data"]["messageId"] for e in await socket.events(1)] == [live["id"]]
    socket.close()


async def test_a_page_older_than_the_events_kept_is_told_to_reload(services, http_server_client, signed_in_as):
    mine, client = await signed_in_as("owner@live.example")
    account_id = mine["account_id"]
    for n in range(4):
        await inbound(services, account_id, f"sid-{n}")
    await services.db.write(_age_events, "2000-01-01T00:00:00.000Z")
    deleted = await RetentionWorker(services).run_once()  # the "live events" rule, after 7 days by default
    assert deleted["live events"] == 4  # the newest one is always kept (the first: contact.created)
    for after in (1, 99):  # pruned since; and an id this database never had (a restored backup)
        socket = await Socket.open(http_server_client, client.cookies, after)
        frame = await socket.next()
        assert frame["type"] == "reload" and "older" in frame["reason"]
        assert await socket.next() is None and socket.connection.close_code == CLOSE_RELOAD
    socket = await Socket.open(http_server_client, client.cookies, 4)  # the oldest position still resumable
    assert [e["id"] for e in await socket.events(1)] == [5]
    socket.close()


async def test_pruning_keeps_each_accounts_newest_event_so_its_numbers_never_go_back(services):
    """Item 10: every account counts its own events; pruning keeps each account's newest, so an account that
    was quiet for long goes on from its number rather than starting again at 1 (a page would miss events)."""
    quiet, busy = [await ui_user(services, f"owner@{name}.example") for name in ("quiet", "busy")]
    for n in range(2):
        await inbound(services, quiet["account_id"], f"q-{n}")
    for n in range(4):
        await inbound(services, busy["account_id"], f"b-{n}")
    await services.db.write(_age_events, "2000-01-01T00:00:00.000Z")
    # all but each account's newest (each account's first is its contact's contact.created)
    assert (await RetentionWorker(services).run_once())["live events"] == 6
    assert await events.last_seq(services.db, quiet["account_id"]) == 3
    await inbound(services, quiet["account_id"], "q-late")
    assert await events.last_seq(services.db, quiet["account_id"]) == 4


def _age_events(cx, created_at):
    cx.execute("UPDATE events SET created_at = ?", (created_at,))


def _age_events_of(cx, account_id, seqs, created_at):
    cx.execute(f"UPDATE events SET created_at = ? WHERE account_id = ? AND seq IN ({', '.join('?' for _ in seqs)})",
               (created_at, account_id, *seqs))


async def test_pruning_deletes_only_a_prefix_of_each_accounts_events_so_no_cursor_skips_a_hole(services, api):
    """created_at can go back where seq goes on (PostgreSQL numbers an event at its COMMIT, after its time was
    taken): pruning by created_at alone deleted an old event between two kept ones, and a reader before it
    read on past the hole, never told (no 410, no reload). Only a prefix by seq goes."""
    account = await ui_user(services, "owner@holes.example")
    account_id = account["account_id"]
    for n in range(3):
        await inbound(services, account_id, f"h-{n}")  # seq 1: contact.created, 2..4: the messages
    before = (await api.get("/v1/events?limit=1", key=account["api_key"])).json["data"][0]["id"]  # seq 1
    await services.db.write(_age_events_of, account_id, [1, 3], "2000-01-01T00:00:00.000Z")  # 2 is newer than 3
    assert (await RetentionWorker(services).run_once())["live events"] == 1  # seq 1 only: 3 has 2 before it
    assert [row[5] for row in await _account_rows(services.db, account_id)] == [2, 3, 4]
    r = await api.get(f"/v1/events?after={before}", key=account["api_key"])
    assert r.code == 200 and len(r.json["data"]) == 3, r.body  # nothing skipped
    await services.db.write(_age_events_of, account_id, [2], "2000-01-01T00:00:00.000Z")
    assert (await RetentionWorker(services).run_once())["live events"] == 2  # now 2 and 3: 4 is the newest
    assert [row[5] for row in await _account_rows(services.db, account_id)] == [4]


@reads
def _account_rows(cx, account_id):
    return cx.execute("SELECT id, account_id, type, data, created_at, seq FROM events WHERE account_id = ?"
                      " ORDER BY seq", (account_id,)).fetchall()


async def test_a_page_that_missed_too_many_events_is_told_to_reload(services, http_server_client, signed_in_as):
    mine, client = await signed_in_as("owner@live.example")
    services.hub.catch_up_limit = 3
    for n in range(4):
        await inbound(services, mine["account_id"], f"sid-{n}")
    socket = await Socket.open(http_server_client, client.cookies, 0)
    frame = await socket.next()
    assert frame == {"type": "reload", "reason": "the page missed too many live events"}
    socket = await Socket.open(http_server_client, client.cookies, 2)  # three missed (1: contact.created): replayed
    assert len(await socket.events(3)) == 3
    socket.close()


async def test_a_restarted_server_replays_what_a_page_missed(settings, io_loop, services, account):
    """Events are rows, not memory: a hub on a reopened database serves a page's resume."""
    import server
    account_id = account["account_id"]
    await inbound(services, account_id, "sid-1")
    await services.close()
    reopened = await server.open_services(settings)
    try:
        await inbound(reopened, account_id, "sid-2")
        transport = FakeTransport()
        subscriber = await reopened.hub.subscribe(account_id, "usr_1", 2, transport)  # 1: the contact's
        assert subscriber is not None
        frames = [json.loads(f) for f in transport.frames]
        assert [e["id"] for e in frames[0]["events"]] == [3] and frames[1] == {"type": "ready"}
        await reopened.hub.stop()
        assert transport.closed == (CLOSE_GOING_AWAY, "server restarting")
    finally:
        await reopened.close()
        services.db = reopened.db  # the fixture's teardown closes it again: harmless


# ---- the hub's fan-out and a slow page ----------------------------------------------------------

async def test_a_slow_page_gets_a_bounded_queue_and_is_told_to_reload(services, account):
    hub = services.hub
    hub.max_pending_bytes = 2000
    slow, fast = FakeTransport(flushed=False), FakeTransport()
    account_id = account["account_id"]
    assert await hub.subscribe(account_id, "usr_1", 0, slow) and await hub.subscribe(account_id, "usr_1", 0, fast)
    for n in range(30):
        await inbound(services, account_id, f"sid-{n}")
        await hub._round()
    assert slow.closed == (CLOSE_RELOAD, "reload")
    assert json.loads(slow.frames[-1]) == {"type": "reload", "reason": "this page fell behind the live events"}
    assert sum(len(f) for f in slow.frames[:-1]) <= 2000
    delivered = [e["data"]["messageId"] for f in fast.frames[1:] for e in json.loads(f)["events"]]
    assert len(delivered) == 30 and fast.closed is None  # the fast page is not held back
    assert hub.subscriber_count == 1


async def test_one_round_carries_every_committed_event_in_one_frame(services, account):
    """Fan-out is off the request path: commits only wake the hub; a round reads everything committed since
    the last one in one query and sends one frame per page."""
    hub = services.hub
    transport = FakeTransport()
    account_id = account["account_id"]
    await hub.subscribe(account_id, "usr_1", 0, transport)
    hub.min_interval = 30  # no round runs by itself while the writes below commit
    hub._last_round = asyncio.get_running_loop().time()
    await asyncio.gather(*(inbound(services, account_id, f"sid-{n}", from_id=f"+1415555{2700 + n}")
                           for n in range(20)))
    assert hub._task is not None and len(transport.frames) == 1  # woken, waiting; only "ready" sent so far
    rounds = hub.rounds
    await hub._round()
    assert hub.rounds == rounds + 1 and len(transport.frames) == 2
    # Each message's contact is new: its contact.created (not sent to pages) comes before it.
    assert [e["id"] for e in json.loads(transport.frames[1])["events"]] == list(range(2, 41, 2))


async def test_a_page_that_joins_ahead_of_the_hub_gets_no_event_twice(services, account):
    """A page rendered after the hub's last round (its id is newer than the hub's position) receives only
    the events after its own id."""
    hub = services.hub
    account_id = account["account_id"]
    early = FakeTransport()
    await hub.subscribe(account_id, "usr_1", 0, early)  # the hub listens from here
    hub.min_interval = 30  # no round runs by itself in this test
    hub._last_round = asyncio.get_running_loop().time()
    for n in range(3):
        await inbound(services, account_id, f"sid-{n}")
    late = FakeTransport()
    await hub.subscribe(account_id, "usr_2", 3, late)  # rendered after event 3 committed (1: contact.created)
    await hub._round()
    assert [e["id"] for e in json.loads(early.frames[-1])["events"]] == [2, 3, 4]
    assert [e["id"] for e in json.loads(late.frames[-1])["events"]] == [4]


class JoiningTransport(FakeTransport):
    """A page whose ready frame, sent while it joins, coincides with another process's commit and its
    notification (the commit lands after the catch-up's read, before the page is among the subscribers)."""

    def __init__(self, services, account_id):
        super().__init__()
        self.services, self.account_id = services, account_id

    def write(self, frame):
        if frame.data == b'{"type":"ready"}':
            cx = db_direct.connect(self.services)
            try:
                events.emit_in_tx(cx, self.account_id, "message.created", {"n": 1})
            finally:
                cx.close()
            self.services.hub.notify()  # what the listener does for another process's commit
        return super().write(frame)


async def test_an_event_committed_while_a_page_joins_reaches_it_at_once(services, account):
    """The notification came while nobody listened yet (the page was joining): it was dropped, so the event
    waited for the backstop poll (PostgreSQL CI: test_roles' view-as socket timed out). Now the page runs the
    round once it has joined."""
    hub = services.hub
    hub.poll_seconds = 3600  # no backstop in this test
    transport = JoiningTransport(services, account["account_id"])
    assert await hub.subscribe(account["account_id"], "usr_1", 0, transport) is not None
    assert await until(lambda: len(transport.frames) > 1, seconds=5), transport.frames
    assert [e["data"] for e in json.loads(transport.frames[-1])["events"]] == [{"n": 1}]


async def test_a_watch_with_a_mention_wakes_only_for_events_that_name_it(services, account):
    """A chat visitor's wait (services/widget.py) wakes for its own contact's events, not for every event of the
    account; a plain long-poll's wakes for any."""
    hub, account_id = services.hub, account["account_id"]
    hub.min_interval = 30  # rounds run when this test says
    hub._last_round = asyncio.get_running_loop().time()
    mine, anyone = await hub.watch(account_id, mention="ct_mine"), await hub.watch(account_id)
    try:
        await services.db.write(_emit_one, account_id, {"contactId": "ct_other"})
        await hub._round()
        assert anyone.is_set() and not mine.is_set()
        await services.db.write(_emit_one, account_id, {"contactId": "ct_mine"})
        await hub._round()
        assert mine.is_set()
    finally:
        hub.unwatch(account_id, mine)
        hub.unwatch(account_id, anyone)


def _emit_one(cx, account_id, data):
    events.emit_in_tx(cx, account_id, "message.created", data)


def test_pages_of_an_ended_session_are_closed():
    """Sign-out closes that session's pages only; a new key or password closes all but the asking session's."""
    hub = Hub(db=None)
    transports = {name: FakeTransport() for name in ("a", "b", "c")}
    hub._subscribers["acc_1"] = {Subscriber(hub, "acc_1", "usr_1", transports[name], session=name) for name in "abc"}
    hub.disconnect("acc_2", session="a")  # another account's session of that name: nothing here
    hub.disconnect("acc_1", session="a")
    assert [transports[n].closed for n in "abc"] == [(4001, "signed out"), None, None]
    hub.disconnect("acc_1", keep_session="b")
    assert transports["b"].closed is None and transports["c"].closed == (4001, "signed out")
    assert hub.subscriber_count == 1


async def test_pages_of_sessions_ended_elsewhere_are_closed_by_the_session_check(services, signed_in_as):
    """The rotate-key command runs in another process, and sessions expire: the hub's periodic check finds
    the pages whose session is gone."""
    mine, _ = await signed_in_as("owner@live.example")
    account_id, hub = mine["account_id"], services.hub
    live_session = next(iter(await _session_hashes(services.db)))
    live, stale = FakeTransport(), FakeTransport()
    await hub.subscribe(account_id, "usr_1", 0, live, session=live_session)
    await hub.subscribe(account_id, "usr_1", 0, stale, session="no-such-session")
    assert await hub.check_sessions() == 1
    assert stale.closed == (4001, "signed out") and live.closed is None
    await accounts.rotate_key(services.db, services.keys, account_id)  # what the rotate-key command runs
    assert await hub.check_sessions() == 1 and live.closed == (4001, "signed out")


@reads
def _session_hashes(cx):
    return {r[0] for r in cx.execute("SELECT id_hash FROM sessions")}


# ---- campaigns: batched events, exact counts --------------------------------------------------

async def test_a_campaign_announces_its_batches_and_keeps_the_conversations_exact(services, api, account, runner,
                                                                                  worker, receiver):
    """The runner's batch announces its messages in one messages.created event (not one per message); their
    final failures count in the conversations; retry-failed then cancel makes them Cancelled, which leaves
    the failed counts, announced by messages.status with each contact's message."""
    account_id = account["account_id"]
    await set_webhook(api, account, receiver.url)
    list_id, contact_ids = await make_list(services, account, people(3))
    receiver.answers = [(410, {}, b"gone")] * 3
    first_event = await events.last_id(services.db)
    created = await create(api, account, list_id)
    await run_all(runner)
    rows = await services.db.read(fetch_all, "SELECT type, data FROM events WHERE id > ? AND type <> ? ORDER BY id",
                                  (first_event, events.CAMPAIGN_PROGRESS))  # the counts' own event: test_campaigns_ui
    batches = [json.loads(r["data"]) for r in rows]  # one event per batch (the runner paced these 3 in 2)
    assert {r["type"] for r in rows} == {"messages.created"} and len(batches) < len(contact_ids)
    assert [c for b in batches for c in b["contactIds"]] == contact_ids
    assert {b["campaignId"] for b in batches} == {created.json["id"]}
    await deliver_all(worker)
    assert await _failed_counts(services.db, account_id) == {c: 1 for c in contact_ids}
    assert (await api.post(f"/v1/campaigns/{created.json['id']}/retry-failed", key=account["api_key"])).code == 200
    before_cancel = await events.last_id(services.db)
    assert (await api.post(f"/v1/campaigns/{created.json['id']}/cancel", key=account["api_key"])).code == 200
    messages = await services.db.read(fetch_all, "SELECT contact_id, id, status FROM messages WHERE account_id = ?"
                                                 " AND author = 'campaign' ORDER BY contact_id", (account_id,))
    assert {m["status"] for m in messages} == {"Cancelled"}
    assert await _failed_counts(services.db, account_id) == {c: 0 for c in contact_ids}
    rows = await services.db.read(fetch_all, "SELECT type, data FROM events WHERE id > ? AND type <> ? ORDER BY id",
                                  (before_cancel, events.CAMPAIGN_PROGRESS))
    (event,) = [(r["type"], json.loads(r["data"])) for r in rows]
    event[1]["messages"].sort()  # in the order the outbox had them
    assert event == ("messages.status", {"campaignId": created.json["id"], "status": "Cancelled",
                                         "messages": sorted([m["contact_id"], m["id"]] for m in messages)})


async def _failed_counts(db, account_id):
    rows = await db.read(fetch_all, "SELECT contact_id, failed_count FROM conversations WHERE account_id = ?",
                         (account_id,))
    return {r["contact_id"]: r["failed_count"] for r in rows}
