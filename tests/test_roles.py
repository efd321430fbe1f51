"""Roles on every UI route (issue 21), walking the route table like tests/test_idempotency.py: each UI handler
declares the least role it needs; an agent is refused (403) every admin and owner page and allowed the agent
ones; an admin is refused the owner pages; the navigation shows an agent no link it would be refused."""
import re

import pytest

from handlers import routes
from handlers.ui_base import UiHandler
from services import users
from tests.ui_helpers import PASSWORD, FormClient
from tests.test_users import accept, invite

# A value for each kind of path group, so that every route can be requested.
_GROUP_VALUES = [(r"\((\w+)_\[0-9a-z\]\+\)", lambda m: f"{m[1]}_0"), (r"\(\[\^/\]\+\)", lambda m: "x"),
                 (r"\(\[A-Za-z0-9_-\]\{20,100\}\)", lambda m: "a" * 30), (r"\(([a-z-]+)(\|[a-z-]+)+\)", lambda m: m[1]),
                 (r"\(\[0-9a-f\]\{64\}\)", lambda m: "0" * 64)]
REFUSED = "cannot use this page"


def ui_routes():
    """(path, handler, methods) of every UI route, with sample values in its groups."""
    found = []
    for pattern, handler, *_ in routes():
        if not (isinstance(handler, type) and issubclass(handler, UiHandler)):
            continue
        path = pattern
        for group, value in _GROUP_VALUES:
            path = re.sub(group, value, path)
        path = path.replace("\\.", ".")
        assert "(" not in path and "\\" not in path, f"add a sample value for {pattern}"
        methods = [m for m in ("get", "post") if getattr(handler, m) is not getattr(UiHandler, m)]
        found.append((path, handler, methods))
    return found


def test_every_ui_route_declares_a_role():
    undeclared = [path for path, handler, _ in ui_routes() if handler.role not in users.ROLES]
    assert not undeclared, f"give these handlers a role attribute: {undeclared}"
    assert {handler.role for _, handler, _ in ui_routes()} == set(users.ROLES)


@pytest.fixture
def agent(io_loop, api, http_server_client, ui_account):
    user = io_loop.run_sync(lambda: invite(api, ui_account["api_key"], "agent@acme.example", role="agent"))
    return io_loop.run_sync(lambda: accept(http_server_client, user["signInUrl"]))


@pytest.fixture
def admin(io_loop, api, http_server_client, ui_account):
    user = io_loop.run_sync(lambda: invite(api, ui_account["api_key"], "admin@acme.example", role="admin"))
    return io_loop.run_sync(lambda: accept(http_server_client, user["signInUrl"]))


async def _walk(client, least_refused):
    """Every route and method as this client: {(method, path): refused?}, and the refusals are 403 pages."""
    outcomes = {}
    for path, handler, methods in ui_routes():
        if path == "/logout":
            continue  # it would end the walk's session; it is role "agent" like the rest of signing in
        for method in methods:
            r = await (client.get(path) if method == "get" else client.post(path, {}))
            refused = REFUSED in r.text
            assert not refused or r.code == 403, (method, path, r.code)
            outcomes[(method, path)] = (refused, users.allows(handler.role, least_refused))
    return outcomes


async def test_an_agent_is_refused_every_admin_and_owner_page_and_allowed_the_agent_ones(agent):
    for (method, path), (refused, should_refuse) in (await _walk(agent, "admin")).items():
        assert refused == should_refuse, (method, path)
    assert (await agent.get("/inbox")).code == 200  # still signed in after the walk


async def test_an_admin_is_refused_only_the_owner_pages(admin):
    for (method, path), (refused, should_refuse) in (await _walk(admin, "owner")).items():
        assert refused == should_refuse, (method, path)


async def test_the_refusal_is_a_friendly_page_and_the_navigation_hides_what_an_agent_cannot_use(agent, signed_in):
    r = await agent.get("/settings")
    assert r.code == 403 and "Your role (agent)" in r.text and "<html" in r.text
    r = await agent.get("/settings", headers={"Accept": "application/json"})
    assert r.code == 403 and '"ROLE_FORBIDDEN"' in r.text
    inbox = (await agent.get("/inbox")).text
    nav = inbox[inbox.index('<nav aria-label="Main">'):inbox.index("</nav>")]
    for path, handler, _ in ui_routes():
        if f'href="{path}"' in nav:
            assert handler.role == "agent", path
    assert 'href="/inbox"' in nav and 'href="/settings"' not in nav and 'href="/users"' not in nav
    owner_nav = (await signed_in.get("/inbox")).text
    assert 'href="/settings"' in owner_nav and 'href="/users"' in owner_nav and 'href="/audit"' in owner_nav


async def test_an_agent_changes_its_own_password_on_its_account_page(agent):
    page = await agent.get("/account")
    assert page.code == 200 and 'action="/settings/password"' in page.text and "API Key" not in page.text
    r = await agent.post("/settings/password", {"current_password": "wrong", "new_password": PASSWORD,
                                                "new_password_again": PASSWORD})
    assert r.code == 400 and "Your account" in r.text
    r = await agent.post("/settings/password", {"current_password": "a long enough password",
                                                "new_password": PASSWORD, "new_password_again": PASSWORD})
    assert (r.code, r.headers["Location"]) == (303, "/account")
