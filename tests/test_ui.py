"""Admin web UI: sign-in, Settings > Account (API key Generate, Custom Channel Webhook, notification URLs,
signing secret). Fast tests drive the in-process app over HTTP with a cookie-keeping client; the
end-to-end tests drive the real server.py over HTTPS with headless Chromium (Playwright)."""
import json
import time
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

import httpx

from services import accounts, event_stream
from tests.parley_process import ThreadedReceiver
from tests.ui_helpers import PASSWORD, sign_in


async def test_unauthenticated_settings_redirects_to_login(browser):
    """An unauthenticated settings page sends the browser to sign in, and back afterwards."""
    r = await browser.get("/settings")
    assert r.code == 302
    assert r.headers["Location"] == "/login?next=%2Fsettings"
    r = await browser.get("/")
    assert (r.code, r.headers["Location"]) == (302, "/inbox")  # the home page is the inbox


async def test_login_page_has_xsrf_field_and_security_headers(browser):
    r = await browser.get("/login")
    assert r.code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    assert 'name="_xsrf"' in r.text
    assert "default-src 'self'" in r.headers["Content-Security-Policy"]
    assert "object-src 'none'" in r.headers["Content-Security-Policy"]  # wapiti's one finding (issue 27)
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["Cache-Control"] == "no-store"
    xsrf = browser.set_cookies["_xsrf"]
    assert xsrf["httponly"] and xsrf["secure"] and xsrf["samesite"] == "Lax"


async def test_sign_in_sets_a_secure_seven_day_session(browser, ui_account):
    r = await browser.login(ui_account["email"].upper())
    assert (r.code, r.headers["Location"]) == (303, "/inbox")
    session = browser.set_cookies["parley_session"]
    assert session["httponly"] and session["secure"] and session["samesite"] == "Lax"
    days = (parsedate_to_datetime(session["expires"]) - datetime.now(timezone.utc)).total_seconds() / 86400
    assert 6.9 < days < 7.1
    r = await browser.get("/settings")
    assert r.code == 200
    assert "owner@acme.example" in r.text and ui_account["account_id"] in r.text


async def test_wrong_password_and_unknown_email_get_the_same_generic_message(browser, ui_account):
    for email, password in ((ui_account["email"], "wrong"), ("nobody@acme.example", PASSWORD)):
        r = await browser.login(email, password)
        assert r.code == 401
        assert "Wrong email or password." in r.text
        assert "parley_session" not in browser.cookies
    assert (await browser.get("/settings")).code == 302


async def test_next_after_sign_in_stays_on_this_site(browser, ui_account):
    r = await browser.login(ui_account["email"], next_url="//evil.example/steal")
    assert r.headers["Location"] == "/inbox"
    r = await browser.login(ui_account["email"], next_url="https://evil.example/")
    assert r.headers["Location"] == "/inbox"
    r = await browser.login(ui_account["email"], next_url="/settings/webhook-secret")
    assert r.headers["Location"] == "/settings/webhook-secret"


async def test_repeated_sign_in_attempts_are_slowed_down(browser, ui_account):
    """Ten attempts per email and client address in a burst; after that even the right password waits."""
    codes, started = [], time.monotonic()
    while 429 not in codes and len(codes) < 20:
        codes.append((await browser.login(ui_account["email"], "guess")).code)
    # Ten in a burst, plus the one every 6 s that the attempts' own time (scrypt, slower on a busy machine)
    # earned back.
    earned = int((time.monotonic() - started) / 6)
    assert 10 <= codes.index(429) <= 10 + earned and set(codes[:-1]) == {401}, (codes, earned)
    r = await browser.login(ui_account["email"])
    assert r.code == 429
    assert int(r.headers["Retry-After"]) >= 1
    assert "Too many sign-in attempts" in r.text
    assert "parley_session" not in browser.cookies


