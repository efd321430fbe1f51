"""The team inbox end to end (issue 21): two users of one account signed in at once, each in a browser context
of their own (Chromium through Playwright, the real server.py over HTTPS). An assignment or a resolve made by
one shows live on the other's pages, without a reload; two people on one thread see each other there, and
see the other go."""
import pytest

from tests.team_users import add_user_to_server
from tests.ui_helpers import assert_not_reloaded, mark_no_reload
from tests.inbound_helpers import contact_of, post_inbound, wait_live, wait_until
from tests.ui_helpers import open_page, sign_in

BOB, BOB_PASSWORD = "bob@team.example", "bob's long enough password"


@pytest.fixture(scope="module")
def parley(parley):
    """The shared server of ui_fixtures, with Bob a user of its first-run account."""
    add_user_to_server(parley, parley.first_run["api_key"], BOB, BOB_PASSWORD)
    return parley


@pytest.fixture
def alice(chromium, parley):
    context, page = open_page(chromium)
    sign_in(page, parley)
    yield page
    context.close()


@pytest.fixture
def bob(chromium, parley):
    context, page = open_page(chromium)
    page.goto(parley.base + "/login")
    page.fill("#email", BOB)
    page.fill("#password", BOB_PASSWORD)
    page.click("button:has-text('Sign in')")
    yield page
    context.close()


def _open(page, url):
    page.goto(url)
    wait_live(page)
    mark_no_reload(page)


def test_browser_an_assignment_and_a_bulk_resolve_show_live_on_the_other_users_pages(alice, bob, parley):
    contact_id = contact_of(parley, post_inbound(parley, "Can someone help me?", from_id="+14155557001",
                                                 firstName="Dora")[0])
    _open(alice, parley.base + "/inbox?filter=all")
    _open(bob, parley.base + f"/inbox/{contact_id}")
    row = f"#conversations li[data-contact='{contact_id}']"
    assert alice.locator(f"{row} .badge-assignee").count() == 0

    bob.select_option("#assignee", label=f"{BOB} (me)")  # bob takes it
    bob.click("#conversation-state button:has-text('Assign')")
    alice.wait_for_selector(f"{row} .badge-assignee:has-text('{BOB}')")
    bob.wait_for_selector(f"#conversation-state:has-text('Assigned to {BOB}')")

    alice.check(f"{row} input.pick")  # alice resolves it from the list
    alice.select_option("#bulk-action", "resolve")
    alice.click("#bulk button:has-text('Apply')")
    bob.wait_for_selector("#conversation-state .badge.status-resolved")
    alice.wait_for_selector(f"{row} .badge.status-resolved")
    assert alice.inner_text("#bulk-count") == "Tick conversations, then"

    post_inbound(parley, "Actually, one more thing", from_id="+14155557001")  # the contact writes again
    bob.wait_for_selector("#conversation-state .badge.status-open")
    alice.wait_for_selector(f"{row}:not(:has(.status-resolved))")
    for page in (alice, bob):
        assert_not_reloaded(page)
        assert page.console_errors == []


def test_browser_two_people_on_one_thread_see_each_other_and_see_the_other_go(alice, bob, parley):
    contact_id = contact_of(parley, post_inbound(parley, "Hello?", from_id="+14155557002", firstName="Eli")[0])
    _open(alice, parley.base + f"/inbox/{contact_id}")
    assert alice.is_hidden("#presence")
    _open(bob, parley.base + f"/inbox/{contact_id}")
    bob.wait_for_selector(f"#presence:has-text('{parley.first_run['login']} is viewing')")
    alice.wait_for_selector(f"#presence:has-text('{BOB} is viewing')")

    bob.goto(parley.base + "/inbox")  # bob leaves the thread
    wait_until(alice, "document.getElementById('presence').hidden")
    _open(bob, parley.base + f"/inbox/{contact_id}")
    alice.wait_for_selector(f"#presence:has-text('{BOB} is viewing')")
    bob.close()  # his tab closes
    wait_until(alice, "document.getElementById('presence').hidden")
    assert_not_reloaded(alice)
    assert alice.console_errors == []
