"""The inbox end to end (issue 11 "What it must show"): the real server.py over HTTPS, Debian's Chromium
through Playwright, a real local webhook receiver. Pages must update live, without a reload: each test
marks the page (window.__noReload) and checks the mark is still there at the end.

Delays from the API's 200 to the page showing the message are printed (run with -s to see them); they
are measured, not asserted (performance is measured in bench/)."""
import asyncio
import json
import ssl
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect
from storage import bot_state

from tests.parley_process import ParleyProcess, run_cli
from tests.inbound_helpers import contact_of, post_inbound, wait_live, wait_until
from tests.ui_helpers import assert_not_reloaded, mark_no_reload, sign_in
from tests import db_direct



def watch_for(page, selector, text):
    """Record (Date.now()) when an element matching selector first contains text, under that text: each
    watch has its own slot, so an observer left from an earlier watch cannot answer for a later one."""
    page.evaluate("""([selector, text]) => {
        window.__seenAt = window.__seenAt || {};
        window.__seenAt[text] = null;
        const observer = new MutationObserver(() => check());
        const check = () => {
            const el = document.querySelector(selector);
            if (el && el.textContent.includes(text)) { window.__seenAt[text] = Date.now(); observer.disconnect(); }
        };
        observer.observe(document.body, {subtree: true, childList: true, characterData: true});
        check();
    }""", [selector, text])


def seen_delay(page, text, answered):
    """(ms from the API's 200 to the page showing text, ms from sending the request). The first can be
    negative: the page may show the message before the client has read the 200 that left at the same time."""
    slot = f"window.__seenAt[{json.dumps(text)}]"
    wait_until(page, f"{slot} !== null")
    seen = page.evaluate(slot)
    return seen - answered, seen - post_inbound.sent


def open_thread(page, parley, body, from_id, name):
    """A conversation started by an inbound message, open and live in the signed-in page; its contact id."""
    message_id, _ = post_inbound(parley, body, from_id=from_id, firstName=name)
    contact_id = contact_of(parley, message_id)
    sign_in(page, parley)
    page.goto(parley.base + f"/inbox/{contact_id}")
    wait_live(page)
    mark_no_reload(page)
    return contact_id


def test_browser_inbound_messages_appear_in_the_open_inbox_and_thread_without_reload(page, parley):
    sign_in(page, parley)
    assert page.url == parley.base + "/inbox"
    wait_live(page)
    mark_no_reload(page)
    inbox_delays, thread_delays = [], []
    for n in range(5):
        token = f"inbox-live-{n}-{time.time_ns()}"
        watch_for(page, "#conversations", token)
        message_id, answered = post_inbound(parley, f"Hello {token}", firstName="Live", lastName="Reader")
        inbox_delays.append(seen_delay(page, token, answered))
    assert "Live Reader" in page.inner_text("#conversations") and "unread" in page.inner_text("#conversations")
    assert_not_reloaded(page)

    thread = page.context.new_page()
    thread.goto(parley.base + f"/inbox/{contact_of(parley, message_id)}")
    wait_live(thread)
    mark_no_reload(thread)
    for n in range(5):
        token = f"thread-live-{n}-{time.time_ns()}"
        watch_for(thread, "#messages", token)
        _, answered = post_inbound(parley, f"Again {token}")
        thread_delays.append(seen_delay(thread, token, answered))
    assert_not_reloaded(thread)
    assert thread.locator("#messages li").count() == 10
    for name, delays in (("inbox", inbox_delays), ("thread", thread_delays)):
        print(f"\nlive delay on the {name} page (ms): from the API's 200 median "
              f"{statistics.median(d[0] for d in delays):.0f} (max {max(d[0] for d in delays):.0f}); from sending "
              f"the request median {statistics.median(d[1] for d in delays):.0f} (max {max(d[1] for d in delays):.0f})")
    assert page.console_errors == []