async def test_a_form_post_without_the_xsrf_field_is_rejected(signed_in, api, ui_account):
    r = await signed_in.post("/settings/webhook", {"customChannelWebhookUrl": "http://127.0.0.1:9/x"}, xsrf=False)
    assert r.code == 403
    assert r.headers["Content-Type"].startswith("text/html")
    assert "did not come from this site" in r.text
    account = await api.get("/v1/account", key=ui_account["api_key"])
    assert "customChannelWebhookUrl" not in account.json["settings"]


async def test_forged_session_cookie_is_not_a_session(browser, ui_account):
    browser.cookies["parley_session"] = "usr_made_up"
    assert (await browser.get("/settings")).code == 302


async def test_settings_page_escapes_what_it_shows(signed_in):
    r = await signed_in.get("/settings")
    assert "Acme &lt;script&gt;alert(1)&lt;/script&gt;" in r.text
    assert "<script>alert(1)" not in r.text


async def test_generate_new_api_key_kills_the_old_one(signed_in, api, ui_account):
    """Spec §5.1/§5.5: "The key is generated in the account settings (Settings > Account > API Key, via
    a Generate action)." "Generating a new key invalidates the previous key." """
    r = await signed_in.post("/settings/api-key")
    assert r.code == 200
    new_key = r.text.split('id="new-api-key" class="secret" type="text" readonly value="')[1].split('"')[0]
    assert new_key.startswith("pk_") and new_key != ui_account["api_key"]
    assert "previous key has stopped working" in r.text
    assert (await api.get("/v1/account", key=ui_account["api_key"])).code == 401
    assert (await api.get("/v1/account", key=new_key)).code == 200
    page = await signed_in.get("/settings")
    assert new_key[:10] in page.text and new_key not in page.text  # shown once, then only its prefix


async def test_webhook_url_form_validates_like_the_api(signed_in, api, ui_account):
    """The UI and PATCH /v1/account/settings refuse a non-https URL with the same message."""
    bad = "ftp://example.com/hook"
    r = await signed_in.post("/settings/webhook", {"customChannelWebhookUrl": bad})
    assert r.code == 400
    api_r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": bad}, key=ui_account["api_key"])
    assert api_r.code == 400
    message = api_r.json["error"]["message"]
    assert message in r.text
    assert f'value="{bad}"' in r.text  # what was typed stays in the field
    assert (await api.get("/v1/account", key=ui_account["api_key"])).json["settings"].get("customChannelWebhookUrl") is None


async def test_webhook_url_form_saves_and_removes(signed_in, api, ui_account):
    url = "http://127.0.0.1:9/replies"  # the test settings allow private webhooks
    r = await signed_in.post("/settings/webhook", {"customChannelWebhookUrl": url})
    assert (r.code, r.headers["Location"]) == (303, "/settings")
    account = await api.get("/v1/account", key=ui_account["api_key"])
    assert account.json["settings"]["customChannelWebhookUrl"] == url
    page = await signed_in.get("/settings")
    assert "Custom Channel Webhook URL saved." in page.text and f'value="{url}"' in page.text
    assert "saved." not in (await signed_in.get("/settings")).text  # a flash shows once
    await signed_in.post("/settings/webhook", {"customChannelWebhookUrl": "  "})
    account = await api.get("/v1/account", key=ui_account["api_key"])
    assert "customChannelWebhookUrl" not in account.json["settings"]


BANNER = "Private webhook URLs are allowed: for local testing only."


async def test_settings_shows_a_banner_while_private_webhooks_are_allowed(signed_in, app, settings):
    """Issue 26 §3: started with --allow-private-webhooks (as these tests are), Settings says so."""
    assert BANNER in (await signed_in.get("/settings")).text
    app.settings_obj = settings.model_copy(update={"allow_private_webhooks": False})
    assert BANNER not in (await signed_in.get("/settings")).text


async def test_a_url_that_does_not_resolve_now_is_saved_with_a_note(signed_in, api, ui_account):
    url = "https://hooks.parley-test.invalid/replies"
    r = await signed_in.post("/settings/webhook", {"customChannelWebhookUrl": url})
    assert r.code == 303
    page = (await signed_in.get("/settings")).text
    assert ("Custom Channel Webhook URL saved. Note: customChannelWebhookUrl: hooks.parley-test.invalid does not "
            "resolve now; it will be checked again at delivery.") in page


