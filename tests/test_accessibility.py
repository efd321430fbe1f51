"""axe-core on every page of the UI (issue 36 §16): /docs had 770 serious colour-contrast nodes and a heading
out of order while every other page had none. The walk reads the route table, so a new page is checked as soon
as it is routed; it signs in (an account with something on every page, and an agency), visits each page in
the real Chromium, runs the vendored axe-core (tests/axe/, never served) and fails on any serious or critical
violation, printing each with its nodes."""
import re
from urllib.parse import urlsplit

import pytest

from common import one_time_link_kinds
from handlers import routes
from handlers.ui_base import UiHandler
from tests.parley_process import ParleyProcess, complete_setup, first_run_receiver, run_cli
from tests.ui_helpers import axe_violations, open_page, report

AGENCY_EMAIL, SUB_EMAIL, AGENCY_PASSWORD = "agency-owner@example.com", "client@example.com", "agency-chose-this-1"

pytestmark = pytest.mark.sqlite_only(reason="the pages are the same HTML on either database; the walk runs once")


def ui_get_routes():
    """The pattern of every UI route that answers GET (the /docs page included)."""
    return [pattern for pattern, handler, *_ in routes()
            if isinstance(handler, type) and issubclass(handler, UiHandler) and handler.get is not UiHandler.get]


@pytest.fixture(scope="module")
def parley(tmp_path_factory):
    process = ParleyProcess(tmp_path_factory.mktemp("axe") / "data", "--allow-private-webhooks", setup=False)
    try:
        yield process.start(timeout=120)
    finally:
        process.stop()


def fill(parley):
    """Something on every page of the first-run account, an import with a bad row, an agency, and an unused
    invitation: the sample values of the walk's path groups (the agency's sub-account is made in its form)."""
    key = {"apiKey": parley.first_run["api_key"]}
    with parley.client() as api:
        def post(path, body):
            r = api.post(path, params=key, json=body)
            assert r.status_code in (200, 201), (path, r.text)
            return r.json()
        message = post("/v1/incoming_custom_channel_message", {"customData": {
            "messageSid": "axe-1", "fromId": "+14155550100", "toId": "shop", "body": "Hello there"}})
        contact = api.get(f"/v1/messages/{message['messageId']}", params=key).json()["contactId"]
        note = post(f"/v1/conversations/{contact}/notes", {"body": "VIP"})["id"]
        canned = post("/v1/canned-replies", {"code": "hi", "body": "Hi there"})["id"]
        list_id = post("/v1/lists", {"name": "Leads"})["id"]
        post(f"/v1/lists/{list_id}/contacts", {"contactId": contact})
        campaign = post("/v1/campaigns", {"name": "Spring", "listId": list_id, "body": "Hi {{firstName}}!"})["id"]
        invited = post("/v1/users", {"email": "agent@example.com", "role": "agent"})
    csv = parley.data_dir.parent / "people.csv"
    csv.write_text("Name,Phone,Email\nAnn Lee,+1 646 555 2000,ann@example.com\nBad,12345,\n")
    imported = run_cli(parley.data_dir, "import-contacts", "--email", parley.first_run["login"], str(csv),
                       "--list", list_id)
    run_cli(parley.data_dir, "create-account", "--name", "Agency", "--email", AGENCY_EMAIL, "--agency",
            "--password", AGENCY_PASSWORD)
    return {"ct": contact, "msg": message["messageId"], "note": note, "cr": canned, "lst": list_id,
            "cmp": campaign, "usr": invited["id"], "import": imported["import_id"], "invite": invited["signInUrl"]}


def sample_path(pattern, ids):
    """The route's path with the walk's values in its groups (an assertion names a group it has none for)."""
    path = pattern.replace(r"\.", ".")
    path = re.sub(r"\((\w+)_\[0-9a-z\]\+\)", lambda m: ids[m[1]], path)
    path = re.sub(r"^/contacts/import/\(\[\^/\]\+\)", "/contacts/import/" + ids["import"], path)
    path = re.sub(r"^/agency/subaccounts/\(\[\^/\]\+\)", "/agency/subaccounts/" + ids["sub"], path)
    path = re.sub(r"\(([a-z-]+)(\|[a-z-]+)+\)", lambda m: m[1], path)  # one of the names (reports)
    assert "(" not in path and "\\" not in path, f"give the walk a value for the groups of {pattern}"
    return path


def visit(page, url):
    """Open url, wait until its scripts have fetched what they fill the page with; the response."""
    response = page.goto(url)
    page.wait_for_load_state("networkidle")
    return response