def test_browser_reply_reaches_the_receiver_and_turns_sent_live(page, parley, e2e_receiver):
    open_thread(page, parley, "Do you ship to Canada?", "+14155550101", "Ann")
    e2e_receiver.status, e2e_receiver.headers = 200, {}
    before = len(e2e_receiver.requests)
    page.fill("#reply-body", "Yes, we do!")
    page.click("button:has-text('Send reply')")
    page.wait_for_selector(".message.outbound .delivery.status-sent")
    assert page.input_value("#reply-body") == ""
    reply = page.locator(".message.outbound").last
    assert "Yes, we do!" in reply.inner_text() and "Sent" in reply.inner_text()
    assert "User admin@localhost" in reply.inner_text()
    assert [r["body"] for r in e2e_receiver.requests[before:]] == ["Yes, we do!"]
    assert e2e_receiver.requests[-1]["toId"] == "+14155550101" and e2e_receiver.requests[-1]["channel"] == "webchat"
    assert_not_reloaded(page)


def test_browser_failed_delivery_shows_the_error_and_retry_sends_it(page, parley, e2e_receiver):
    open_thread(page, parley, "Where is my order?", "+14155550102", "Ben")
    # The receiver is down for maintenance: 503 with a Retry-After of an hour, so no automatic retry runs
    # during the test and only the Retry button can send it.
    e2e_receiver.status, e2e_receiver.headers = 503, {"Retry-After": "3600"}
    page.fill("#reply-body", "Let me check")
    page.click("button:has-text('Send reply')")
    failed = page.wait_for_selector(".message.outbound .delivery.status-failed")
    text = failed.inner_text()
    assert "Failed" in text and "HTTP 503" in text and "Next automatic retry" in text
    e2e_receiver.status, e2e_receiver.headers = 200, {}  # the receiver recovers
    page.click(".message.outbound .retry button")
    page.wait_for_selector(".message.outbound .delivery.status-sent")
    assert page.locator(".message.outbound .retry").count() == 0
    assert [r["body"] for r in e2e_receiver.requests[-2:]] == ["Let me check", "Let me check"]
    assert_not_reloaded(page)


def record_pause(parley, contact_id, reason="handoff"):
    """Record a bot pause the way the bot does (storage.bot_state.pause_in_tx, its event included), from
    outside the server: the hub's backstop poll finds the event."""
    cx = db_direct.connect(parley)
    try:
        cx.execute("BEGIN IMMEDIATE")
        bot_state.pause_in_tx(cx, parley.first_run["account_id"], contact_id, "2999-01-01T00:00:00.000Z", reason,
                              "2026-01-01T00:00:00.000Z")
        cx.execute("COMMIT")
    finally:
        cx.close()


def test_browser_a_bot_pause_is_shown_live_filtered_and_resumed(page, parley):
    contact_id = open_thread(page, parley, "I want a human", "+14155550103", "Cleo")
    assert "Bot off for this account." in page.inner_text("#bot-state")  # this account's bot is off
    record_pause(parley, contact_id)
    # The bot is off for the account: one state, with the pause as a note (issue 43 item 10).
    page.wait_for_selector("#bot-state .bot-pause-note")
    assert "Bot paused" not in page.inner_text("#bot-state")
    assert "Bot off for this account." in page.inner_text("#bot-state")
    inbox = page.context.new_page()
    inbox.goto(parley.base + "/inbox?filter=paused")
    # The module's other threads have a person's reply: paused too (a reply pauses the bot, on or off).
    cleo = inbox.locator(".conversation", has_text="Cleo")
    assert cleo.count() == 1
    page.click("button:has-text('Resume bot')")
    page.wait_for_selector("#bot-state .bot-pause-note", state="detached")
    assert page.query_selector("#bot-state .is-off")
    assert_not_reloaded(page)
    inbox.goto(parley.base + "/inbox?filter=paused")
    assert cleo.count() == 0


