"""Roles on every UI route (issue 21), walking the route table like tests/test_idempotency.py: each UI handler
declares the least role it needs; an agent is refused (403) every admin and owner page and allowed the agent
ones; an admin is refused the owner pages; the navigation shows an agent no link it would be refused."""
import html
import re

import pytest

from handlers import routes
from handlers.ui_base import UiHandler
from services import users
from handlers.ui.campaigns import CampaignPage, CampaignsPage
from services import accounts, live
from storage import events
from tests.campaign_helpers import create, make_list, people, set_webhook
from tests.inbound_helpers import inbound
from tests.live_helpers import Socket
from tests.team_users import NEW_PASSWORD, accept, invite
from tests.ui_helpers import PASSWORD, FormClient

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


# ---- "View as" (issue 36 §1, §2): an agency user in a sub-account is never more than they are ------------------

@pytest.fixture
def sub_with_owner(io_loop, services, ui_agency):
    """A sub-account of ui_agency with its own owner, who can sign in."""
    return io_loop.run_sync(lambda: accounts.create_account(
        services.db, services.box, services.keys, name="Rossi Ltd", email="rossi@client.example",
        agency_email=ui_agency["email"], password=PASSWORD))


@pytest.fixture
def agency_admin(io_loop, api, http_server_client, ui_agency):
    """(user, browser) of an admin of the agency, signed in."""
    user = io_loop.run_sync(lambda: invite(api, ui_agency["api_key"], "staff@agency.example", role="admin"))
    return user, io_loop.run_sync(lambda: accept(http_server_client, user["signInUrl"]))


async def _view_as(browser, sub_id):
    r = await browser.post(f"/agency/subaccounts/{sub_id}/view-as")
    assert (r.code, r.headers["Location"]) == (303, "/inbox")
    return browser


async def _viewing(browser, sub):
    """Whether the browser's pages are the sub-account's (the view-as works)."""
    page = (await browser.get("/inbox")).text
    return 'id="viewing-as"' in page and f"Viewing as <strong>{sub['name']}</strong>" in page


async def _walk_viewing(browser, sub):
    """_walk as a view-as session: every route but the one that ends it; the view-as must hold throughout."""
    outcomes = {}
    for path, handler, methods in ui_routes():
        if path in ("/logout", "/view-as/end"):
            continue
        for method in methods:
            r = await (browser.get(path) if method == "get" else browser.post(path, {}))
            refused = REFUSED in r.text
            assert not refused or r.code == 403, (method, path, r.code)
            outcomes[(method, path)] = (refused, users.allows(handler.role, "owner"))
    assert await _viewing(browser, sub)
    return outcomes


async def test_viewing_as_an_agency_owner_or_admin_is_an_admin_of_the_sub_account(
        api, services, agency_browser, agency_admin, sub_with_owner):
    """The walk of every UI route: viewing a sub-account, the agency's owner and admin alike are refused every
    owner page (API key, signing secret, owners) and nothing else; the sub-account's key is never rotated."""
    for browser in (agency_browser, agency_admin[1]):
        await _view_as(browser, sub_with_owner["account_id"])
        for (method, path), (refused, should_refuse) in (await _walk_viewing(browser, sub_with_owner)).items():
            assert refused == should_refuse, (method, path)
        assert (await api.get("/v1/account", key=sub_with_owner["api_key"])).code == 200  # the key still works
    for path in ("/settings/webhook-secret", "/settings/api-key"):
        r = await agency_browser.get(path)
        assert r.code in (403, 405) and "whsec_" not in r.text, path
    settings = (await agency_browser.get("/settings")).text
    assert "whsec_" not in settings and 'action="/settings/password"' not in settings
    # Their own password is not the sub-account's page to change.
    r = await agency_browser.post("/settings/password", {"current_password": PASSWORD, "new_password": "x" * 20,
                                                         "new_password_again": "x" * 20})
    assert r.code == 403 and "your own account" in r.text


async def test_an_invitation_made_viewing_as_cannot_make_an_owner(api, services, agency_browser, sub_with_owner):
    await _view_as(agency_browser, sub_with_owner["account_id"])
    r = await agency_browser.post("/users", {"email": "mole@agency.example", "role": "owner"})
    assert r.code == 403
    people = (await api.get("/v1/users", key=sub_with_owner["api_key"])).json["data"]
    assert [(u["email"], u["role"]) for u in people] == [("rossi@client.example", "owner")]
    r = await agency_browser.post("/users", {"email": "helper@agency.example", "role": "admin"})
    assert r.code == 201
    page = (await agency_browser.get("/users")).text
    assert 'value="owner"' not in page  # the role choices offer no owner
    people = (await api.get("/v1/users", key=sub_with_owner["api_key"])).json["data"]
    assert sorted(u["role"] for u in people) == ["admin", "owner"]


