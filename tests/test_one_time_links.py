"""One-time links (issue 25 §2): reset-password's sign-in link, create-account's setup link, an agency's reset
of a sub-account. Single use, expiring, stored hashed; using one ends the user's other sessions and asks for a
new password. In-process with a cookie-keeping client, and the real CLI against a real server."""
import logging
import subprocess
import sys
from urllib.parse import quote, urlsplit

from common import one_time_link_kinds
from services import accounts, one_time_links
from tests.parley_process import ROOT, ParleyProcess, run_cli, use_link
from tests.ui_helpers import PASSWORD, FormClient
from tests import db_direct

NEW_PASSWORD = "a brand new password"


def path_of(url):
    return urlsplit(url).path


async def choose(browser, url, password=NEW_PASSWORD, again=None):
    page = await browser.get(path_of(url))
    assert page.code == 200, page.text
    return await browser.post(path_of(url), {"password": password, "password_again": again or password})


async def test_reset_link_ends_other_sessions_and_sets_the_password(services, http_server_client, signed_in,
                                                                    ui_account, settings):
    """The link asks for a new password; using it ends every other session of the user, signs this browser
    in, and works once. The old password stops working; the new one works."""
    link = await one_time_links.issue_reset_for_email(services.db, settings.base_url, " OWNER@acme.example ")
    assert link["email"] == ui_account["email"] and "/reset/" in link["signInUrl"]
    assert (await signed_in.get("/settings")).code == 200
    stranger = FormClient(http_server_client)
    r = await choose(stranger, link["signInUrl"], again="not the same password")
    assert r.code == 400 and "Password and its repetition differ" in r.text
    r = await choose(stranger, link["signInUrl"], password="short")
    assert r.code == 400 and "Password must have 10 to 1024 characters" in r.text
    assert (await signed_in.get("/settings")).code == 200  # a refused password changed nothing
    r = await choose(stranger, link["signInUrl"])
    assert (r.code, r.headers["Location"]) == (303, "/inbox")
    assert (await stranger.get("/settings")).code == 200  # signed in by the link
    assert (await signed_in.get("/settings")).code == 302  # the other session ended
    assert (await FormClient(http_server_client).login(ui_account["email"])).code == 401  # old password
    assert (await FormClient(http_server_client).login(ui_account["email"], NEW_PASSWORD)).code == 303
    again = FormClient(http_server_client)
    assert (await again.get(path_of(link["signInUrl"]))).code == 404  # single use
    await again.get("/login")
    assert (await again.post(path_of(link["signInUrl"]), {"password": "x" * 12, "password_again": "x" * 12})).code == 404


async def test_expired_or_superseded_links_open_nothing(services, http_server_client, ui_account, settings):
    first = await one_time_links.issue_reset_for_email(services.db, settings.base_url, ui_account["email"])
    second = await one_time_links.issue_reset_for_email(services.db, settings.base_url, ui_account["email"])
    browser = FormClient(http_server_client)
    assert (await browser.get(path_of(first["signInUrl"]))).code == 404  # the newest link is the only one
    assert (await browser.get(path_of(second["signInUrl"]).replace("/reset/", "/setup/"))).code == 404  # purpose
    db_direct.execute(settings, "UPDATE one_time_links SET expires_at = '2000-01-01T00:00:00.000Z'")
    assert (await browser.get(path_of(second["signInUrl"]))).code == 404


async def test_tokens_are_stored_hashed(services, ui_account, settings):
    link = await one_time_links.issue_reset_for_email(services.db, settings.base_url, ui_account["email"])
    token = path_of(link["signInUrl"]).rsplit("/", 1)[1]
    rows = db_direct.rows(settings, "SELECT * FROM one_time_links")
    assert len(rows) == 1 and token not in repr(rows)


async def test_agency_resets_only_its_own_sub_accounts_password(services, http_server_client, agency_browser,
                                                                ui_agency, theirs, account):
    """The sub-account's agency page makes the same sign-in link, shown to the agency; another agency's
    sub-account (or a standard account) is 404 and gets no link."""
    sub = await accounts.create_account(services.db, services.box, services.keys, name="Rossi Ltd",
                                        email="rossi@client.example", agency_email=ui_agency["email"],
                                        password=PASSWORD)
    page = await agency_browser.get(f"/agency/subaccounts/{sub['account_id']}")
    assert f'action="/agency/subaccounts/{sub["account_id"]}/reset-password"' in page.text
    r = await agency_browser.post(f"/agency/subaccounts/{sub['account_id']}/reset-password")
    assert r.code == 200
    url = r.text.split('id="sign-in-url"', 1)[1].split('value="', 1)[1].split('"', 1)[0]
    for other in (theirs, account):
        r = await agency_browser.post(f"/agency/subaccounts/{other['account_id']}/reset-password")
        assert r.code == 404
    assert db_direct.value(services, "SELECT COUNT(*) FROM one_time_links") == 1
    client = FormClient(http_server_client)
    assert (await choose(client, url)).code == 303
    assert (await FormClient(http_server_client).login(sub["email"], NEW_PASSWORD)).code == 303