def set_bot(parley, bot):
    with parley.client() as api:
        response = api.patch("/v1/account/settings", params={"apiKey": parley.first_run["api_key"]}, json={"bot": bot})
        assert response.status_code == 200, response.text


def bot_outcome(parley, message_id, timeout=10):
    """The bot's outcome of an inbound message, once it recorded one."""
    deadline = time.monotonic() + timeout
    with parley.client() as api:
        while time.monotonic() < deadline:
            outcome = api.get(f"/v1/messages/{message_id}", params={"apiKey": parley.first_run["api_key"]}
                              ).json()["bot"]
            if outcome is not None:
                return outcome
            time.sleep(0.05)
    raise AssertionError(f"the bot recorded nothing for {message_id}")


def test_browser_a_reply_pauses_the_bot(page, parley, e2e_receiver):
    """A person's reply from the thread pauses the bot for the contact inside the reply's transaction: the
    contact's next message gets no bot answer, and the thread says so."""
    e2e_receiver.status, e2e_receiver.headers = 200, {}
    set_bot(parley, {"active": True, "fallback": "The bot answers this."})
    try:
        contact_id = open_thread(page, parley, "Hello bot", "+14155550104", "Dan")
        page.wait_for_selector(".message.outbound:has-text('The bot answers this.')")  # the bot is on
        page.fill("#reply-body", "A person here")
        page.click("button:has-text('Send reply')")
        page.wait_for_selector(".message.outbound:has-text('A person here') .delivery.status-sent")
        page.wait_for_selector("#bot-state .is-paused", timeout=5000)
        sent_before = len(e2e_receiver.requests)
        message_id, _ = post_inbound(parley, "Are you still there?", from_id="+14155550104")
        assert bot_outcome(parley, message_id)["outcome"] == "paused"
        page.wait_for_selector(f"#m-{message_id} .bot-outcome:has-text('Bot paused: not answered')")
        assert len(e2e_receiver.requests) == sent_before  # no answer went out
        assert contact_of(parley, message_id) == contact_id
        assert_not_reloaded(page)
    finally:
        set_bot(parley, {"active": False})


def test_browser_a_script_body_renders_as_text(page, parley):
    body = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    message_id, _ = post_inbound(parley, body, from_id="+14155550105", firstName="<b>Eve</b>")
    sign_in(page, parley)
    wait_live(page)
    assert "<script>window.__pwned = 1</script>" in page.inner_text("#conversations")
    page.goto(parley.base + f"/inbox/{contact_of(parley, message_id)}")
    assert body in page.inner_text("#messages") and "<b>Eve</b>" in page.inner_text("h1")
    assert page.locator("#messages script, #messages img").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_browser_another_accounts_conversation_is_404(page, parley):
    other = run_cli(parley.data_dir, "create-account", "--name", "Other", "--email", "other@e2e.example")
    message_id, _ = post_inbound(parley, "private", from_id="+14155550199", key=other["api_key"])
    contact_id = contact_of(parley, message_id, key=other["api_key"])
    sign_in(page, parley)
    for path in (f"/inbox/{contact_id}", f"/contacts/{contact_id}"):
        response = page.goto(parley.base + path)
        assert response.status == 404 and "private" not in page.content()


def test_websocket_refuses_a_cross_origin_handshake_and_a_missing_session(page, parley):
    sign_in(page, parley)
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies())
    context = ssl.create_default_context(cafile=parley.cert)
    context.check_hostname = False  # the certificate names localhost; we connect to 127.0.0.1

    async def handshake(headers):
        request = HTTPRequest(f"wss://127.0.0.1:{parley.port}/ws?after=0", headers=headers, ssl_options=context)
        try:
            connection = await websocket_connect(request)
        except HTTPClientError as exc:
            return exc.code
        frames = [json.loads(await connection.read_message())]
        while frames[-1]["type"] == "events":  # what happened since event 0, then "ready"
            frames.append(json.loads(await connection.read_message()))
        connection.close()
        return frames[-1]["type"]

    def attempt(headers):  # in a thread of its own: Playwright's sync API runs an event loop here
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, handshake(headers)).result()

    same = f"https://127.0.0.1:{parley.port}"
    assert attempt({"Cookie": cookie, "Origin": "https://evil.example"}) == 403
    assert attempt({"Cookie": cookie}) == 403  # no Origin at all
    assert attempt({"Origin": same}) == 401
    assert attempt({"Cookie": cookie, "Origin": same}) == "ready"


