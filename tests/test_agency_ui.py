"""Agency pages of the admin UI: sub-accounts with balance and auto-recharge, credit history, grant (a form
sent twice grants once), create (key and password shown once), set and clear auto-recharge. In-process
with a cookie-keeping client, then the real server over HTTPS in headless Chromium (Playwright)."""
import os
import re
from pathlib import Path

import pytest

from services import accounts, credits
from tests.parley_process import ParleyProcess, run_cli
from tests.ui_helpers import PASSWORD, FormClient, sign_in_with

# Screenshots go to a temporary directory, or to PARLEY_SCREENSHOT_DIR (docs/screenshots to refresh docs/guide.md's).
SCREENSHOT_DIR = os.environ.get("PARLEY_SCREENSHOT_DIR")


@pytest.fixture
def client_sub(io_loop, services, ui_agency):
    return io_loop.run_sync(lambda: accounts.create_account(
        services.db, services.box, services.keys, name="Rossi <b>Bakery</b>", email="rossi@client.example",
        agency_email=ui_agency["email"], with_user=False))


def field(html, name):
    """The value of the input named `name` in a page."""
    return re.search(rf'name="{re.escape(name)}"[^>]*value="([^"]*)"', html).group(1)


async def balance(services, account):
    return await credits.get_balance(services.db, account["account_id"])


async def test_only_agency_users_have_the_pages(services, http_server_client, agency_browser, client_sub):
    """Agency pages for agency users; anyone else gets 404 for every one of them (their pages do not
    exist for them), and the navigation shows the link to agencies only; signed out, sign in first."""
    page = await agency_browser.get("/settings")
    assert 'href="/agency"' in page.text
    standard = await accounts.create_account(services.db, services.box, services.keys, name="Shop",
                                             email="shop@shop.example", password=PASSWORD)
    shop = FormClient(http_server_client)
    await shop.login(standard["email"])
    assert 'href="/agency"' not in (await shop.get("/settings")).text
    sub_id = client_sub["account_id"]
    for path in ("/agency", f"/agency/subaccounts/{sub_id}"):
        r = await shop.get(path)
        assert r.code == 404 and r.headers["Content-Type"].startswith("text/html"), path
    for path in ("/agency/subaccounts", f"/agency/subaccounts/{sub_id}/grant",
                 f"/agency/subaccounts/{sub_id}/auto-recharge", f"/agency/subaccounts/{sub_id}/auto-recharge/off"):
        r = await shop.post(path, {"amount": "5", "threshold": "1", "name": "X", "email": "x@x.example",
                                   "idempotency_key": "k"})
        assert r.code == 404, path
    assert await balance(services, client_sub) == 0
    signed_out = FormClient(http_server_client)
    r = await signed_out.get("/agency")
    assert (r.code, r.headers["Location"]) == (302, "/login?next=%2Fagency")


async def test_another_agencys_sub_account_is_404(services, agency_browser, theirs, client_sub):
    """Every page and action checks the session's account: another agency's sub-account by URL is 404, and
    nothing of it changes."""
    base = f"/agency/subaccounts/{theirs['account_id']}"
    assert (await agency_browser.get(base)).code == 404
    for action, form in (("/grant", {"amount": "5", "idempotency_key": "k1"}),
                         ("/auto-recharge", {"threshold": "1", "amount": "2"}), ("/auto-recharge/off", {})):
        assert (await agency_browser.post(base + action, form)).code == 404
    assert await balance(services, theirs) == 0
    listing = await agency_browser.get("/agency")
    assert theirs["account_id"] not in listing.text and client_sub["account_id"] in listing.text


