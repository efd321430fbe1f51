"""The website chat widget (issue 38, docs/guide.md "Website chat widget"): its settings, id, snippet and identity
secret; replies by channel; the visitors' API. In-process, on both databases."""
import asyncio
import gzip
import hashlib
import hmac
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from services import accounts, messaging, presence, typing, widget
from services.live import Subscriber
from storage.db import fetch_all, reads
from tests import db_direct
from tests.media_files import PNG, data_uri
from tests.ui_fixtures import ui_account  # noqa: F401 (fixture)
from tests.live_helpers import Socket as LiveSocket
from tests.process_helpers import second_process
from tests.ui_helpers import PASSWORD, FormClient
from tests.widget_helpers import Visitor, enable
from tests.waiting import Clock, until

@reads
def _outbox_count(cx, account_id):
    """Replies queued for the webhook (a reply on web has none)."""
    return cx.execute("SELECT COUNT(*) FROM outbox WHERE account_id = ? AND kind = 'reply'", (account_id,)).fetchone()[0]


GOOD = {"enabled": True, "allowedOrigins": ["https://www.Example.com:443", "http://localhost:8000"],
        "title": "Bakery", "greeting": "Hello! Ask us anything.", "color": "#FF8800", "requireIdentity": False}


@pytest.mark.parametrize("origin", ["*", "example.com", "https://example.com/", "https://example.com/path",
                                    "https://*.example.com", "ftp://example.com", "https://user@example.com",
                                    "https://example.com?x=1", "https://"])
def test_only_full_origins_are_allowed(origin):
    with pytest.raises(ValueError):
        widget.normalize_origin(origin)