def test_browser_resumes_after_a_server_restart(page, tmp_path):
    """The page reconnects to the restarted server and gets the message that arrived while it was away."""
    with ParleyProcess(tmp_path / "data") as server:
        first_id, _ = post_inbound(server, "before the restart", from_id="+14155550106")
        sign_in(page, server)
        page.goto(server.base + f"/inbox/{contact_of(server, first_id)}")
        wait_live(page)
        mark_no_reload(page)
        server.stop()
        wait_until(page, "window.Parley.live.state === 'offline'")
        server.start()  # same port and data
        post_inbound(server, "while the page was away", from_id="+14155550106")
        page.wait_for_selector("#messages :text('while the page was away')", timeout=30_000)
        wait_live(page)
        assert_not_reloaded(page)
        assert page.locator("#messages li").count() == 2


@pytest.mark.postgres_too  # the counts query and the restart on PostgreSQL too
def test_browser_counts_are_pushed_and_a_restart_loses_no_message(page, tmp_path):
    """Issue 37: nothing in the UI polls. A page without live events (Settings) gets the navigation's counts
    pushed over its socket, asking the server nothing; the inbox and a thread, open while the server restarts,
    show the message that arrived meanwhile, without a reload, and the counts follow."""
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    with ParleyProcess(tmp_path / "data") as server:
        first_id, _ = post_inbound(server, "before the restart", from_id="+14155550107")
        contact_id = contact_of(server, first_id)
        sign_in(page, server)
        page.goto(server.base + "/settings")
        wait_until(page, "window.Parley.live && window.Parley.live.state === 'live' && window.Parley.live.counts")
        assert page.inner_text("#nav-unread .count") == "1"
        mark_no_reload(page)
        requests.clear()
        post_inbound(server, "a second person", from_id="+14155550108")
        wait_until(page, "document.querySelector('#nav-unread .count').textContent === '2'")
        time.sleep(1.5)  # a page that polled once a second would have asked by now
        assert requests == [], requests  # pushed: not one request, /inbox/needs-person or any other
        assert page.evaluate("window.Parley.live.countsOnly && window.Parley.live.events") == 0
        assert_not_reloaded(page)

        inbox = page.context.new_page()
        inbox.goto(server.base + "/inbox")
        wait_live(inbox)
        page.goto(server.base + f"/inbox/{contact_id}")  # opening the thread reads it: unread 1
        wait_live(page)
        wait_until(inbox, "document.querySelector('#nav-unread .count').textContent === '1'")
        for open_one in (page, inbox):
            mark_no_reload(open_one)
        server.stop()
        for open_one in (page, inbox):
            wait_until(open_one, "window.Parley.live.state === 'offline'")
        server.start()  # same port and data
        post_inbound(server, "while the pages were away", from_id="+14155550107")
        post_inbound(server, "a third person, meanwhile", from_id="+14155550109")
        page.wait_for_selector("#messages :text('while the pages were away')", timeout=30_000)
        inbox.wait_for_selector("#conversations :text('a third person, meanwhile')", timeout=30_000)
        # Unread: the second and the third person (the open thread marks its new message read).
        wait_until(inbox, "document.querySelector('#nav-unread .count').textContent === '2'", timeout=30)
        for open_one in (page, inbox):
            wait_live(open_one)
            assert_not_reloaded(open_one)
        assert page.locator("#messages li").count() == 2
        assert not [url for url in requests if "/inbox/needs-person" in url]
        inbox.close()