async def test_list_shows_balance_and_auto_recharge_escaped(api, services, agency_browser, ui_agency, client_sub):
    await credits.grant_credits(services.db, ui_agency["account_id"], "agency", email=client_sub["email"], amount=12.5)
    r = await agency_browser.get("/agency")
    assert r.code == 200
    assert "Rossi &lt;b&gt;Bakery&lt;/b&gt;" in r.text and "<b>Bakery" not in r.text
    assert "12.5 credits" in r.text and "Off" in r.text
    await api.patch(f"/v1/subaccounts/{client_sub['account_id']}", {"autoRecharge": {"threshold": 20, "amount": 50}},
                    key=ui_agency["api_key"])
    await credits.spend_credits(services.db, client_sub["account_id"], 1, "reply")
    r = await agency_browser.get("/agency")
    assert "Below 20: ask for 50" in r.text


async def test_grant_form_sent_twice_grants_once(services, agency_browser, client_sub):
    """The grant form carries an Idempotency-Key made when the page was rendered: the same form sent twice
    (a double click, a browser resend) grants once; the next rendering carries a new key."""
    path = f"/agency/subaccounts/{client_sub['account_id']}"
    page = await agency_browser.get(path)
    key = field(page.text, "idempotency_key")
    form = {"amount": "7.25", "description": "March", "idempotency_key": key}
    first = await agency_browser.post(path + "/grant", form)
    assert (first.code, first.headers["Location"]) == (303, path)
    assert "Granted 7.25 credits. Balance: 7.25 credits." in (await agency_browser.get(path)).text
    second = await agency_browser.post(path + "/grant", form)
    assert second.code == 303
    after = await agency_browser.get(path)
    assert "already made" in after.text and "nothing more was granted" in after.text
    assert await balance(services, client_sub) == 7.25
    assert field(after.text, "idempotency_key") != key
    assert after.text.count(key) == 1  # in the history, next to the grant it made
    # The same form changed and sent again is refused; nothing is granted.
    r = await agency_browser.post(path + "/grant", {**form, "amount": "9"})
    assert r.code == 422 and "already used" in r.text
    assert await balance(services, client_sub) == 7.25


@pytest.mark.parametrize("amount, message", [("", "amount is required"), ("abc", "amount must be a number"),
                                             ("0", "amount must be greater than 0"), ("-3", "greater than 0"),
                                             ("1.001", "at most 2 decimal places"),
                                             ("2000000000", "amount must be at most")])
async def test_grant_form_refuses_bad_amounts(services, agency_browser, client_sub, amount, message):
    path = f"/agency/subaccounts/{client_sub['account_id']}"
    key = field((await agency_browser.get(path)).text, "idempotency_key")
    r = await agency_browser.post(path + "/grant", {"amount": amount, "idempotency_key": key})
    assert r.code == 400 and message in r.text
    assert field(r.text, "idempotency_key") == key and field(r.text, "amount") == amount
    assert await balance(services, client_sub) == 0


async def test_create_shows_the_key_and_password_once(api, services, http_server_client, agency_browser):
    r = await agency_browser.post("/agency/subaccounts", {"name": "Café Nord", "email": "nord@client.example"})
    assert r.code == 200
    key = re.search(r'id="new-subaccount-key"[^>]*value="([^"]+)"', r.text).group(1)
    password = re.search(r'id="new-subaccount-password"[^>]*value="([^"]+)"', r.text).group(1)
    account = await api.get("/v1/account", key=key)
    assert account.code == 200 and account.json["name"] == "Café Nord" and account.json["type"] == "subaccount"
    sub_login = FormClient(http_server_client)
    assert (await sub_login.login("nord@client.example", password)).code == 303
    listing = await agency_browser.get("/agency")
    assert "Café Nord" in listing.text and key not in listing.text and password not in listing.text
    r = await agency_browser.post("/agency/subaccounts", {"name": "Again", "email": "NORD@client.example"})
    assert r.code == 409 and "already exists" in r.text and 'value="Again"' in r.text
    r = await agency_browser.post("/agency/subaccounts", {"name": "Bad", "email": "no-at-sign"})
    assert r.code == 400 and "email is not a valid email address" in r.text
    r = await agency_browser.post("/agency/subaccounts", {"name": " ", "email": "blank@client.example"})
    assert r.code == 400 and "name is required" in r.text


