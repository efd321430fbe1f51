"""Plain helpers of the UI tests: the in-process form client, and the real Chromium's page and sign-in (no
fixtures here: tests/ui_fixtures.py holds those)."""
import os
import re
import time
from pathlib import Path
from http.cookies import SimpleCookie
from urllib.parse import urlencode

PASSWORD = "correct horse battery staple"
CHROMIUM = os.environ.get("PARLEY_CHROMIUM", "/usr/bin/chromium")  # make test CHROMIUM=… sets it
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


# ---- in-process: a tiny browser (cookies + XSRF field) over the test server -------------------

class FormClient:
    """Keeps cookies like a browser (the Secure flag is ignored: the in-process server is plain HTTP)
    and adds the _xsrf field to forms unless told not to."""

    def __init__(self, client):
        self.client = client
        self.cookies = {}
        self.set_cookies = {}  # name -> the last Set-Cookie morsel, to check its attributes

    async def request(self, method, path, form=None, *, xsrf=True, headers=None):
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if method == "POST":
            form = dict(form or {})
            if xsrf:
                form["_xsrf"] = self.cookies["_xsrf"]
            body = urlencode(form, doseq=True)  # a list value: the field repeated (checkboxes)
        response = await self.client.fetch(path, method=method, body=body, headers=headers,
                                           follow_redirects=False, raise_error=False)
        for header in response.headers.get_list("Set-Cookie"):
            jar = SimpleCookie()
            jar.load(header)
            for name, morsel in jar.items():
                self.set_cookies[name] = morsel
                if morsel.value:
                    self.cookies[name] = morsel.value
                else:
                    self.cookies.pop(name, None)
        response.text = response.body.decode()
        return response

    async def get(self, path, **kw):
        return await self.request("GET", path, **kw)

    async def post(self, path, form=None, **kw):
        return await self.request("POST", path, form, **kw)

    async def login(self, email, password=PASSWORD, next_url=None):
        await self.get("/login")
        form = {"email": email, "password": password}
        if next_url is not None:
            form["next"] = next_url
        return await self.post("/login", form)


def signed_in_client(io_loop, http_server_client, email, client_class=FormClient):
    """A form client (a FormClient or a subclass) signed in as email's user: the body of a fixture."""
    client = client_class(http_server_client)
    response = io_loop.run_sync(lambda: client.login(email))
    assert response.code == 303, response.text
    return client


def open_page(chromium, **context_options):
    """(context, page): a page of its own browser context that collects console errors (a CSP violation or
    a missing resource shows up there) in page.console_errors."""
    context = chromium.new_context(ignore_https_errors=True, **context_options)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    return context, page


def sign_in(page, parley, password=None):
    page.goto(parley.base + "/login")
    page.fill("#email", parley.first_run["login"])
    page.fill("#password", password or parley.first_run["password"])
    page.click("button:has-text('Sign in')")


def wait_until(page, expression, timeout=15):
    """Poll a JavaScript expression until it is true (page.wait_for_function evaluates its predicate with
    eval, which the pages' CSP forbids, and the CSP stays on in these tests)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {expression}")
        time.sleep(0.02)


# ---- axe-core (tests/axe/, never served) ---------------------------------------------------------

AXE = Path(__file__).resolve().parent / "axe" / "axe.min.js"  # axe-core 4.11.4 (MPL-2.0: tests/axe/LICENSE)
BLOCKING = ("serious", "critical")
ALSO_CHECKED = ("heading-order",)


def axe_violations(page):
    """The serious and critical violations of the page as shown now, and any heading out of order (a moderate
    rule, but the one /docs broke): [(rule, impact, help, {what failed: [targets]})]."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    results = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    found = []
    for violation in results["violations"]:
        if violation["impact"] in BLOCKING or violation["id"] in ALSO_CHECKED:
            nodes = {}
            for node in violation["nodes"]:
                why = " ".join(node.get("failureSummary", "").split())
                nodes.setdefault(why, []).append(" ".join(map(str, node["target"])))
            found.append((violation["id"], violation["impact"], violation["help"], nodes))
    return found


def report(found):
    """Each violation's failures, with the count and the first three elements of each."""
    return "\n".join(f"{name}: {rule} ({impact}) {help_}" + "".join(
        f"\n    {len(targets)} × {why}\n        " + "\n        ".join(targets[:3])
        for why, targets in nodes.items()) for name, violations in found.items()
        for rule, impact, help_, nodes in violations)


def link_ids(html, prefix):
    """The conversation ids a page links to (prefix "ct")."""
    return re.findall(r'href="/inbox/(ct_[0-9a-z]+)"', html) if prefix == "ct" else []


def mark_no_reload(page):
    """Mark the page (window.__noReload): assert_not_reloaded() fails if it reloaded since."""
    page.evaluate("window.__noReload = true")


def assert_not_reloaded(page):
    assert page.evaluate("window.__noReload === true"), "the page reloaded"


def sign_in_with(page, server, email):
    """Sign in on the login page as a user of the server (password ui_helpers.PASSWORD)."""
    page.goto(server.base + "/login")
    page.fill("#email", email)
    page.fill("#password", PASSWORD)
    page.click("button:has-text('Sign in')")


def field_error(html, field):
    """The text of the error shown next to a form field, or None."""
    found = re.search(rf'<p class="form-error" id="{field}-error" role="alert">(.*?)</p>', html, re.S)
    return found and found.group(1)


def unescape(text):
    """Text as the page shows it, from its escaped HTML."""
    return text.replace("&#34;", '"').replace("&#39;", "'").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
