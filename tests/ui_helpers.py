"""Plain helpers of the UI tests: the in-process form client, and the real Chromium's page and sign-in (no
fixtures here: tests/ui_fixtures.py holds those)."""
import os
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