def test_origins_are_normalized_as_browsers_send_them():
    assert widget.normalize_origin("HTTPS://Shop.Example.com:443") == "https://shop.example.com"
    assert widget.normalize_origin("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
    assert widget.normalize_origin("http://[::1]:80") == "http://[::1]"


def test_identity_hash_is_the_documented_hmac():
    assert widget.identity_hash("s3cret", "user-42") == hmac.new(b"s3cret", b"user-42", hashlib.sha256).hexdigest()


async def test_widget_settings_are_validated_and_stored_whole(api, account):
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", {"widget": GOOD}, key=key)
    assert r.code == 200, r.body
    assert r.json["widget"] == {**GOOD, "allowedOrigins": ["https://www.example.com", "http://localhost:8000"],
                                "color": "#ff8800"}
    partial = await api.patch("/v1/account/settings", {"widget": {"enabled": True}}, key=key)
    assert partial.json["widget"] == {"enabled": True, "allowedOrigins": [], "title": None, "greeting": None,
                                      "color": widget.DEFAULT_COLOR, "requireIdentity": False}
    for bad, field in (({"allowedOrigins": ["example.com"]}, "widget.allowedOrigins[0]"),
                       ({"color": "red"}, "widget.color"), ({"color": "#12345"}, "widget.color"),
                       ({"enabled": "yes"}, "widget.enabled"), ({"title": "x" * 61}, "widget.title"),
                       ({"size": 3}, "widget.size")):
        r = await api.patch("/v1/account/settings", {"widget": bad}, key=key)
        assert r.code == 400 and field in r.json["error"]["message"], (bad, r.body)
    assert (await api.get("/v1/account", key=key)).json["settings"]["widget"]["enabled"] is True  # unchanged
    removed = await api.patch("/v1/account/settings", {"widget": None}, key=key)
    assert "widget" not in removed.json


async def test_widget_id_snippet_and_an_identity_secret_shown_once(api, account, other_account, services):
    key = account["api_key"]
    first = (await api.get("/v1/account/widget", key=key)).json
    assert first["widgetId"].startswith("wid_") and first["identitySecretSet"] is False
    assert first["snippet"] == (f'<script src="{services.settings.base_url}/widget.js" '
                                f'data-widget="{first["widgetId"]}" async></script>')
    assert (await api.get("/v1/account/widget", key=key)).json == first  # one widget per account
    other = (await api.get("/v1/account/widget", key=other_account["api_key"])).json
    assert other["widgetId"] != first["widgetId"]

    made = await api.post("/v1/account/widget/identity-secret", key=key)
    assert made.code == 200 and len(made.json["identitySecret"]) == 64
    assert (await api.get("/v1/account/widget", key=key)).json["identitySecretSet"] is True
    again = (await api.post("/v1/account/widget/identity-secret", key=key)).json
    assert again["identitySecret"] != made.json["identitySecret"]  # rotates
    stored = await widget.store.get_widget(services.db, account["account_id"])
    assert made.json["identitySecret"] not in str(stored) and again["identitySecret"] not in str(stored)  # encrypted
    assert services.box.decrypt(stored["identity_secret"]) == again["identitySecret"]


async def test_settings_page_shows_the_snippet_and_saves_the_widget(http_server_client, api, ui_account):
    browser = FormClient(http_server_client)
    assert (await browser.login(ui_account["email"])).code == 303
    page = await browser.get("/settings")
    info = (await api.get("/v1/account/widget", key=ui_account["api_key"])).json
    assert 'id="chat-widget"' in page.text and f'data-widget=&#34;{info["widgetId"]}&#34;' in page.text
    form = {"enabled": "on", "allowedOrigins": "https://shop.example\nhttp://localhost:9000", "title": "Hi",
            "greeting": "", "color": "#123abc"}
    saved = await browser.post("/settings/widget", form)
    assert saved.code == 303, saved.text[saved.text.find("<main"):][:1500]
    stored = (await api.get("/v1/account", key=ui_account["api_key"])).json["settings"]["widget"]
    assert stored["allowedOrigins"] == ["https://shop.example", "http://localhost:9000"] and stored["enabled"]
    refused = await browser.post("/settings/widget", {**form, "color": "blue"})
    assert refused.code == 400 and "widget.color" in refused.text and "blue" in refused.text
    secret = await browser.post("/settings/widget/identity-secret")
    assert secret.code == 200 and 'id="widget-identity-secret"' in secret.text
    assert "widget-identity-secret" not in (await browser.get("/settings")).text  # shown once


# ---- replies by channel: POST /v1/contacts/{contactId}/messages ------------------------------------

async def _inbound(services, account_id, sid, from_id, channel, body="Hello"):
    message, created = await messaging.receive_inbound(services, account_id, message_sid=sid, from_id=from_id,
                                                       to_id=None, body=body, channel=channel)
    assert created
    return message


async def test_a_reply_goes_on_the_newest_inbound_channel_unless_one_is_named(api, account, services):
    key, account_id = account["api_key"], account["account_id"]
    web = await _inbound(services, account_id, "w1", "web:vis_1", "web")
    contact_id = web["contact_id"]
    # No Custom Channel Webhook URL: a reply on web needs none, it is delivered by being stored.
    r = await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "Hi there"}, key=key)
    assert r.code == 201, r.body
    assert {k: r.json[k] for k in ("channel", "status", "toId", "direction", "author", "body")} == {
        "channel": "web", "status": "Sent", "toId": "web:vis_1", "direction": "outbound", "author": "api",
        "body": "Hi there"}
    assert await _outbox_count(services.db, account_id) == 0

    await messaging.receive_inbound(services, account_id, message_sid="c1", from_id="web:vis_1", to_id=None,
                                    body="via bridge", channel="telegram")
    no_webhook = await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "On telegram"}, key=key)
    assert no_webhook.code == 400 and "Custom Channel Webhook" in no_webhook.json["error"]["message"]
    await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "https://hooks.example.com/p"}, key=key)
    custom = await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "On telegram"}, key=key)
    assert custom.code == 201 and (custom.json["channel"], custom.json["status"]) == ("telegram", "Pending")
    assert await _outbox_count(services.db, account_id) == 1
    named = await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "Back on the site", "channel": "web"},
                           key=key)
    assert named.code == 201 and (named.json["channel"], named.json["status"]) == ("web", "Sent")
    assert await _outbox_count(services.db, account_id) == 1


async def test_bad_replies_by_channel_change_nothing(api, account, other_account, services):
    key, account_id = account["api_key"], account["account_id"]
    custom = await _inbound(services, account_id, "c1", "+14155550100", "telegram")
    path = f"/v1/contacts/{custom['contact_id']}/messages"
    before = (await api.get(path, key=key)).json["data"]
    for body, field in (({"channel": "web", "body": "x"}, "channel"), ({"body": "  "}, "body"), ({}, "body"),
                        ({"body": "x", "channel": ""}, "channel"), ({"body": "x", "extra": 1}, "extra")):
        r = await api.post(path, body, key=key)
        assert r.code == 400 and field in r.json["error"]["message"], (body, r.body)
    assert (await api.get(path, key=key)).json["data"] == before
    other = await api.post(path, {"body": "x", "channel": "web"}, key=other_account["api_key"])
    assert other.code == 404 and other.json["error"]["code"] == "CONTACT_NOT_FOUND"


