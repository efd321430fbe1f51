"""Issue 25 §2, §3, §5 in headless Chromium against the real server over HTTPS: the owner's first run through
the setup link (password chosen, API key shown once with Copy), a handoff's "Needs a person" count live in the
navigation and title of every open page and the thread's pause in local time, and an agency viewing a
sub-account (banner on every page, the credits banner, back to the agency)."""
import re
from urllib.parse import urlsplit

import pytest

from tests.parley_process import OWNER_PASSWORD, ParleyProcess, ThreadedReceiver, run_cli
from tests.ui_helpers import sign_in_with
from tests.inbound_helpers import wait_until
from tests.ui_helpers import PASSWORD, open_page


@pytest.fixture(scope="module")
def fresh_server(tmp_path_factory):
    data = tmp_path_factory.mktemp("day2-access") / "data"
    with ParleyProcess(data, "--allow-private-webhooks", setup=False) as process:
        yield process


def test_browser_setup_link_then_a_handoff_shows_on_every_open_page(chromium, fresh_server):
    base = fresh_server.base
    context, page = open_page(chromium, permissions=["clipboard-read", "clipboard-write"])
    page.goto(base + urlsplit(fresh_server.first_run["setup_url"]).path)
    page.fill("#password", OWNER_PASSWORD)
    page.fill("#password_again", OWNER_PASSWORD)
    page.click("button:has-text('Set password')")
    key = page.input_value("#new-api-key")
    assert key.startswith("pk_") and "Settings" in page.title()
    page.click("button[data-copy='#new-api-key']")
    page.wait_for_selector("button[data-copy]:has-text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == key
    page.goto(base + "/settings")
    assert page.locator("#new-api-key").count() == 0  # shown once
    other = context.new_page()
    other.goto(base + "/contacts")
    assert not page.title().startswith("(")

    receiver = ThreadedReceiver()
    try:
        with fresh_server.client() as api:
            r = api.patch("/v1/account/settings", params={"apiKey": key}, json={
                "customChannelWebhookUrl": receiver.url,
                "bot": {"active": True, "handoffKeywords": ["human"]}})
            assert r.status_code == 200, r.text
            r = api.post("/v1/incoming_custom_channel_message", params={"apiKey": key}, json={"customData": {
                "messageSid": "h-1", "fromId": "+14155552671", "toId": "shop", "body": "a human please"}})
            message = api.get(f"/v1/messages/{r.json()['messageId']}", params={"apiKey": key}).json()
            contact_id = message["contactId"]
        for open_one in (page, other):
            wait_until(open_one, "document.title.startsWith('(1) ')", timeout=5)
            assert open_one.inner_text("#needs-person .count") == "1"
        page.click("#needs-person")
        assert "filter=handed_off" in page.url and contact_id in page.content()
        page.goto(base + f"/inbox/{contact_id}")
        until = page.inner_text("#bot-state time")
        assert re.fullmatch(r"\d{1,2}:\d{2}( ?[AP]M)?", until) or "," in until, until  # local time, today: time only
        assert "Bot paused for this contact" in page.inner_text("#bot-state")
        page.fill("textarea[name=body]", "Hi, a person here.")
        page.click("button:has-text('Send reply')")
        wait_until(other, "!document.title.startsWith('(')", timeout=5)
        assert other.locator("#needs-person").is_hidden()
        assert page.console_errors == []
    finally:
        receiver.close()
        context.close()


@pytest.fixture(scope="module")
def agency_with_sub(tmp_path_factory):
    data = tmp_path_factory.mktemp("day2-view-as") / "data"
    agency = run_cli(data, "create-account", "--name", "Northwind Agency", "--email", "ops@northwind.example",
                     "--agency", "--password", PASSWORD)
    sub = run_cli(data, "create-account", "--name", "Rossi Ltd", "--email", "rossi@client.example",
                  "--agency-email", agency["email"], "--password", PASSWORD)
    with ParleyProcess(data) as process:
        process.agency, process.sub = agency, sub
        yield process


def test_browser_agency_views_a_sub_account_and_comes_back(chromium, agency_with_sub):
    server = agency_with_sub
    context, page = open_page(chromium)
    try:
        sign_in_with(page, server, server.agency["email"])
        page.goto(server.base + f"/agency/subaccounts/{server.sub['account_id']}")
        page.click("button:has-text('View as Rossi Ltd')")
        for path in ("/inbox", "/settings", "/credits"):
            page.goto(server.base + path)
            assert "Viewing as Rossi Ltd: back to the agency" in " ".join(page.inner_text("#viewing-as").split())
            assert "The bot is not answering: no credits." in page.inner_text("#credits-banner")
        page.goto(server.base + "/settings")
        assert "rossi@client.example" in page.inner_text("#account")
        assert page.inner_text("#nav-credits").split() == ["Credits:", "0"]
        page.click("#viewing-as button")
        assert page.url == server.base + f"/agency/subaccounts/{server.sub['account_id']}"
        assert page.locator("#viewing-as").count() == 0 and page.locator("#credits-banner").count() == 0
        assert page.console_errors == []
    finally:
        context.close()
