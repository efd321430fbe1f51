"""The website chat widget in Chromium (issue 38), embedded in a page served from another origin (a small local
HTTP server on another port) against the real server.py over HTTPS with its CSP: a visitor writes, an agent
replies through the API, the visitor sees it live (and the page's Parley.on("message") is called); a reload keeps
the history; identity holds across browser contexts and a forged hash binds nothing; the frame is refused on a
page whose origin is not allowed. One test: the checks share a server."""
import http.server
import threading
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from services import widget
from tests.media_files import PNG
from tests.parley_process import ParleyProcess, free_port
from tests.inbound_helpers import wait_live
from tests.ui_helpers import axe_violations, open_page, report, sign_in, wait_until

PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Bakery</title></head>
<body><h1>The bakery</h1>
<script>window.__replies = []; window.addEventListener("load", function () {
  Parley.on("message", function (m) { window.__replies.push(m.body); }); });
window.__identified = []; window.addEventListener("message", function (e) {
  if (e.data && e.data.parley === "identified") window.__identified.push(e.data.verified); });</script>
%s
</body></html>"""


class HostSite:
    """A customer's website: one page with the snippet, served over plain HTTP on a port of its own."""

    def __init__(self, snippet):
        body = (PAGE % snippet).encode()

        class Page(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Page)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.origin = f"http://127.0.0.1:{self.port}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def parley(tmp_path_factory):
    with ParleyProcess(tmp_path_factory.mktemp("widget") / "data") as process:
        yield process


@pytest.fixture
def api(parley):
    key = parley.first_run["api_key"]

    def call(method, path, body=None):
        with parley.client() as client:
            response = client.request(method, path, params={"apiKey": key}, json=body)
        assert response.status_code in (200, 201), response.text
        return response.json()
    return call


def closed_until_three_days_ahead():
    """Business hours closed at the real now (the server process's clock cannot be moved): open only on the
    weekday three days ahead in Berlin, 9:00-17:00. Returns (the body, the line the chat shows)."""
    day = (datetime.now(ZoneInfo("Europe/Berlin")) + timedelta(days=3)).strftime("%a")
    body = {"timezone": "Europe/Berlin", "weekly": {day.lower(): [["09:00", "17:00"]]}}
    return body, f"We're away. We reply from {day} 9:00 (Europe/Berlin)."