# ---- the visitors' API: /widget/{widgetId}/… --------------------------------------------------------

TIMEOUT = 30


@reads
def _count(cx, table, account_id):
    return cx.execute(f"SELECT COUNT(*) FROM {table} WHERE account_id = ?", (account_id,)).fetchone()[0]


@reads
def _contacts(cx, account_id):
    return fetch_all(cx, "SELECT id, email, first_name, last_name FROM contacts WHERE account_id = ? ORDER BY id",
                     (account_id,))


async def test_a_visitor_writes_an_agent_replies_and_the_visitor_gets_it_live(api, account, services):
    key, account_id = account["api_key"], account["account_id"]
    widget_id = await enable(api, account)
    visitor = Visitor(api, widget_id)
    opened = await visitor.history()
    assert opened["messages"] == [] and opened["verified"] is False
    assert await _count(services.db, "contacts", account_id) == 0  # nothing stored before the visitor writes

    sent = await visitor.send("Do you deliver on Sundays?")
    assert sent.code == 201, sent.body
    assert sent.json["message"]["mine"] is True and visitor.token
    contact_id = (await _contacts(services.db, account["account_id"]))[0]["id"]
    [inbound] = (await api.get(f"/v1/contacts/{contact_id}/messages", key=key)).json["data"]
    assert (inbound["channel"], inbound["direction"], inbound["fromId"][:8]) == ("web", "inbound", "web:vis_")
    events = (await api.get("/v1/events?types=message.created", key=key)).json["data"]
    assert [e["data"]["id"] for e in events] == [inbound["id"]]

    waiting = asyncio.ensure_future(visitor.updates(opened["cursor"], wait=20))  # a long-poll, woken by the reply
    await asyncio.sleep(0)
    reply = await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "Yes, until noon."}, key=key)
    assert reply.code == 201 and reply.json["status"] == "Sent"
    first = (await asyncio.wait_for(waiting, TIMEOUT)).json
    shown = [m for m in first["messages"]]
    if not any(not m["mine"] for m in shown):  # the poll answered with the visitor's own message first
        shown += (await visitor.updates(first["cursor"], wait=20)).json["messages"]
    assert [(m["mine"], m["body"]) for m in shown] == [(True, "Do you deliver on Sundays?"),
                                                        (False, "Yes, until noon.")]
    assert set(shown[1]) == {"id", "mine", "author", "body", "media", "createdAt", "csat"}  # no agent, contact, account

    # Back later (a reload): the history has both; another visitor's (or a forged) token sees none of it.
    assert [m["body"] for m in (await visitor.history())["messages"]] == ["Do you deliver on Sundays?",
                                                                         "Yes, until noon."]
    stranger = Visitor(api, widget_id)
    await stranger.send("Hello?")
    assert [m["body"] for m in (await stranger.history())["messages"]] == ["Hello?"]
    assert (await Visitor(api, widget_id, token=visitor.token[:-4] + "AAAA").history())["messages"] == []


async def test_a_waiting_visitor_whose_contact_is_merged_gets_the_reply_to_the_kept_one(api, account, services):
    """A visitor's wait wakes only for events naming their contact (not for every event of the account); when
    that contact is merged into another, contact.merged names it, and the wait follows the kept contact."""
    key = account["api_key"]
    widget_id = await enable(api, account)
    visitor = Visitor(api, widget_id)
    assert (await visitor.send("Is my order ready?")).code == 201
    cursor = (await visitor.history())["cursor"]
    [chat] = await _contacts(services.db, account["account_id"])
    kept = (await api.post("/v1/contacts", {"email": "known@example.com"}, key=key)).json["id"]
    waiting = asyncio.ensure_future(visitor.updates(cursor, wait=25))
    await asyncio.sleep(0.2)  # waiting
    assert (await api.post(f"/v1/contacts/{kept}/merge", {"otherId": chat["id"]}, key=key)).code == 200
    reply = await api.post(f"/v1/contacts/{kept}/messages", {"body": "Ready at 4.", "channel": "web"}, key=key)
    assert reply.code == 201, reply.body
    got = (await asyncio.wait_for(waiting, 10)).json  # well before its 25 s
    assert [m["body"] for m in got["messages"]] == ["Ready at 4."]


