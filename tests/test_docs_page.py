"""/docs (issue 22 §3): the OpenAPI document rendered for people by the vendored Redoc, served from /static
with its licence, no CDN, under the site's CSP (only the style and worker sources Redoc needs added)."""
import pytest

from tests.parley_process import ParleyProcess
from tests.ui_helpers import open_page


@pytest.fixture(scope="module")
def parley(tmp_path_factory):
    process = ParleyProcess(tmp_path_factory.mktemp("docs") / "data")
    try:
        yield process.start(timeout=120)  # a loaded machine: the server's first start writes its certificate
    finally:
        process.stop()


def test_docs_renders_the_routes_with_no_csp_violation_and_nothing_from_elsewhere(chromium, parley):
    context, page = open_page(chromium)
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    try:
        response = page.goto(parley.base + "/docs")
        csp = response.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "unsafe-eval" not in csp and "script-src" not in csp
        page.get_by_text("/v1/contacts", exact=True).first.wait_for(state="attached", timeout=60_000)
        assert page.locator("h1").first.inner_text()  # the document's title, rendered
        assert page.console_errors == []  # a CSP violation (or a missing file) would be one
        assert requests and all(url.startswith(parley.base) or url.startswith(("blob:", "data:")) for url in requests)
        # The footer of every page links to it; the renderer's licence is served beside it.
        page.goto(parley.base + "/login")
        assert page.get_attribute("footer a", "href") == "/docs"
        licence = page.request.get(parley.base + "/static/vendor/redoc/LICENSE")
        assert licence.ok and "MIT License" in licence.text()
    finally:
        context.close()


def test_docs_names_the_version_not_a_1_and_links_back_to_the_app(chromium, parley):
    """Issue 43 §13: the title said "Parley API (1)"; the page offered no way back."""
    from common.version import VERSION
    context, page = open_page(chromium)
    try:
        page.goto(parley.base + "/docs")
        page.get_by_text("/v1/contacts", exact=True).first.wait_for(state="attached", timeout=60_000)
        title = page.locator("h1").first.inner_text()
        assert "Parley API" in title and VERSION in title and "(1)" not in title, title
        page.click("#back-to-app")
        page.wait_for_url("**/login**")  # the app, which asks a visitor to sign in first
        assert page.get_attribute("#parley-version", "id") and VERSION in page.inner_text("#parley-version")
    finally:
        context.close()


def test_a_mistyped_address_shows_a_page_while_the_api_keeps_json(chromium, parley):
    """Issue 43 §13: /inboxx in a browser was raw JSON; an API client still gets the JSON error shape."""
    context, page = open_page(chromium)
    try:
        response = page.goto(parley.base + "/inboxx")
        assert response.status == 404 and response.headers["content-type"].startswith("text/html")
        assert page.inner_text("h1") == "Not Found"
        assert "There is no page at /inboxx." in page.inner_text("main")
        page.click("text=Back to the inbox")
        page.wait_for_url("**/login**")
        for path, accept in (("/inboxx", "application/json"), ("/inboxx", "*/*"), ("/v1/nope", "text/html")):
            answer = page.request.get(parley.base + path, headers={"Accept": accept})
            assert answer.status == 404 and answer.json()["error"]["code"] == "NOT_FOUND", (path, accept)
    finally:
        context.close()