def test_every_page_has_no_serious_or_critical_axe_violation(chromium, parley):
    first_run = parley.first_run
    context, page = open_page(chromium, bypass_csp=True)  # axe is added as a script the site's CSP would refuse
    found, visited, not_pages = {}, [], {}

    def check(name, url=None):
        """axe on url (None: the page as it is now)."""
        if url is not None:
            response = visit(page, url)
            assert response.status < 500, (url, response.status)
        visited.append(name)
        if violations := axe_violations(page):
            found[name] = violations

    def sign_in(email, password):
        context.clear_cookies()
        page.goto(parley.base + "/login")
        page.fill("#email", email)
        page.fill("#password", password)
        page.click("button:has-text('Sign in')")
        page.wait_for_url(lambda url: "/login" not in url)

    def link(url):
        return parley.base + urlsplit(url).path  # the link names the public URL

    def choose_password(name, url):
        check(name, link(url))
        page.fill("#password", AGENCY_PASSWORD)
        page.fill("#password_again", AGENCY_PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: not re.match(one_time_link_kinds.PATH_PATTERN, urlsplit(url).path))

    try:
        # Signed out: the first run's setup link, the sign-in page, an unknown page, an invitation.
        check("/setup/<token>", link(first_run["setup_url"]))
        parley.first_run = first_run = complete_setup(parley, first_run)
        with first_run_receiver(parley):  # a campaign needs a Custom Channel Webhook
            ids = fill(parley)
        check("/invite/<token>", link(ids["invite"]))
        check("/login", parley.base + "/login")
        check("404", parley.base + "/no-such-page")

        # The agency's owner makes a sub-account and a reset link for its owner in the forms (those answers
        # are pages too), then walks the agency's pages.
        sign_in(AGENCY_EMAIL, AGENCY_PASSWORD)
        visit(page, parley.base + "/agency")
        page.fill("#sub-name", "Client")
        page.fill("#sub-email", SUB_EMAIL)
        page.click("button:has-text('Create sub-account')")
        page.wait_for_url("**/agency/subaccounts")
        check("sub-account created")
        ids["sub"] = page.get_attribute("a:has-text('Open the sub-account')", "href").rsplit("/", 1)[1]
        visit(page, parley.base + f"/agency/subaccounts/{ids['sub']}")
        page.click(f"form[action='/agency/subaccounts/{ids['sub']}/reset-password'] button[type=submit]")
        page.wait_for_url("**/reset-password")
        check("sub-account reset link")
        reset_link = page.input_value("#sign-in-url")
        patterns = ui_get_routes()
        for pattern in patterns:
            if pattern.startswith("/agency"):
                check(pattern, parley.base + sample_path(pattern, ids))

        # The sub-account's owner through the reset link: the pages of a sub-account.
        context.clear_cookies()
        choose_password("/reset/<token>", reset_link)
        assert {"setup", "reset", "invite"} == set(one_time_link_kinds.PURPOSES), "visit the new kind's page"
        check("/credits", parley.base + "/credits")

        # The first-run account's owner: every other page of the route table.
        sign_in(first_run["login"], first_run["password"])
        for pattern in patterns:
            if pattern.startswith(("/agency", one_time_link_kinds.PATH_PATTERN)) or pattern in ("/login", "/credits"):
                continue  # visited above
            if pattern.startswith("/csat/"):
                continue  # a CSAT question's page needs a resolved conversation's link: tests/test_csat_e2e.py runs axe on it
            if pattern == "/docs":
                continue  # the test below (its axe run is most of the time: another worker can take it)
            path = sample_path(pattern, ids)
            answer = page.request.get(parley.base + path)
            assert answer.status < 400, (path, answer.status)
            body = answer.text() if answer.headers.get("content-type", "").startswith("text/html") else ""
            if "<html" not in body[:300].lower():
                not_pages[pattern] = answer.headers.get("content-type")  # a CSV, JSON or a page's fragment
                continue
            check(pattern, parley.base + path)
    finally:
        context.close()

    print(f"axe-core walked {len(visited)} pages: {visited}; not pages: {not_pages}")
    assert not found, "axe-core violations:\n" + report(found)
    # The walk saw the pages it is about: a regression in the walk itself must not pass as "nothing found".
    assert {"/inbox/(ct_[0-9a-z]+)", "/campaigns/(cmp_[0-9a-z]+)", "/agency", "/setup/<token>",
            "/invite/<token>", "/reset/<token>", "404", "/login", "/credits"} <= set(visited), visited


def test_docs_has_no_serious_or_critical_axe_violation(chromium, parley):
    """/docs (Redoc's rendering of the OpenAPI document, ~20,000 elements): 798 colour-contrast nodes and
    headings that skipped levels before its theme and docs.js's heading levels."""
    context, page = open_page(chromium, bypass_csp=True)
    try:
        assert visit(page, parley.base + "/docs").status == 200
        page.get_by_text("/v1/contacts", exact=True).first.wait_for(state="attached", timeout=60_000)
        violations = axe_violations(page)
    finally:
        context.close()
    assert not violations, "axe-core violations:\n" + report({"/docs": violations})