async def test_the_websocket_resumes_from_its_cursor(api, account, http_server_client, services):
    key = account["api_key"]
    widget_id = await enable(api, account)
    visitor = Visitor(api, widget_id)
    await visitor.send("Hi")
    cursor = (await visitor.history())["cursor"]
    contact_id = (await _contacts(services.db, account["account_id"]))[0]["id"]
    # Offline: a reply comes while no socket is open; the socket opened later from the cursor brings it.
    await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "While you were away"}, key=key)
    port = http_server_client.get_http_port()
    url = f"ws://127.0.0.1:{port}/widget/{widget_id}/live?after={cursor}"
    socket = await websocket_connect(HTTPRequest(url, headers={"Origin": f"https://127.0.0.1:{port}"}))
    socket.write_message(json.dumps({"token": visitor.token}))
    frame = json.loads(await asyncio.wait_for(socket.read_message(), TIMEOUT))
    assert frame["type"] == "messages" and [m["body"] for m in frame["messages"]] == ["While you were away"]
    await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "And now, live"}, key=key)
    frame = json.loads(await asyncio.wait_for(socket.read_message(), TIMEOUT))
    assert [m["body"] for m in frame["messages"]] == ["And now, live"]
    socket.close()
    with pytest.raises(HTTPClientError) as refused:  # another site's page cannot open it
        await websocket_connect(HTTPRequest(url, headers={"Origin": "https://evil.example"}))
    assert refused.value.code == 403


async def test_a_websocket_token_that_is_no_string_is_no_token(api, account, http_server_client):
    """{"token": 5} is refused as a missing token is (closed with 4000 and the reason), not a server error."""
    widget_id = await enable(api, account)
    port = http_server_client.get_http_port()
    for first in ({"token": 5}, {"token": ["x"]}, {}):
        socket = await websocket_connect(HTTPRequest(f"ws://127.0.0.1:{port}/widget/{widget_id}/live",
                                                     headers={"Origin": f"https://127.0.0.1:{port}"}))
        socket.write_message(json.dumps(first))
        assert await asyncio.wait_for(socket.read_message(), TIMEOUT) is None
        assert socket.close_code == 4000, (first, socket.close_code, socket.close_reason)


async def test_identity_binds_a_contact_across_browsers_and_a_wrong_hash_binds_nothing(api, account, services):
    key = account["api_key"]
    widget_id = await enable(api, account)
    secret = (await api.post("/v1/account/widget/identity-secret", key=key)).json["identitySecret"]
    good = widget.identity_hash(secret, "cust-7")
    laptop, phone, forger = Visitor(api, widget_id), Visitor(api, widget_id), Visitor(api, widget_id)
    assert (await laptop.identify("cust-7", good, email="ada@example.com", name="Ada Lovelace"))["verified"]
    await laptop.send("From my laptop")
    assert (await phone.identify("cust-7", good.upper()))["verified"]
    assert [m["body"] for m in (await phone.history())["messages"]] == ["From my laptop"]
    await phone.send("And from my phone")
    [contact] = await _contacts(services.db, account["account_id"])  # one contact for both browsers
    assert (contact["email"], contact["first_name"], contact["last_name"]) == ("ada@example.com", "Ada", "Lovelace")

    wrong = await forger.identify("cust-7", widget.identity_hash("not the secret", "cust-7"))
    assert wrong == {"verified": False, "token": None} and forger.token is None
    assert (await forger.history())["messages"] == []
    await forger.send("I am someone else")
    assert len(await _contacts(services.db, account["account_id"])) == 2  # bound to nobody's contact

    await enable(api, account, requireIdentity=True)
    refused = await Visitor(api, widget_id).send("Anonymous")
    assert refused.code == 403 and refused.json["error"]["code"] == "IDENTITY_REQUIRED"
    assert (await phone.send("Still me")).code == 201


async def test_an_anonymous_chat_goes_with_the_visitor_who_identifies(api, account, services):
    """Written anonymously, then identified: the chat is the id's (its first sight), and on another browser an
    anonymous chat is merged into the id's contact; the visitor's history has all of it, one contact."""
    key = account["api_key"]
    widget_id = await enable(api, account)
    good = widget.identity_hash((await api.post("/v1/account/widget/identity-secret", key=key)).json["identitySecret"],
                                "cust-9")
    laptop, phone = Visitor(api, widget_id), Visitor(api, widget_id)
    await laptop.send("Before signing in")
    assert (await laptop.identify("cust-9", good))["verified"]
    await laptop.send("Signed in now")
    await phone.send("From my phone, anonymous")
    assert (await phone.identify("cust-9", good))["verified"]
    assert [m["body"] for m in (await phone.history())["messages"]] == [
        "Before signing in", "Signed in now", "From my phone, anonymous"]
    assert len(await _contacts(services.db, account["account_id"])) == 1