def test_browser_visitor_chats_from_another_origin_and_a_stranger_site_gets_no_frame(chromium, parley, api):
    snippet = api("GET", "/v1/account/widget")["snippet"]
    allowed, stranger = HostSite(snippet), HostSite(snippet)
    try:
        api("PATCH", "/v1/account/settings", {"widget": {"enabled": True, "allowedOrigins": [allowed.origin],
                                                         "title": "Bakery chat", "greeting": "Ask us anything."}})
        hours, away_line = closed_until_three_days_ahead()
        api("PUT", "/v1/account/business-hours", hours)
        context, page = open_page(chromium)
        page.goto(allowed.origin + "/")
        launcher = page.get_by_role("button", name="Open chat")
        assert page.locator("iframe").count() == 0  # nothing loaded before the visitor asks
        launcher.click()
        chat = page.frame_locator("iframe")
        # Closed now (issue 40): the chat says when the business replies, and takes an email to answer at.
        chat.get_by_text(away_line).wait_for()
        chat.get_by_label("Your email (optional), to get our answer there").fill("ada@example.com")
        chat.get_by_role("button", name="Save").click()
        chat.get_by_text("Thanks: we'll answer at ada@example.com.").wait_for()
        box = chat.get_by_label("Your message")
        box.fill("Do you bake on Sundays?")
        box.press("Enter")
        chat.locator("li.mine", has_text="Do you bake on Sundays?").wait_for()
        assert chat.locator(".greeting").inner_text() == "Ask us anything."
        assert box.evaluate("e => getComputedStyle(e).fontSize") == "16px"

        [event] = [e for e in api("GET", "/v1/events")["data"]
                   if e["type"] == "message.created" and e["data"]["channel"] == "web"]
        contact_id = event["data"]["contactId"]
        assert api("GET", f"/v1/contacts/{contact_id}")["email"] == "ada@example.com"  # the email left before
        reply = api("POST", f"/v1/contacts/{contact_id}/messages", {"body": "Yes, from 8 to noon."})
        assert (reply["channel"], reply["status"]) == ("web", "Sent")
        chat.locator("li.theirs", has_text="Yes, from 8 to noon.").wait_for()
        wait_until(page, "window.__replies.length === 1")
        assert page.evaluate("window.__replies") == ["Yes, from 8 to noon."]

        # Typing both ways (issue 38): the visitor's shows on the agent's thread page, the agent's in the chat.
        agent_context, agent = open_page(chromium)
        sign_in(agent, parley)
        agent.goto(parley.base + f"/inbox/{contact_id}")
        wait_live(agent)
        box.press_sequentially("Is")
        agent.get_by_text("Visitor is typing…").wait_for()
        agent.locator("#reply-body").press_sequentially("Ye")
        chat.get_by_text("An agent is typing…").wait_for()
        agent_context.close()
        box.fill("")

        chat.get_by_label("Attach an image or a PDF (up to 5 MB)").set_input_files(
            files=[{"name": "receipt.png", "mimeType": "image/png", "buffer": PNG}])
        box.press("Enter")  # no text: the file's name is the message
        chat.locator("li.mine img[alt='Attached image']").wait_for()
        assert chat.locator("li.mine").last.inner_text().startswith("receipt.png")
        loaded = "i => i.complete ? i.naturalWidth : new Promise(r => { i.onload = i.onerror = () => r(i.naturalWidth); })"
        assert chat.locator("li.mine img").evaluate(loaded) == 3  # served, and the frame's CSP lets it show

        page.reload()  # the history stays; the frame follows the conversation again
        page.get_by_role("button", name="Open chat").click()
        texts = page.frame_locator("iframe").locator("li")
        texts.nth(1).wait_for()
        texts.nth(2).wait_for()
        assert [t.split("\n")[0] for t in texts.all_inner_texts()] == ["Do you bake on Sundays?",
                                                                       "Yes, from 8 to noon.", "receipt.png"]
        assert [e for e in page.console_errors if "favicon" not in e] == []
        context.close()

        context, page = open_page(chromium)
        page.goto(stranger.origin + "/")
        page.get_by_role("button", name="Open chat").click()
        wait_until(page, "document.querySelector('div') && performance.getEntriesByType('resource')"
                         ".some(e => e.name.includes('/widget/wid_'))")
        frame = page.frames[-1]
        assert frame != page.main_frame and frame.locator("#body").count() == 0  # refused by frame-ancestors
        assert any("frame-ancestors" in e for e in page.console_errors)
        context.close()

        # Identity across browsers: the same id with a valid hash is the same chat in a second browser context;
        # a forged hash binds nothing and shows none of it.
        secret = api("POST", "/v1/account/widget/identity-secret")["identitySecret"]
        shown = []
        for name, hash in (("laptop", widget.identity_hash(secret, "cust-42")),
                           ("phone", widget.identity_hash(secret, "cust-42")), ("forger", "0" * 64)):
            context, page = open_page(chromium)
            page.goto(allowed.origin + "/")
            page.get_by_role("button", name="Open chat").click()
            chat = page.frame_locator("iframe")
            chat.get_by_label("Your message").wait_for()
            page.evaluate("h => Parley.identify({id: 'cust-42', hash: h})", hash)
            wait_until(page, "window.__identified.length === 1")
            if name == "laptop":
                chat.get_by_label("Your message").fill("Signed in on my laptop")
                chat.get_by_label("Your message").press("Enter")
                chat.locator("li.mine", has_text="Signed in on my laptop").wait_for()
            elif name == "phone":
                chat.locator("li.mine", has_text="Signed in on my laptop").wait_for()
            shown.append((page.evaluate("window.__identified[0]"),
                          chat.locator("li", has_text="Signed in on my laptop").count()))
            context.close()
        assert shown == [(True, 1), (True, 1), (False, 0)]

        # axe-core: the host page with the launcher, and the chat frame (opened by itself: the frame's CSP
        # refuses the added axe script, hence bypass_csp).
        context, page = open_page(chromium, bypass_csp=True)
        page.goto(allowed.origin + "/")
        page.get_by_role("button", name="Open chat").wait_for()
        found = axe_violations(page)
        page.goto(parley.base + f"/widget/{event['data']['toId']}")
        page.get_by_label("Your message").wait_for()
        found += axe_violations(page)
        assert found == [], report({"widget": found})
        context.close()
    finally:
        allowed.close()
        stranger.close()
