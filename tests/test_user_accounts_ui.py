"""One person in two accounts, in headless Chromium against the real server (issue 36 §5): Pat signs in once,
chooses the account on the chooser page, switches with the navigation's account switcher; the owner of one
account removes Pat on the Users page (a confirmation page, then the Remove button) and Pat's open page there is
signed out at once; Pat's next sign-in opens the other account only."""
import pytest

from tests.parley_process import ParleyProcess, run_cli
from tests.team_users import add_user_to_server
from tests.test_agency_ui import sign_in
from tests.test_inbox_e2e import wait_until
from tests.ui_helpers import PASSWORD, open_page

PAT = "pat@agency.example"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("user-accounts") / "data"
    acme = run_cli(data, "create-account", "--name", "Acme", "--email", "owner@acme.example", "--password", PASSWORD)
    bikes = run_cli(data, "create-account", "--name", "Bikes", "--email", "owner@bikes.example", "--password",
                    PASSWORD)
    with ParleyProcess(data) as process:
        for account in (acme, bikes):
            add_user_to_server(process, account["api_key"], PAT, PASSWORD, role="admin")
        yield process


def test_browser_one_person_chooses_switches_and_is_removed_from_one_account(chromium, server):
    pat_context, pat = open_page(chromium)
    owner_context, owner = open_page(chromium)
    try:
        sign_in(pat, server, PAT)
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

        sign_in(owner, server, "owner@acme.example")
        owner.goto(server.base + "/users")
        owner.click(f"tr[data-email='{PAT}'] a:has-text('Remove')")
        assert f"Remove {PAT} from this account?" in owner.inner_text("h1")
        owner.click("#confirm-remove")
        assert f"{PAT}: removed from this account." in owner.inner_text("main")
        assert owner.locator(f"tr[data-email='{PAT}']").count() == 0
        pat.wait_for_url("**/login**", timeout=10_000)  # the socket closed, the reload found no session

        sign_in(pat, server, PAT)  # Bikes only now: no chooser, no switcher
        assert pat.url == server.base + "/inbox" and pat.locator("#switch-account").count() == 0
        pat.click("nav >> text=Users")
        assert "owner@bikes.example" in pat.inner_text("main")
        assert pat.console_errors == [] and owner.console_errors == []
    finally:
        pat_context.close()
        owner_context.close()