async def test_abuse_limits_and_other_sites(api, account, services):
    key, account_id = account["api_key"], account["account_id"]
    widget_id = await enable(api, account)
    visitor = Visitor(api, widget_id)
    too_long = await visitor.send("x" * (widget.MAX_BODY + 1))
    assert too_long.code == 400 and "body" in too_long.json["error"]["message"]
    assert (await visitor.send("  ")).code == 400
    bot = await visitor.send("buy now", website="https://spam.example")
    assert bot.code == 201 and bot.json["message"] is None
    crawler = await Visitor(api, widget_id, user_agent="Mozilla/5.0 (compatible; Googlebot/2.1)").send("hi")
    assert crawler.code == 403
    assert await _count(services.db, "contacts", account_id) == 0  # neither made a contact
    elsewhere = await api.post(f"/widget/{widget_id}/messages", {"body": "hi"},
                               headers={"Origin": "https://evil.example"})
    assert elsewhere.code == 403 and "access-control-allow-origin" not in elsewhere.headers
    codes = [(await visitor.send(f"message {n}")).code for n in range(widget.VISITOR_PER_MINUTE + 1)]
    assert codes[:widget.VISITOR_PER_MINUTE] == [201] * widget.VISITOR_PER_MINUTE and codes[-1] == 429
    limited = await visitor.send("one more")
    assert "too quickly" in limited.json["error"]["message"] and limited.headers["Retry-After"]

    await api.patch("/v1/account/settings", {"widget": {"enabled": False}}, key=key)
    assert (await visitor.send("closed?")).code == 404
    assert (await api.get(f"/widget/wid_{'0' * 26}/messages")).code == 404


async def test_the_frame_is_framed_only_by_the_allowed_origins(api, account, http_server_client):
    def page(path):
        return http_server_client.fetch(path, raise_error=False)
    widget_id = await enable(api, account, title="Bakery <chat>", greeting="Hello!")
    frame = await page(f"/widget/{widget_id}")
    assert frame.code == 200
    csp = frame.headers["Content-Security-Policy"]
    assert "frame-ancestors https://shop.example" in csp and "script-src 'self'" in csp
    text = frame.body.decode()
    assert "Bakery &lt;chat&gt;" in text and 'for="body"' in text and "<script>" not in text
    await api.patch("/v1/account/settings", {"widget": {"enabled": False}}, key=account["api_key"])
    gone = await page(f"/widget/{widget_id}")
    assert gone.code == 404 and "frame-ancestors 'none'" in gone.headers["Content-Security-Policy"]
    loader = await page("/widget.js")
    assert loader.code == 200 and "javascript" in loader.headers["Content-Type"]


def test_the_loader_and_the_frame_stay_within_their_size_budgets():
    """Issue 38: /widget.js at most 6 KB gzipped; the frame with everything it loads at most 45 KB gzipped."""
    root = Path(__file__).resolve().parent.parent

    def gzipped(*paths):
        return sum(len(gzip.compress((root / p).read_bytes(), 9)) for p in paths)
    assert gzipped("static/widget.js") <= 6 * 1024
    assert gzipped("templates/widget_frame.html", "static/widget-frame.js", "static/widget-frame.css") <= 45 * 1024
    frame = (root / "templates/widget_frame.html").read_text()
    assert re.findall(r'(?:src|href)="([^"]+)"', frame) == ["{{ static_url('widget-frame.css') }}",
                                                           "{{ static_url('widget-frame.js') }}"]  # nothing else


async def test_the_bot_answers_visitors_and_erasure_empties_their_chat(api, account, services):
    key, account_id = account["api_key"], account["account_id"]
    widget_id = await enable(api, account)
    # No Custom Channel Webhook URL: the bot's answer goes to the widget, which needs none.
    r = await api.patch("/v1/account/settings", {"bot": {"active": True, "rules": [
        {"keywords": ["open"], "answer": "We open at 8."}]}}, key=key)
    assert r.code == 200, r.body
    visitor = Visitor(api, widget_id)
    await visitor.send("When do you open?")
    await services.bot.idle()
    assert [(m["mine"], m["author"], m["body"]) for m in (await visitor.history())["messages"]] == [
        (True, "contact", "When do you open?"), (False, "bot", "We open at 8.")]

    [contact] = await _contacts(services.db, account_id)
    assert (await api.delete(f"/v1/contacts/{contact['id']}", key=key)).code == 200
    assert (await visitor.history())["messages"] == []  # nothing of the erased conversation stays visible
    assert (await visitor.send("Hello again")).code == 201  # a new contact, from scratch
    assert [c["id"] for c in await _contacts(services.db, account_id)] != [contact["id"]]