async def test_send_test_event_button_pings_the_saved_url_and_shows_the_answer(signed_in, api, ui_account,
                                                                               receiver):
    from standardwebhooks import Webhook

    page = await signed_in.get("/settings")
    assert 'action="/settings/webhook-test' in page.text and "Send test event" in page.text
    r = await signed_in.post("/settings/webhook-test")
    assert r.code == 409 and "CustomChannelWebhookUrl is not set" in r.text and receiver.requests == []
    await signed_in.post("/settings/webhook", {"customChannelWebhookUrl": receiver.url})
    assert (await signed_in.post("/settings/webhook-test", xsrf=False)).code == 403
    assert receiver.requests == []
    receiver.answers.append((202, {}, b"got <it>"))
    r = await signed_in.post("/settings/webhook-test")
    assert r.code == 200
    assert "Test event delivered" in r.text and "HTTP 202" in r.text and "got &lt;it&gt;" in r.text
    [request] = receiver.requests
    secret = (await api.get("/v1/account/webhook-secret", key=ui_account["api_key"])).json["secret"]
    headers = {name.lower(): value for name, value in request["headers"].items()}
    assert Webhook(secret).verify(request["body"], headers)["event"] == "ping"
    receiver.answers.append((500, {}, b"boom"))
    r = await signed_in.post("/settings/webhook-test")
    assert "Test event failed" in r.text and "HTTP 500 Internal Server Error" in r.text


async def test_notification_urls_form(signed_in, api, ui_account):
    key = ui_account["api_key"]
    await api.patch("/v1/account/settings", {"notificationUrls": {"contact.tagged": "http://127.0.0.1:9/t"}}, key=key)
    page = await signed_in.get("/settings")
    assert 'value="http://127.0.0.1:9/t"' in page.text
    assert "subaccount.auto_recharge" not in page.text  # an agency-only event
    for event_type in set(event_stream.TYPES) - {"subaccount.auto_recharge"}:  # every other type can be chosen
        assert f'name="{event_type}"' in page.text, event_type
    r = await signed_in.post("/settings/notifications",
                             {"contact.created": "http://127.0.0.1:9/c", "contact.tagged": ""})
    assert r.code == 303
    settings = (await api.get("/v1/account", key=key)).json["settings"]
    assert settings["notificationUrls"] == {"contact.created": "http://127.0.0.1:9/c"}
    r = await signed_in.post("/settings/notifications", {"contact.created": "ftp://x/y", "contact.tagged": ""})
    assert r.code == 400 and "notificationUrls.contact.created" in r.text
    await signed_in.post("/settings/notifications", {"contact.created": "", "contact.tagged": ""})
    assert "notificationUrls" not in (await api.get("/v1/account", key=key)).json["settings"]


async def test_agency_sees_the_auto_recharge_notification(io_loop, services, browser):
    agency = await accounts.create_account(services.db, services.box, services.keys, name="Agency",
                                           email="agency@acme.example", account_type="agency", password=PASSWORD)
    await browser.login(agency["email"])
    assert 'name="subaccount.auto_recharge"' in (await browser.get("/settings")).text


async def test_signing_secret_shown_on_demand_and_rotated(signed_in, api, ui_account):
    key = ui_account["api_key"]
    assert "whsec_" not in (await signed_in.get("/settings")).text  # only on its own page
    current = (await api.get("/v1/account/webhook-secret", key=key)).json["secret"]
    r = await signed_in.get("/settings/webhook-secret")
    assert r.code == 200 and f'value="{current}"' in r.text
    r = await signed_in.post("/settings/webhook-secret/rotate")
    assert r.code == 200
    after = (await api.get("/v1/account/webhook-secret", key=key)).json
    assert after["secret"] != current and f'value="{after["secret"]}"' in r.text
    assert after["previousSecretExpiresAt"] and f'<time datetime="{after["previousSecretExpiresAt"]}">' in r.text