async def test_auto_recharge_form_sets_and_clears(api, agency_browser, ui_agency, client_sub):
    path = f"/agency/subaccounts/{client_sub['account_id']}"
    read = f"/v1/subaccounts/{client_sub['account_id']}"
    r = await agency_browser.post(path + "/auto-recharge", {"threshold": "10", "amount": "99.5"})
    assert r.code == 303
    setting = (await api.get(read, key=ui_agency["api_key"])).json["autoRecharge"]
    assert (setting["threshold"], setting["amount"]) == (10, 99.5)
    page = await agency_browser.get(path)
    assert "Auto-recharge saved." in page.text and field(page.text, "threshold") == "10"
    r = await agency_browser.post(path + "/auto-recharge", {"threshold": "0", "amount": "5"})
    assert r.code == 400 and "autoRecharge.threshold must be greater than 0" in r.text
    assert field(r.text, "threshold") == "0"  # what was typed stays
    assert (await api.get(read, key=ui_agency["api_key"])).json["autoRecharge"]["threshold"] == 10
    r = await agency_browser.post(path + "/auto-recharge/off")
    assert r.code == 303
    assert (await api.get(read, key=ui_agency["api_key"])).json["autoRecharge"] is None
    assert "Auto-recharge is off." in (await agency_browser.get(path)).text


async def test_price_form_sets_what_a_bot_reply_costs(api, agency_browser, ui_agency, client_sub):
    """Issue 18 item 4: the agency sets its sub-account's price per bot reply on the sub-account's page."""
    path = f"/agency/subaccounts/{client_sub['account_id']}"
    read = f"/v1/subaccounts/{client_sub['account_id']}"
    assert field((await agency_browser.get(path)).text, "creditsPerReply") == "1"
    r = await agency_browser.post(path + "/price", {"creditsPerReply": "0.5"})
    assert r.code == 303
    assert (await api.get(read, key=ui_agency["api_key"])).json["creditsPerReply"] == 0.5
    page = await agency_browser.get(path)
    assert "Price saved: 0.5 credits per bot reply." in page.text and field(page.text, "creditsPerReply") == "0.5"
    r = await agency_browser.post(path + "/price", {"creditsPerReply": "-2"})
    assert r.code == 400 and "creditsPerReply must be greater than 0" in r.text
    assert field(r.text, "creditsPerReply") == "-2"  # what was typed stays
    assert (await api.get(read, key=ui_agency["api_key"])).json["creditsPerReply"] == 0.5
    r = await agency_browser.post(path + "/price", {"creditsPerReply": "0"})
    assert r.code == 303 and (await api.get(read, key=ui_agency["api_key"])).json["creditsPerReply"] == 0


async def test_every_form_needs_the_xsrf_field(services, agency_browser, client_sub):
    base = f"/agency/subaccounts/{client_sub['account_id']}"
    for path, form in (("/agency/subaccounts", {"name": "X", "email": "x@client.example"}),
                       (base + "/grant", {"amount": "5", "idempotency_key": "k"}),
                       (base + "/auto-recharge", {"threshold": "1", "amount": "1"}), (base + "/auto-recharge/off", {}),
                       (base + "/price", {"creditsPerReply": "0"})):
        r = await agency_browser.post(path, form, xsrf=False)
        assert r.code == 403 and "did not come from this site" in r.text, path
    assert await balance(services, client_sub) == 0
    assert await accounts.get_account_by_email(services.db, "x@client.example") is None


async def test_history_is_newest_first_and_paginated(services, agency_browser, ui_agency, client_sub):
    for n in range(1, 56):
        await credits.grant_credits(services.db, ui_agency["account_id"], "agency", email=client_sub["email"],
                                    amount=n, description=f"grant {n}")
    path = f"/agency/subaccounts/{client_sub['account_id']}"
    page = await agency_browser.get(path)
    notes = re.findall(r"grant (\d+)", page.text)
    assert notes[:3] == ["55", "54", "53"] and len(notes) == 50
    older = re.search(r'href="(/agency/subaccounts/[^"]+\?cursor=[^"#]+)#history"', page.text).group(1)
    rest = await agency_browser.get(older)
    assert re.findall(r"grant (\d+)", rest.text) == ["5", "4", "3", "2", "1"]
    assert (await agency_browser.get(path + "?cursor=nonsense")).code == 400