async def test_viewing_as_ends_with_the_viewers_role_change_sign_out_or_deactivation(
        api, services, http_server_client, ui_agency, agency_admin, sub_with_owner):
    """A view-as works only beside the session it was started from, while the viewer keeps their role and is
    active: a demotion (even one undone), a sign-out (even a new sign-in in the same browser), a deactivation
    (even one undone) each end it, and it does not come back."""
    user, browser = agency_admin
    key = ui_agency["api_key"]
    await _view_as(browser, sub_with_owner["account_id"])
    assert await _viewing(browser, sub_with_owner)
    for role in ("agent", "admin"):
        assert (await api.patch(f"/v1/users/{user['id']}", {"role": role}, key=key)).code == 200
        assert not await _viewing(browser, sub_with_owner)
    await _view_as(browser, sub_with_owner["account_id"])
    view_cookie = browser.cookies["parley_view_as"]
    assert (await browser.post("/logout", {})).code == 303
    assert (await browser.login("staff@agency.example", NEW_PASSWORD)).code == 303
    browser.cookies["parley_view_as"] = view_cookie
    assert not await _viewing(browser, sub_with_owner)
    await _view_as(browser, sub_with_owner["account_id"])
    for active in (False, True):
        assert (await api.patch(f"/v1/users/{user['id']}", {"active": active}, key=key)).code == 200
    assert (await browser.login("staff@agency.example", NEW_PASSWORD)).code == 303
    assert not await _viewing(browser, sub_with_owner)
    # A view-as cookie beside another session of the same viewer (another browser) opens nothing either.
    await _view_as(browser, sub_with_owner["account_id"])
    other = FormClient(http_server_client)
    assert (await other.login("staff@agency.example", NEW_PASSWORD)).code == 303
    other.cookies["parley_view_as"] = browser.cookies["parley_view_as"]
    assert not await _viewing(other, sub_with_owner)
    assert await _viewing(browser, sub_with_owner)


# ---- the live socket (/ws): a page receives what its user's role may see, for as long as it may -------------

def _emit(cx, account_id, events_):
    for event_type, data in events_:
        events.emit_in_tx(cx, account_id, event_type, data)


async def test_a_view_as_socket_closes_when_the_viewers_role_changes(
        api, services, http_server_client, ui_agency, agency_admin, sub_with_owner):
    user, browser = agency_admin
    sub_id = sub_with_owner["account_id"]
    await _view_as(browser, sub_id)
    socket = await Socket.open(http_server_client, browser.cookies, 0)
    await socket.until(lambda f: f["type"] == "ready")
    await services.db.write(_emit, sub_id, [("message.created", {"n": 1})])
    assert [e["type"] for e in await socket.events(1)] == ["message.created"]
    # Presence names the viewer "as" the sub-account (services/presence.py tells the others by this label).
    [page] = services.hub._subscribers[sub_id]
    assert (page.user_id, page.label, page.role) == (user["id"], "staff@agency.example as Rossi Ltd", "admin")
    assert (await api.patch(f"/v1/users/{user['id']}", {"role": "agent"}, key=ui_agency["api_key"])).code == 200
    assert await socket.next() is None and socket.connection.close_code == live.CLOSE_SIGNED_OUT
    # Reconnecting with the same cookies is the agency's own socket now (the view-as is over).
    again = await Socket.open(http_server_client, browser.cookies, 0)
    await again.until(lambda f: f["type"] == "ready")
    await services.db.write(_emit, sub_id, [("message.created", {"n": 2})])
    await services.db.write(_emit, ui_agency["account_id"], [("message.created", {"n": 3})])
    assert [e["data"] for e in await again.events(1)] == [{"n": 3}]
    again.close()