async def test_sign_out_ends_the_session(signed_in):
    r = await signed_in.post("/logout")
    assert (r.code, r.headers["Location"]) == (303, "/login")
    assert "parley_session" not in signed_in.cookies
    assert "You are signed out." in (await signed_in.get("/login")).text
    assert (await signed_in.get("/settings")).code == 302


async def test_ui_errors_are_html_pages_and_unknown_paths_stay_json(signed_in):
    r = await signed_in.get("/settings/api-key")  # POST only
    assert r.code == 405
    assert r.headers["Content-Type"].startswith("text/html") and "Method Not Allowed" in r.text
    assert "default-src 'self'" in r.headers["Content-Security-Policy"]
    r = await signed_in.get("/no/such/page")
    assert r.code == 404 and json.loads(r.text)["error"]["code"] == "NOT_FOUND"


async def test_behind_a_proxy_ui_pages_need_the_proxys_https_mark(settings, services):
    """With --behind-proxy the proxied plain port serves the UI only for requests the proxy marks
    X-Forwarded-Proto: https (the session cookie is Secure); a browser GET without it is sent to https."""
    import tornado.httpclient
    import tornado.httpserver
    import tornado.testing

    import server

    proxied = settings.model_copy(update={"behind_proxy": True})
    http = tornado.httpserver.HTTPServer(server.make_app(proxied, services), xheaders=True)
    sock, port = tornado.testing.bind_unused_port()
    http.add_sockets([sock])
    client = tornado.httpclient.AsyncHTTPClient()
    try:
        url = f"http://127.0.0.1:{port}/settings"
        r = await client.fetch(url, follow_redirects=False, raise_error=False)
        assert (r.code, r.headers["Location"]) == (301, proxied.base_url + "/settings")
        r = await client.fetch(url, headers={"X-Forwarded-Proto": "https"}, follow_redirects=False,
                               raise_error=False)
        assert (r.code, r.headers["Location"]) == (302, "/login?next=%2Fsettings")
        r = await client.fetch(f"http://127.0.0.1:{port}/login", method="POST", body="email=a&password=b",
                               raise_error=False)
        assert r.code == 403
    finally:
        http.stop()
        await http.close_all_connections()


# ---- end to end: the real server over HTTPS, driven by headless Chromium ----------------------

def generate_key(page, parley):
    page.goto(parley.base + "/settings")
    page.click("button:has-text('Generate new API key')")
    return page.input_value("#new-api-key")


def test_browser_unauthenticated_settings_redirects_to_login(page, parley):
    page.goto(parley.base + "/settings")
    assert page.url == parley.base + "/login?next=%2Fsettings"
    assert page.is_visible("#password")


def test_browser_wrong_password_shows_the_error(page, parley):
    sign_in(page, parley, password="not the password")
    assert page.inner_text(".flash-error") == "Wrong email or password."
    assert page.url.endswith("/login")
    assert not [c for c in page.context.cookies() if c["name"] == "parley_session"]


def test_browser_signs_in_and_generates_a_new_api_key(page, parley):
    """Spec §5.1: "The key is generated in the account settings (Settings > Account > API Key, via a
    Generate action)." §5.5: "Generating a new key invalidates the previous key." """
    sign_in(page, parley)
    assert page.url == parley.base + "/inbox"  # sign-in leads to the inbox
    response = page.goto(parley.base + "/settings")
    assert page.inner_text("#account").count(parley.first_run["login"]) == 1
    # The stylesheet loaded under the Content-Security-Policy (its background colour applies).
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(244, 246, 249)"
    assert "default-src 'self'" in response.headers["content-security-policy"]
    session = next(c for c in page.context.cookies() if c["name"] == "parley_session")
    assert session["httpOnly"] and session["secure"] and session["sameSite"] == "Lax"

    with parley.client() as api:
        old_key = generate_key(page, parley)  # other tests here rotate it too: start from a known key
        assert api.get("/v1/account", params={"apiKey": old_key}).status_code == 200
        new_key = generate_key(page, parley)
        assert "previous key has stopped working" in page.inner_text(".warning")
        assert new_key.startswith("pk_") and new_key != old_key
        assert api.get("/v1/account", params={"apiKey": old_key}).status_code == 401
        assert api.get("/v1/account", params={"apiKey": new_key}).status_code == 200
    page.click("text=Back to settings")
    assert new_key[:10] in page.inner_text("#api-key")
    assert page.console_errors == []  # no CSP violation, no missing resource