async def test_the_inbox_says_whether_a_web_contact_is_verified(http_server_client, api, ui_account, services):
    key = ui_account["api_key"]
    widget_id = await enable(api, ui_account)
    secret = (await api.post("/v1/account/widget/identity-secret", key=key)).json["identitySecret"]
    anonymous, known = Visitor(api, widget_id), Visitor(api, widget_id)
    await anonymous.send("Hi")
    await known.identify("cust-1", widget.identity_hash(secret, "cust-1"))
    await known.send("Hello, it's me")
    browser = FormClient(http_server_client)
    assert (await browser.login(ui_account["email"])).code == 303
    badges = {}
    for contact in await _contacts(services.db, ui_account["account_id"]):
        page = (await browser.get(f"/inbox/{contact['id']}")).text
        badges[contact["id"]] = [b for b in ("Website chat: verified", "Website chat: not verified") if b in page]
        # The agent's reply from the inbox goes back to the visitor's chat.
        assert (await browser.post(f"/inbox/{contact['id']}/reply", {"body": "Hello from the inbox"})).code == 303
    assert sorted(badges.values()) == [["Website chat: not verified"], ["Website chat: verified"]]
    for visitor in (anonymous, known):
        assert (await visitor.history())["messages"][-1]["body"] == "Hello from the inbox"


async def test_visitors_and_agents_attach_images_and_pdfs(api, account, services, http_server_client):
    key = account["api_key"]
    widget_id = await enable(api, account)
    visitor = Visitor(api, widget_id)
    sent = await visitor.send("my receipt", mediaUrl=data_uri("image/png", PNG), mediaContentType="image/png")
    assert sent.code == 201, sent.body
    shown = sent.json["message"]["media"]
    assert shown["contentType"] == "image/png" and "/v1/media/" in shown["url"]
    for media_url, content_type, field in (
            ("https://cdn.example.com/a.png", "image/png", "mediaUrl"),  # a link is not a file
            (data_uri("text/html", b"<p>hi</p>"), "text/html", "mediaContentType"),
            (data_uri("application/pdf", PNG), "application/pdf", "mediaContentType")):  # sniffed: PNG bytes
        refused = await visitor.send("x", mediaUrl=media_url, mediaContentType=content_type)
        assert refused.code == 400 and field in refused.json["error"]["message"], refused.body
    contact_id = (await _contacts(services.db, account["account_id"]))[0]["id"]
    reply = await api.post(f"/v1/contacts/{contact_id}/messages",
                           {"body": "Our menu", "mediaUrl": data_uri("application/pdf", b"%PDF-1.4\n%%EOF\n"),
                            "mediaContentType": "application/pdf"}, key=key)
    assert reply.code == 201 and reply.json["channel"] == "web", reply.body
    history = (await visitor.history())["messages"]
    assert [(m["body"], m["media"]["contentType"]) for m in history] == [("my receipt", "image/png"),
                                                                         ("Our menu", "application/pdf")]
    path = history[0]["media"]["url"].split("://", 1)[1].split("/", 1)[1]
    image = await http_server_client.fetch("/" + path, raise_error=False)
    assert image.code == 200 and image.body == PNG


# ---- outside business hours (issue 40): "We reply from …" and an email to answer at ------------------------