async def test_campaign_progress_reaches_only_pages_whose_role_has_the_campaign_pages(
        services, http_server_client, ui_account, signed_in, agent, admin):
    """Live and on catch-up alike: an agent's page never receives campaign.progress (the campaign pages are
    the admins'); the owner's and an admin's do. One rule in the hub, by the pages' own roles."""
    account_id = ui_account["account_id"]
    sockets = {}
    for name, client in (("owner", signed_in), ("admin", admin), ("agent", agent)):
        sockets[name] = await Socket.open(http_server_client, client.cookies, 0)
        await sockets[name].until(lambda f: f["type"] == "ready")
    mixed = [("campaign.progress", {"campaignId": "cmp_1"}), ("message.created", {"n": 1}),
             ("campaign.progress", {"campaignId": "cmp_1"})]
    await services.db.write(_emit, account_id, mixed)
    await services.db.write(_emit, account_id, [("message.created", {"n": 2})])
    for name in ("owner", "admin"):
        assert [e["type"] for e in await sockets[name].events(4)] == [t for t, _ in mixed] + ["message.created"]
    assert [e["data"] for e in await sockets["agent"].events(2)] == [{"n": 1}, {"n": 2}]
    late = await Socket.open(http_server_client, agent.cookies, 0)  # a page that catches up from the start
    frame = await late.until(lambda f: f["type"] == "events")
    assert [e["data"] for e in frame["events"]] == [{"n": 1}, {"n": 2}]
    for socket in (*sockets.values(), late):
        socket.close()
    assert live.EVENT_PAGE_ROLES[events.CAMPAIGN_PROGRESS] == CampaignsPage.role == CampaignPage.role


# ---- the pages offer only what the role may use (issue 43 §4) --------------------------------------------------

_TARGETS = re.compile(r'\b(?:href|action|formaction|data-[a-z-]*(?:action|src))="(/[^"]*)"')


def _route_role(path):
    """The least role of the UI route path (query ignored) leads to, or None for no UI route (static files)."""
    for pattern, handler, *_ in routes():
        if isinstance(handler, type) and issubclass(handler, UiHandler) and re.fullmatch(pattern, path):
            return handler.role
    return None


async def _offered(client, start="/inbox", limit=150):
    """Walk the pages from start as this client, following its links: {target path: the page that offers it}
    for every link, form and script target of the pages it can reach."""
    offered, seen, queue = {}, set(), [start]
    while queue and len(seen) < limit:
        page = queue.pop(0)
        r = await client.get(page)
        if r.code != 200 or "text/html" not in r.headers.get("Content-Type", ""):
            continue
        for target in map(html.unescape, _TARGETS.findall(r.text)):
            path = target.split("?", 1)[0].split("#", 1)[0]
            offered.setdefault(path, page)
            if 'href="' + target.replace("&", "&amp;") in r.text and target not in seen and path != "/logout" \
                    and sum(s.split("?", 1)[0] == path for s in seen) < 2:  # a path's pages: two (pagers)
                seen.add(target)
                queue.append(target)
    return offered, seen


@pytest.fixture
def full_account(io_loop, api, services, signed_in, ui_account, receiver):
    """The ui_account with something on every page: a conversation with a note, a list with its member, a
    campaign, a canned reply, a contact import."""
    async def fill():
        account_id = ui_account["account_id"]
        await set_webhook(api, ui_account, receiver.url)
        list_id, [contact_id] = await make_list(services, ui_account, people(1))
        await inbound(services, account_id, "+14155550000", "Hello")
        assert (await create(api, ui_account, list_id)).code == 201
        r = await api.post(f"/v1/conversations/{contact_id}/notes", {"body": "VIP"}, key=ui_account["api_key"])
        assert r.code == 201, r.body
        r = await api.post("/v1/canned-replies", {"code": "hi", "body": "Hi there"}, key=ui_account["api_key"])
        assert r.code == 201, r.body
        return contact_id
    return io_loop.run_sync(fill)


@pytest.mark.parametrize("role", ["agent", "admin", "owner"])
async def test_each_role_is_offered_no_link_or_form_it_would_be_refused(
        role, api, http_server_client, ui_account, signed_in, full_account):
    if role == "owner":
        client = signed_in
    else:
        user = await invite(api, ui_account["api_key"], f"{role}@acme.example", role=role)
        client = await accept(http_server_client, user["signInUrl"])
    offered, walked = await _offered(client)
    assert f"/contacts/{full_account}" in walked and f"/inbox/{full_account}" in walked
    refused = {path: page for path, page in offered.items()
               if _route_role(path) and not users.allows(role, _route_role(path))}
    assert not refused, f"{role} is offered what it is refused: {refused}"
    if role == "agent":  # the walk saw the pages an agent works on (and the contact page's other actions)
        assert f"/contacts/{full_account}/opt-out" in offered and "/lists" in walked
    else:
        assert f"/contacts/{full_account}/erase" in offered
