"""Users and roles in headless Chromium against the real server (issue 21): two browser contexts signed in at
once. The owner invites an agent on the Users page; the agent signs in through the link, sees no Settings
link and gets a 403 page at /settings; the owner deactivates the agent and the agent's open page is signed
out at once (its live-events WebSocket closes, the reload shows the sign-in page), and the flash says how many
conversations went back to the queue."""
import re

import pytest

from tests.mail_server import MailServer
from tests.parley_process import ParleyProcess, run_cli
from tests.team_users import add_user_to_server
from tests.ui_helpers import sign_in_with
from tests.inbound_helpers import contact_of, post_inbound, wait_until
from tests.ui_helpers import PASSWORD, open_page

AGENT_PASSWORD = "agent-chose-this-1"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("team-users") / "data"
    owner = run_cli(data, "create-account", "--name", "Acme", "--email", "owner@acme.example", "--password", PASSWORD)
    # --allow-private-webhooks: the forgot-password test's SMTP server is on 127.0.0.1 without TLS.
    with ParleyProcess(data, "--allow-private-webhooks") as process:
        process.owner = owner
        yield process


def test_browser_owner_invites_an_agent_who_is_refused_settings_and_signed_out_when_deactivated(chromium, server):
    owner_context, owner = open_page(chromium)
    agent_context, agent = open_page(chromium)
    try:
        sign_in_with(owner, server, "owner@acme.example")
        owner.click("nav >> text=Users")
        owner.fill("#invite-email", "sam@acme.example")
        owner.fill("#invite-name", "Sam")
        owner.select_option("#invite-role", "agent")
        owner.click("button:has-text('Invite')")
        link = owner.input_value("#invite-link")
        assert "/invite/" in link

        agent.goto(server.base + link[link.index("/invite/"):])
        agent.fill("#password", AGENT_PASSWORD)
        agent.fill("#password_again", AGENT_PASSWORD)
        agent.click("button:has-text('Set password')")
        assert agent.url == server.base + "/inbox"
        nav = agent.inner_text("nav")
        assert "Inbox" in nav and "Contacts" in nav and "Settings" not in nav and "Users" not in nav
        response = agent.goto(server.base + "/settings")
        assert response.status == 403 and "Your role (agent) cannot use this page" in agent.content()
        agent.console_errors.clear()  # Chromium logs the 403 answer itself as "Failed to load resource"
        agent.goto(server.base + "/inbox")
        wait_until(agent, "document.getElementById('live-status').dataset.state === 'live'", timeout=10)

        key = server.owner["api_key"]
        with server.client(params={"apiKey": key}) as api:
            sam = next(u for u in api.get("/v1/users").json()["data"] if u["email"] == "sam@acme.example")
            contacts = [contact_of(server, post_inbound(server, "Is it in stock?", from_id=from_id, key=key)[0], key)
                        for from_id in ("+14155550101", "+14155550102")]
            for contact_id in contacts:
                r = api.patch(f"/v1/conversations/{contact_id}", json={"assigneeUserId": sam["id"]})
                assert r.status_code == 200, r.text

        owner.goto(server.base + "/users")
        owner.click("tr[data-email='sam@acme.example'] button:has-text('Deactivate')")
        assert ("sam@acme.example: deactivated, signed out everywhere; their 2 unresolved conversations are"
                " unassigned.") in owner.inner_text("main")
        agent.wait_for_url("**/login**", timeout=10_000)  # the socket closed, the reload found no session
        agent.goto(server.base + "/contacts")
        assert "/login" in agent.url
        assert owner.console_errors == [] and agent.console_errors == []
    finally:
        owner_context.close()
        agent_context.close()


def test_browser_an_invitation_is_pending_until_accepted_and_gets_a_new_link(chromium, server):
    """Issue 43 §11: an invited user is "Invitation pending" (not "Active") until they choose a password; "New
    link" shows a new one-time link, and the first one stops working."""
    owner_context, owner = open_page(chromium)
    invitee_context, invitee = open_page(chromium)
    try:
        sign_in_with(owner, server, "owner@acme.example")
        owner.goto(server.base + "/users")
        owner.fill("#invite-email", "kim@acme.example")
        owner.click("button:has-text('Invite')")
        first = owner.input_value("#invite-link")
        owner.goto(server.base + "/users")
        row = "tr[data-email='kim@acme.example']"
        assert "Invitation pending" in owner.inner_text(row) and "Active" not in owner.inner_text(row)
        owner.click(f"{row} button:has-text('New link')")
        assert "A new sign-in link for kim@acme.example" in owner.inner_text("#invited")
        second = owner.input_value("#invite-link")
        assert "/invite/" in second and second != first

        invitee.goto(server.base + first[first.index("/invite/"):])
        assert "not valid" in invitee.content()
        invitee.console_errors.clear()  # the dead link's 404 answer
        invitee.goto(server.base + second[second.index("/invite/"):])
        invitee.fill("#password", AGENT_PASSWORD)
        invitee.fill("#password_again", AGENT_PASSWORD)
        invitee.click("button:has-text('Set password')")
        assert invitee.url == server.base + "/inbox"
        owner.goto(server.base + "/users")
        assert "Active" in owner.inner_text(row) and "Invitation pending" not in owner.inner_text(row)
        assert owner.locator(f"{row} button:has-text('New link')").count() == 0
        assert owner.console_errors == [] and invitee.console_errors == []
    finally:
        owner_context.close()
        invitee_context.close()