# ---- end to end: the real server over HTTPS in headless Chromium ------------------------------------

@pytest.fixture(scope="module")
def agency_server(tmp_path_factory):
    data = tmp_path_factory.mktemp("agency-ui") / "data"
    agency = run_cli(data, "create-account", "--name", "Northwind Agency", "--email", "ops@northwind.example",
                     "--agency", "--password", PASSWORD)
    shop = run_cli(data, "create-account", "--name", "Corner Shop", "--email", "shop@corner.example",
                   "--password", PASSWORD)
    with ParleyProcess(data, "--allow-private-webhooks") as process:
        process.agency, process.shop = agency, shop
        yield process


@pytest.fixture
def shots(tmp_path):
    path = Path(SCREENSHOT_DIR) if SCREENSHOT_DIR else tmp_path
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_browser_agency_manages_a_sub_account(page, agency_server, shots):
    """An agency signs in, follows Sub-accounts, creates a sub-account (its key shown once, and working),
    sets auto-recharge, grants twice with the same form (a resend) and sees one grant in the history, at
    phone width; no CSP violation."""
    page.set_viewport_size({"width": 390, "height": 844})
    base = agency_server.base
    sign_in_with(page, agency_server, agency_server.agency["email"])
    page.click("nav >> text=Sub-accounts")
    assert page.url == base + "/agency"
    page.get_by_label("Name", exact=True).fill("Rossi Bakery")
    page.get_by_label("Email", exact=True).fill("rossi@bakery.example")
    page.click("button:has-text('Create sub-account')")
    key = page.input_value("#new-subaccount-key")
    assert key.startswith("pk_") and page.input_value("#new-subaccount-password")
    with agency_server.client() as api:
        assert api.get("/v1/account", params={"apiKey": key}).json()["email"] == "rossi@bakery.example"
    page.click("text=Open the sub-account")

    page.get_by_label("Threshold (credits)", exact=True).fill("10")
    page.get_by_label("Amount to ask for (credits)", exact=True).fill("100")
    page.click("button:has-text('Save auto-recharge')")
    assert page.inner_text(".flash-success") == "Auto-recharge saved."
    assert "Below 10: ask for 100" in page.inner_text("#auto-recharge-state")

    page.get_by_label("Credits", exact=True).fill("25")
    page.get_by_label("Note (optional)", exact=True).fill("Welcome credits")
    form = {"amount": "25", "description": "Welcome credits",
            "idempotency_key": page.input_value("input[name=idempotency_key]"),
            "_xsrf": page.input_value("#grant input[name=_xsrf]")}
    page.click("button:has-text('Grant credits')")
    assert page.inner_text(".flash-success") == "Granted 25 credits. Balance: 25 credits."
    # The same form sent again (what a double submit or a resend does): granted once.
    again = page.request.post(page.url + "/grant", form=form, max_redirects=0)
    assert again.status == 303
    page.reload()
    assert "nothing more was granted" in page.inner_text(".flash-success")
    assert page.inner_text("#balance") == "25 credits"
    rows = page.locator("#history tbody tr")
    assert rows.count() == 1 and "Welcome credits" in rows.first.inner_text()
    # Phone width: nothing wider than the screen.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(shots / "agency-subaccount-phone.png"), full_page=True)
    page.set_viewport_size({"width": 1200, "height": 900})
    page.goto(base + "/agency")
    page.screenshot(path=str(shots / "agency.png"), full_page=True)
    assert page.console_errors == []


def test_browser_non_agency_user_gets_404(page, agency_server):
    sign_in_with(page, agency_server, agency_server.shop["email"])
    assert page.url == agency_server.base + "/inbox"  # the home page
    assert page.locator("nav >> text=Sub-accounts").count() == 0
    response = page.goto(agency_server.base + "/agency")
    assert response.status == 404
