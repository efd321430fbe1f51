"""Automatic assignment as a new team would try it (issue 40): the real server.py over HTTPS and three agents, each
signed in in a browser context of their own (Chromium through Playwright). Their inbox pages being open is what
makes them present (awayAfterMinutes); one of them switches herself Away in the page header. Conversations spread
by capacity, the one left over waits, and goes to the agent who resolves one in their thread; the away agent gets
nothing."""
import pytest

from tests.team_users import add_user_to_server
from tests.inbound_helpers import contact_of, post_inbound, wait_live, wait_until
from tests.ui_helpers import open_page
from tests.waiting import until_sync

PASSWORD = "a long enough agent password"
AGENTS = {"amy@team.example": 1, "bo@team.example": 2, "cy@team.example": 2}  # email: capacity


@pytest.fixture(scope="module")
def parley(parley):
    """The shared server of ui_fixtures, with the three agents (the owner unavailable) and balanced assignment."""
    key = {"apiKey": parley.first_run["api_key"]}
    parley.agents = {email: add_user_to_server(parley, parley.first_run["api_key"], email, PASSWORD)
                     for email in AGENTS}
    with parley.client() as api:
        owner = next(u for u in api.get("/v1/users", params=key).json()["data"] if u["role"] == "owner")["id"]
        assert api.patch(f"/v1/users/{owner}", params=key, json={"available": False}).status_code == 200
        for email, capacity in AGENTS.items():
            r = api.patch(f"/v1/users/{parley.agents[email]}", params=key, json={"capacity": capacity})
            assert r.status_code == 200, r.text
        r = api.patch("/v1/account/settings", params=key, json={"assignment": {"mode": "balanced"}})
        assert r.status_code == 200, r.text
    return parley


@pytest.fixture
def agents(chromium, parley):
    contexts, pages = [], {}
    for email in AGENTS:
        context, page = open_page(chromium)
        contexts.append(context)
        page.goto(parley.base + "/login")
        page.fill("#email", email)
        page.fill("#password", PASSWORD)
        page.click("button:has-text('Sign in')")
        page.goto(parley.base + "/inbox?filter=mine")
        wait_live(page)
        pages[email] = page
    yield pages
    for context in contexts:
        context.close()


MINE = "document.querySelectorAll('#conversations li[data-contact]').length"


def _assignee(parley, contact_id):
    with parley.client() as api:
        return api.get(f"/v1/conversations/{contact_id}", params={"apiKey": parley.first_run["api_key"]}
                       ).json()["assigneeUserId"]


def test_browser_conversations_spread_by_capacity_wait_and_skip_the_away_agent(agents, parley):
    amy, bo, cy = (agents[email] for email in AGENTS)
    cy.click("#availability")  # cy goes away from her own header
    cy.wait_for_selector("#availability.away")
    wait_live(cy)

    contacts = [contact_of(parley, post_inbound(parley, f"Question {i}", from_id=f"+1415555810{i}")[0])
                for i in range(4)]
    wait_until(amy, f"{MINE} === 1")
    wait_until(bo, f"{MINE} === 2")
    ids = {user_id: email for email, user_id in parley.agents.items()}
    assigned = [ids.get(_assignee(parley, contact_id)) for contact_id in contacts]
    assert sorted(filter(None, assigned)) == ["amy@team.example", "bo@team.example", "bo@team.example"]
    waiting = contacts[assigned.index(None)]
    assert waiting == contacts[3]  # the newest waits: everyone available is full

    bo.click("#conversations li[data-contact] a")  # bo opens one of his and resolves it
    wait_live(bo)
    bo.click("#conversation-state button:has-text('Resolve')")
    bo.wait_for_selector("#conversation-state .badge.status-resolved")
    assert until_sync(lambda: _assignee(parley, waiting) == parley.agents["bo@team.example"])
    bo.goto(parley.base + "/inbox?filter=mine")  # his list: the resolved one gone, the waiting one his
    wait_until(bo, f"{MINE} === 2")
    assert bo.locator(f"#conversations li[data-contact='{waiting}']").count() == 1
    assert cy.evaluate(MINE) == 0
    for page in (amy, bo, cy):
        assert page.console_errors == []