def test_cli_reset_password_and_create_account_print_links_not_passwords(tmp_path):
    """reset-password prints {email, signInUrl, expiresAt}; create-account without --password prints a setup
    link and no password; with --password (scripts) no link. The links work against the running server."""
    data = tmp_path / "data"
    with ParleyProcess(data) as parley:
        reset = run_cli(data, "reset-password", "--email", "ADMIN@localhost")
        assert set(reset) == {"email", "accountId", "signInUrl", "expiresAt"} and reset["email"] == "admin@localhost"
        created = run_cli(data, "create-account", "--name", "Shop", "--email", "shop@example.com")
        assert "password" not in created and "/setup/" in created["setupUrl"] and created["expiresAt"]
        scripted = run_cli(data, "create-account", "--name", "Bot", "--email", "bot@example.com",
                           "--password", "scripted password")
        assert "setupUrl" not in scripted and "password" not in scripted
        with parley.client() as client:
            assert use_link(client, reset["signInUrl"], NEW_PASSWORD).headers["Location"] == "/inbox"
        with parley.client() as client:
            r = use_link(client, created["setupUrl"], NEW_PASSWORD)
            assert r.status_code == 200 and 'id="new-api-key"' in r.text
        with parley.client() as client:
            r = client.get(urlsplit(reset["signInUrl"]).path)
            assert r.status_code == 404
    missing = subprocess.run([sys.executable, "server.py", "reset-password", "--email", "nobody@x.example",
                              "--data-dir", str(data)], capture_output=True, text=True, cwd=ROOT)
    assert missing.returncode == 1 and "no user with email nobody@x.example" in missing.stdout


async def test_access_log_masks_every_link_kind_and_contact_lookups(services, http_server_client, api, ui_account,
                                                                   account, settings, caplog):
    """Issue 36 §3: an invitation's link was logged in full (only /setup/ and /reset/ were masked). Every kind
    declared (common/one_time_link_kinds.py), live or mistyped, has its token masked in the access log, and a
    contact lookup's phone number or email never reaches it."""
    from storage import accounts as account_store
    user_id = await account_store.get_owner_user_id(services.db, ui_account["account_id"])
    tokens, browser = [], FormClient(http_server_client)
    with caplog.at_level(logging.INFO, logger="parley.access"), caplog.at_level(logging.WARNING, "parley.http"):
        for purpose in one_time_link_kinds.PURPOSES:
            link = await one_time_links.issue(services.db, settings.base_url, user_id, ui_account["account_id"],
                                              purpose)
            path = path_of(link["url"])
            tokens.append(path.rsplit("/", 1)[1])
            assert (await browser.get(path)).code == 200, purpose
            for mistyped in (path.upper(), quote(path, safe="/").replace(purpose[0], f"%{ord(purpose[0]):02X}", 1),
                             path[:-30]):  # too short for the route: a 404 that quotes the path
                await browser.get(mistyped)
        for query in ("phoneNumber=%2B14155550123", "email=someone%40private.example", "EMAIL=upper%40private.example"):
            assert (await api.get(f"/v1/contacts?{query}", key=account["api_key"])).code in (400, 404)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "/invite/***" in logged and "/setup/***" in logged and "/reset/***" in logged
    for token in tokens:
        for part in (token, token[:-30], token.upper(), token.upper()[:-30]):
            assert part not in logged
    for personal in ("14155550123", "someone", "upper%40"):
        assert personal not in logged
    assert "phoneNumber=***" in logged and "email=***" in logged


async def test_a_password_change_by_any_path_kills_the_users_outstanding_links(services, http_server_client,
                                                                              signed_in, ui_account, settings):
    """Issue 36 §11: a reset link issued before the user changed the password still set a new one. A change in
    Settings, or through another link, kills every unspent link of the user; other users' links live on."""
    from storage import accounts as account_store
    other = await accounts.create_account(services.db, services.box, services.keys, name="Other",
                                          email="other@acme.example", password=PASSWORD)
    others_link = await one_time_links.issue_reset_for_email(services.db, settings.base_url, other["email"])
    before = await one_time_links.issue_reset_for_email(services.db, settings.base_url, ui_account["email"])
    r = await signed_in.post("/settings/password", {"current_password": PASSWORD, "new_password": NEW_PASSWORD,
                                                    "new_password_again": NEW_PASSWORD})
    assert r.code == 303
    stranger = FormClient(http_server_client)
    assert (await stranger.get(path_of(before["signInUrl"]))).code == 404
    await stranger.get("/login")
    form = {"password": "the attacker's choice", "password_again": "the attacker's choice"}
    assert (await stranger.post(path_of(before["signInUrl"]), form)).code == 404
    assert (await FormClient(http_server_client).login(ui_account["email"], NEW_PASSWORD)).code == 303

    # Through a link: choosing the password with a setup link kills the reset link issued before it.
    user_id = await account_store.get_owner_user_id(services.db, ui_account["account_id"])
    reset = await one_time_links.issue_reset_for_email(services.db, settings.base_url, ui_account["email"])
    setup = await one_time_links.issue(services.db, settings.base_url, user_id, ui_account["account_id"], "setup")
    done = await choose(FormClient(http_server_client), setup["url"], password="chosen through setup")
    assert done.code == 200 and "pk_" in done.text  # a setup link shows the new API key once
    assert (await FormClient(http_server_client).get(path_of(reset["signInUrl"]))).code == 404
    assert (await choose(FormClient(http_server_client), others_link["signInUrl"])).code == 303  # not theirs