async def test_outside_hours_the_chat_says_when_it_replies_and_keeps_the_email_a_visitor_leaves(api, account,
                                                                                                services):
    key, account_id = account["api_key"], account["account_id"]
    services.clock = Clock(datetime(2026, 3, 7, 12, 0, tzinfo=timezone.utc))  # Saturday 13:00 in Berlin
    widget_id = await enable(api, account)
    visitor = Visitor(api, widget_id)
    assert {k: (await visitor.history())[k] for k in ("openNow", "nextOpenAt", "replyFrom")} == {
        "openNow": True, "nextOpenAt": None, "replyFrom": None}  # no business hours: always open
    hours = {"timezone": "Europe/Berlin", "weekly": {d: [["09:00", "17:00"]] for d in ("mon", "tue", "wed", "thu")}}
    assert (await api.call("PUT", "/v1/account/business-hours", hours, key=key)).code == 200
    closed = await visitor.history()
    assert (closed["openNow"], closed["nextOpenAt"], closed["replyFrom"]) == (
        False, "2026-03-09T08:00:00.000Z", "Mon 9:00 (Europe/Berlin)")
    services.clock.now = datetime(2026, 3, 9, 6, 0, tzinfo=timezone.utc)  # Monday 7:00: today
    assert (await visitor.history())["replyFrom"] == "9:00 (Europe/Berlin)"
    services.clock.now = datetime(2026, 3, 9, 9, 0, tzinfo=timezone.utc)  # Monday 10:00: open
    opened = await visitor.history()
    assert (opened["openNow"], opened["nextOpenAt"], opened["replyFrom"]) == (True, None, None)

    # The email: refused naming the field when bad; kept in the token only (nothing stored) before the first
    # message, which makes the contact with it; a visitor who wrote already gets it on their contact at once.
    before = db_direct.dump_text(services)
    for bad in ("not an email", "a@", "x" * 190 + "@example.com"):
        r = await api.post(f"/widget/{widget_id}/email", {"email": bad}, headers=visitor.headers())
        assert r.code == 400 and "email" in r.json["error"]["message"], (bad, r.body)
    saved = await api.post(f"/widget/{widget_id}/email", {"email": " Ada@Example.com "}, headers=visitor.headers())
    assert saved.code == 200 and saved.json["email"] == "ada@example.com", saved.body
    assert db_direct.dump_text(services) == before  # nothing stored before the visitor writes
    visitor.token = saved.json["token"]
    assert (await visitor.send("Are you open on Sunday?")).code == 201
    [contact] = await _contacts(services.db, account_id)
    assert contact["email"] == "ada@example.com"

    early = Visitor(api, widget_id)
    assert (await early.send("Hello?")).code == 201
    later = await api.post(f"/widget/{widget_id}/email", {"email": "bo@example.com"}, headers=early.headers())
    assert later.code == 200, later.body
    assert sorted(c["email"] for c in await _contacts(services.db, account_id)) == ["ada@example.com",
                                                                                    "bo@example.com"]
    # Another's address is never taken (nor its holder named): the contact keeps none.
    third = Visitor(api, widget_id)
    await third.send("Me too")
    taken = await api.post(f"/widget/{widget_id}/email", {"email": "ada@example.com"}, headers=third.headers())
    assert taken.code == 200 and "ct_" not in taken.body.decode()
    assert sorted(str(c["email"]) for c in await _contacts(services.db, account_id)) == [
        "None", "ada@example.com", "bo@example.com"]


# ---- typing indicators both ways (issue 38): ephemeral, throttled, per account ----------------------------

def test_a_typist_is_relayed_at_most_once_per_throttle_period():
    clock = Clock(100.0)
    relay = typing.Typing(hub=None, db=None, clock=clock)
    assert relay.allowed("visitor-1") and not relay.allowed("visitor-1") and relay.allowed("visitor-2")
    clock.now = 100.0 + typing.THROTTLE_SECONDS - 0.1
    assert not relay.allowed("visitor-1")
    clock.now = 100.0 + typing.THROTTLE_SECONDS
    assert relay.allowed("visitor-1")
    for text in ('{"type": "typing"}', '{"type": "typing", "contactId": "x"}', "[]", "typing", "x" * 300):
        with pytest.raises(ValueError):
            presence.page_message(text)
    assert presence.page_message('{"type": "typing", "contactId": "ct_1"}') == ("typing", "ct_1")


async def _page(http_server_client, services, email, contact_id):
    """An inbox thread page of the account whose owner is email, live on its /ws and viewing contact_id."""
    client = FormClient(http_server_client)
    assert (await client.login(email)).code == 303
    socket = await LiveSocket.open(http_server_client, client.cookies, 0)
    await socket.until(lambda f: f["type"] == "ready")
    socket.connection.write_message(json.dumps({"type": "viewing", "contactId": contact_id}))
    return socket


async def _visitor_socket(http_server_client, widget_id, cursor, token):
    port = http_server_client.get_http_port()
    socket = await websocket_connect(HTTPRequest(f"ws://127.0.0.1:{port}/widget/{widget_id}/live?after={cursor}",
                                                 headers={"Origin": f"https://127.0.0.1:{port}"}))
    socket.write_message(json.dumps({"token": token}))
    return socket