def test_browser_forgot_password_mails_a_link_that_sets_a_new_password(chromium, server):
    """Issue 39: the sign-in page's "Forgot password?" emails a one-time link (a real SMTP server, aiosmtpd), which
    sets a new password and signs in; the new password signs in again, and the link works once."""
    key = server.owner["api_key"]
    add_user_to_server(server, key, "lee@acme.example", "lee-old-password-1")
    mail_server = MailServer().start()
    context, page = open_page(chromium)
    try:
        with server.client(params={"apiKey": key}) as api:
            r = api.patch("/v1/account/settings", json={"email": {"address": "help@acme.example",
                                                                   "smtp": mail_server.settings()}})
            assert r.status_code == 200, r.text
        page.goto(server.base + "/login")
        page.click("text=Forgot password?")
        page.fill("#email", "lee@acme.example")
        page.click("button:has-text('Email me a link')")
        assert "a link to choose a new password is on its way" in page.inner_text("main")
        [mail] = mail_server.wait_for(1)
        assert mail["To"] == "lee@acme.example" and "Reset your Parley password" in mail["Subject"]
        link = re.search(r"https://\S+(/reset/[A-Za-z0-9_-]+)", mail.get_content()).group(1)
        page.goto(server.base + link)
        page.fill("#password", AGENT_PASSWORD)
        page.fill("#password_again", AGENT_PASSWORD)
        page.click("button:has-text('Set password')")
        assert page.url == server.base + "/inbox"
        page.click("button:has-text('Sign out')")
        page.goto(server.base + "/login")
        page.fill("#email", "lee@acme.example")
        page.fill("#password", AGENT_PASSWORD)
        page.click("button:has-text('Sign in')")
        assert page.url == server.base + "/inbox"
        page.goto(server.base + link)
        assert "not valid" in page.content()
        page.console_errors.clear()  # the spent link's 404 answer
        assert page.console_errors == []
    finally:
        context.close()
        mail_server.stop()
        with server.client(params={"apiKey": key}) as api:
            api.patch("/v1/account/settings", json={"email": None})


PAT = "pat@agency.example"  # a user of two accounts


@pytest.fixture(scope="module")
def two_accounts(tmp_path_factory):
    data = tmp_path_factory.mktemp("user-accounts") / "data"
    acme = run_cli(data, "create-account", "--name", "Acme", "--email", "owner@acme.example", "--password", PASSWORD)
    bikes = run_cli(data, "create-account", "--name", "Bikes", "--email", "owner@bikes.example", "--password",
                    PASSWORD)
    with ParleyProcess(data) as process:
        for account in (acme, bikes):
            add_user_to_server(process, account["api_key"], PAT, PASSWORD, role="admin")
        yield process


def test_browser_one_person_chooses_switches_and_is_removed_from_one_account(chromium, two_accounts):
    """Issue 36 §5: Pat, a user of Acme and of Bikes with one password, signs in once, chooses the account on the
    chooser page, switches with the navigation's account switcher; Acme's owner removes Pat on the Users page (a
    confirmation page, then Remove) and Pat's open page there is signed out at once; Pat's next sign-in opens
    Bikes only."""
    server = two_accounts
    pat_context, pat = open_page(chromium)
    owner_context, owner = open_page(chromium)
    try:
        sign_in_with(pat, server, PAT)
        assert pat.url.startswith(server.base + "/accounts")
        assert pat.inner_text("h1") == "Choose an account"
        pat.click("#accounts button:has-text('Bikes')")
        assert pat.url == server.base + "/inbox"
        assert pat.inner_text("#switch-account") == "Bikes"
        pat.click("nav >> text=Users")
        assert "owner@bikes.example" in pat.inner_text("main") and "owner@acme.example" not in pat.inner_text("main")

        pat.click("#switch-account")
        pat.click("#accounts button:has-text('Acme')")
        assert pat.inner_text("#switch-account") == "Acme"
        pat.click("nav >> text=Users")
        assert "owner@acme.example" in pat.inner_text("main") and "owner@bikes.example" not in pat.inner_text("main")
        pat.goto(server.base + "/inbox")
        wait_until(pat, "document.getElementById('live-status').dataset.state === 'live'", timeout=10)

        sign_in_with(owner, server, "owner@acme.example")
        owner.goto(server.base + "/users")
        owner.click(f"tr[data-email='{PAT}'] a:has-text('Remove')")
        assert f"Remove {PAT} from this account?" in owner.inner_text("h1")
        owner.click("#confirm-remove")
        assert f"{PAT}: removed from this account." in owner.inner_text("main")
        assert owner.locator(f"tr[data-email='{PAT}']").count() == 0
        pat.wait_for_url("**/login**", timeout=10_000)  # the socket closed, the reload found no session

        sign_in_with(pat, server, PAT)  # Bikes only now: no chooser, no switcher
        assert pat.url == server.base + "/inbox" and pat.locator("#switch-account").count() == 0
        pat.click("nav >> text=Users")
        assert "owner@bikes.example" in pat.inner_text("main")
        assert pat.console_errors == [] and owner.console_errors == []
    finally:
        pat_context.close()
        owner_context.close()