def test_browser_saves_the_custom_channel_webhook_url(page, parley):
    """Spec §6: "a URL that the client saves in the settings section named Custom Channel Webhook"."""
    sign_in(page, parley)
    key = generate_key(page, parley)
    page.goto(parley.base + "/settings")
    url = "http://127.0.0.1:9/parley-replies"  # this server runs with --allow-private-webhooks
    page.fill("#customChannelWebhookUrl", url)
    page.click("button:has-text('Save webhook URL')")
    assert page.inner_text(".flash-success") == "Custom Channel Webhook URL saved."
    assert page.input_value("#customChannelWebhookUrl") == url
    with parley.client() as api:
        account = api.get("/v1/account", params={"apiKey": key}).json()
    assert account["settings"]["customChannelWebhookUrl"] == url
    page.fill("#customChannelWebhookUrl", "ftp://example.com/x")
    page.click("button:has-text('Save webhook URL')")
    assert "must be an https:// URL" in page.inner_text(".flash-error")


def test_browser_sends_a_test_event_and_shows_the_answer(page, parley):
    """Issue 26 §3: the banner, and "Send test event" beside the URL: a real receiver gets the ping and the
    page shows what it answered."""
    receiver = ThreadedReceiver()
    try:
        sign_in(page, parley)
        page.goto(parley.base + "/settings")
        assert page.inner_text("#private-webhooks-banner") == BANNER
        page.fill("#customChannelWebhookUrl", receiver.url)
        page.click("button:has-text('Save webhook URL')")
        page.click("#send-test-event")
        result = page.inner_text("#webhook-test-result")
        assert "Test event delivered" in result and "HTTP 200" in result, result
        assert [r["event"] for r in receiver.requests] == ["ping"]
        assert page.console_errors == []
    finally:
        receiver.close()


def test_browser_session_post_without_xsrf_is_rejected(page, parley):
    sign_in(page, parley)
    # The browser's own cookies (session included), but no _xsrf form field: a cross-site forgery.
    response = page.request.post(parley.base + "/settings/webhook",
                                 form={"customChannelWebhookUrl": "http://127.0.0.1:9/forged"})
    assert response.status == 403
    page.goto(parley.base + "/settings")
    assert page.input_value("#customChannelWebhookUrl") != "http://127.0.0.1:9/forged"


def test_browser_secrets_never_reach_the_server_log(page, parley):
    """Passwords, API keys and signing secrets typed into or shown by the UI are not logged."""
    sign_in(page, parley)
    new_key = generate_key(page, parley)
    page.goto(parley.base + "/settings/webhook-secret")
    secret = page.input_value("#webhook-secret")
    page.click("button:has-text('Rotate signing secret')")
    rotated = page.input_value("#webhook-secret")
    assert rotated != secret and rotated.startswith("whsec_")
    page.goto(parley.base + "/settings/api-key")  # a 405 error page, logged as a warning
    log = (parley.data_dir.parent / f"server-{parley.port}.log").read_text()
    assert "POST /settings/api-key" in log  # the log is the right one and has these requests
    for value in (parley.first_run["password"], new_key, secret, rotated):
        assert value not in log


def test_plain_http_browser_get_of_a_ui_page_redirects_to_https(parley):
    """Spec §5.4: "HTTPS is required. Plain HTTP requests are rejected." A browser loading a page gets a
    301 to the HTTPS address instead of an error."""
    with httpx.Client(timeout=10) as plain:
        r = plain.get(f"http://127.0.0.1:{parley.http_port}/settings", headers={"Accept": "text/html"})
    assert r.status_code == 301
    assert r.headers["Location"].startswith("https://") and r.headers["Location"].endswith(f":{parley.port}/settings")