async def test_typing_reaches_the_thread_page_and_the_visitor_and_is_never_stored(
        api, ui_account, services, http_server_client):
    account_id = ui_account["account_id"]
    other = await accounts.create_account(services.db, services.box, services.keys, name="Other",
                                          email="owner@other.example", password=PASSWORD)
    widget_id = await enable(api, ui_account)
    visitor = Visitor(api, widget_id)
    await visitor.send("Hi")
    contact_id = (await _contacts(services.db, account_id))[0]["id"]
    page = await _page(http_server_client, services, ui_account["email"], contact_id)
    # The other account's page says it views this account's conversation: it must get nothing of it.
    stranger = await _page(http_server_client, services, other["email"], contact_id)
    assert await until(lambda: len(services.hub.presence.viewers(account_id, contact_id)) == 1
                       and services.hub.presence.viewers(other["account_id"], contact_id))
    chat = await _visitor_socket(http_server_client, widget_id, (await visitor.history())["cursor"], visitor.token)
    before = db_direct.dump_text(services)
    relayed = []
    services.typing.elsewhere = relayed.append  # what would go to other processes: every signal relayed

    chat.write_message(json.dumps({"type": "typing"}))
    chat.write_message(json.dumps({"type": "typing"}))  # within the throttle period: not relayed
    assert await page.until(lambda f: f["type"] == "typing") == {
        "type": "typing", "contactId": contact_id, "who": "visitor", "expiresIn": typing.EXPIRES_SECONDS}
    assert [json.loads(r) for r in relayed] == [{"k": "visitor", "a": account_id, "c": contact_id}]
    page.connection.write_message(json.dumps({"type": "typing", "contactId": contact_id}))
    assert json.loads(await asyncio.wait_for(chat.read_message(), TIMEOUT)) == {
        "type": "typing", "expiresIn": typing.EXPIRES_SECONDS}  # never which agent
    # The other account's page typing "to" this contact relays nothing: its account maps no visitor to it.
    [stranger_page] = services.hub.presence.viewers(other["account_id"], contact_id)
    await services.typing.agent_typing(stranger_page, contact_id)
    assert [json.loads(r)["k"] for r in relayed] == ["visitor", "agent"]

    # Nothing stored, nothing in the event stream; the stranger's first frame after its presence is its own event.
    assert db_direct.dump_text(services) == before
    assert [e["type"] for e in (await api.get("/v1/events", key=ui_account["api_key"])).json["data"]] == [
        "contact.created", "message.created"]
    theirs = await messaging.receive_inbound(services, other["account_id"], message_sid="o1", from_id="+14155550199",
                                             to_id=None, body="Hello", channel="sms")
    frame = await stranger.until(lambda f: f["type"] != "presence")
    assert frame["type"] == "events" and frame["events"][0]["data"]["messageId"] == theirs[0]["id"]
    for socket in (page, stranger):
        socket.close()
    chat.close()


@pytest.mark.postgres_only
def test_typing_crosses_server_processes_by_notify(io_loop, services, settings, tmp_path, account):
    """Two processes on one PostgreSQL database: a visitor's typing on one reaches the thread page on the other,
    and an agent's typing there reaches the visitor's chat here (the payload of a NOTIFY, never a row)."""
    other_process = second_process(io_loop, settings, tmp_path)

    class Page:
        def __init__(self):
            self.frames = []

        def write(self, frame):
            self.frames.append(json.loads(frame.data))
            done = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done

        def close(self, code, reason):
            pass

    async def run():
        await services.listener.connected.wait()
        await other_process.listener.connected.wait()
        message, _ = await messaging.receive_inbound(services, account["account_id"], message_sid="w1",
                                                     from_id="web:vis_1", to_id=None, body="Hi", channel="web")
        page = Page()
        viewer = Subscriber(other_process.hub, account["account_id"], "usr_1", page)
        other_process.hub.presence.view(viewer, message["contact_id"])
        await services.typing.visitor_typing(account["account_id"], "web:vis_1")
        assert await until(lambda: any(f["type"] == "typing" for f in page.frames))
        assert [f for f in page.frames if f["type"] == "typing"] == [
            {"type": "typing", "contactId": message["contact_id"], "who": "visitor", "expiresIn": 5}]
        shown = []
        services.typing.join(account["account_id"], "web:vis_1", shown.append)
        await other_process.typing.agent_typing(viewer, message["contact_id"])
        assert await until(lambda: shown) and shown == [{"type": "typing", "expiresIn": 5}]
    try:
        io_loop.run_sync(run, timeout=30)
    finally:
        io_loop.run_sync(other_process.close)
