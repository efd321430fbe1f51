"""The admin UI's base: UiHandler (session cookie, XSRF, roles, view-as) and the session helpers the live
WebSocket shares; handlers/base.py has what the API and the UI share."""
import functools
import json
import re
from http import HTTPStatus

import tornado.web
from markupsafe import Markup
from tornado import httputil

from common.errors import DomainError, Forbidden
from common.validation import no_control_characters, nul_refused
from common.version import VERSION
from common.redact import masked_uri
from handlers.base import BaseHandler, NotFoundHandler, log
from services import audit, inbox, sessions, subaccounts, users

def _session_id(handler):
    value = handler.get_signed_cookie(UiHandler.SESSION_COOKIE, max_age_days=sessions.SESSION_DAYS)
    return value.decode() if value else None


def session_key(handler, user=None):
    """What the sessions store knows the request's UI session by (None without a session cookie): the live
    events hub closes a session's pages by it. For ``user`` viewing a sub-account, the view-as session."""
    if user is not None and user.get("viewer"):
        return sessions.session_hash(view_as_id(handler))
    return sessions.session_hash(_session_id(handler))


def view_as_id(handler):
    value = handler.get_signed_cookie(UiHandler.VIEW_AS_COOKIE, max_age_days=sessions.SESSION_DAYS)
    return value.decode() if value else None


async def session_user(handler):
    """The signed-in UI user {id, account_id, email, account_type, ...} of a request's session cookie, or None.
    While an agency user views a sub-account (the view-as cookie, beside the live session it was started from),
    the agency user in the sub-account with at most their role and never above admin, "viewer" and "label"
    (services.sessions.view_as_user). UI pages and the live-events WebSocket both authenticate through this
    one function."""
    db = handler.application.services.db
    session_id = _session_id(handler)
    user = await sessions.user_for(db, session_id)
    viewing = view_as_id(handler) if user else None
    if viewing:
        viewed = await sessions.view_as_user(db, viewing, session_id)
        if viewed is not None:
            return viewed
    return user


# Form fields of text for people (newlines and tabs kept), secrets, and the sign-in's next (safe_next cleans
# it), one-a-line lists whose lines are checked each (the widget's allowedOrigins); every other field of every UI
# form is identifier-like: names, ids, emails, keywords, URLs.
_FREE_TEXT_FIELDS = re.compile(r"body|greeting|fallback|description|provider-systemPrompt|rules-\d+-answer|next"
                               r"|allowedOrigins|comment"
                               r"|.*password.*")


def refuse_control_characters_in_form(arguments):
    """Invalid naming the first identifier-like form field with a control character: before the handler
    runs, so that nothing is saved (the API's models refuse the same, common/validation.py)."""
    for name, values in arguments.items():
        free_text = _FREE_TEXT_FIELDS.fullmatch(name)
        for value in values:
            if not free_text:
                no_control_characters(value.decode("utf-8", "replace"), name)
            elif b"\x00" in value and "password" not in name:
                # free text keeps newlines and tabs, not U+0000 (PostgreSQL cannot store it); a password is hashed
                raise nul_refused(name, field=name)


@functools.cache
def _ui_route_roles():
    """(compiled pattern, the least role) of every UI route, from the URL table (imported late: it imports us)."""
    from handlers import routes
    return [(re.compile(pattern + "$"), handler.role or "owner") for pattern, handler, *_ in routes()
            if isinstance(handler, type) and issubclass(handler, UiHandler)]


def may_open(user, path):
    """Whether this user's role may use the UI route of path (query ignored): the pages offer only those
    (issue 43 §4: no button, link or form that ends on the 403 page). Not a UI route: True."""
    path = path.split("?", 1)[0]
    for pattern, role in _ui_route_roles():
        if pattern.match(path):
            return bool(user) and users.allows(user.get("role"), role)
    return True


class UiHandler(BaseHandler):
    """Admin web UI page: cookie session, XSRF on every form, Jinja2 rendering, HTML error pages.

    The session lives in the database (services/sessions.py), so that sign-out and a new API key or
    password end it; the cookie carries its random id (signed by Tornado with the application's cookie
    secret as well). prepare() loads the user, because get_current_user cannot await storage.
    """

    # The least role a signed-in user needs for this page (services.users.ROLES): "agent" (inbox, contacts,
    # lists), "admin" (settings-like pages), "owner" (API keys, owners). Every UI route declares one
    # (tests/test_roles.py walks the route table); prepare() refuses the others with a 403 page.
    role = None
    html_errors = True  # its error answers are pages, a 431 written before any handler too (raw_error_response)
    # False for a page about the signed-in person themselves (their password): not for an agency user viewing a
    # sub-account, who is not that account's user.
    while_viewing_as = True
    # A fragment that live pages fetch when an event arrives (GET): logged at DEBUG, not a line per event at
    # INFO; it renders no navigation, so its counts are not read.
    live_fragment = False
    SESSION_COOKIE = "parley_session"
    VIEW_AS_COOKIE = "parley_view_as"  # an agency viewing a sub-account (handlers/ui/agency.py)
    FLASH_COOKIE = "parley_flash"
    MAX_FORM_BYTES = 65536
    COOKIE_FLAGS = {"httponly": True, "secure": True, "samesite": "Lax"}
    CSP = "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    def set_default_headers(self):
        super().set_default_headers()
        self.set_header("Content-Security-Policy", self.CSP)
        self.set_header("X-Frame-Options", "DENY")
        self.set_header("Referrer-Policy", "same-origin")
        # Pages can show an API key or a signing secret: never keep them in a cache.
        self.set_header("Cache-Control", "no-store")

    def max_body_bytes(self):
        return self.MAX_FORM_BYTES

    def check_xsrf_cookie(self):
        # BaseHandler turns the check off for the key-authenticated API; a browser session needs it. The
        # token is a form field, so the check waits for the body: Tornado asks before prepare(), with the
        # body still unread, and body_received() asks again.
        if self._body_done:
            tornado.web.RequestHandler.check_xsrf_cookie(self)

    async def body_received(self):
        """The form fields (Tornado parses them only for bodies it buffers itself), then the XSRF check."""
        await super().body_received()
        content_type = self.request.headers.get("Content-Type", "")
        try:
            httputil.parse_body_arguments(content_type, bytes(self.request.body), self.request.body_arguments,
                                          self.request.files, self.request.headers)
        except httputil.HTTPInputError as exc:
            raise tornado.web.HTTPError(400, "the form cannot be read: %s", exc) from None
        for name, values in self.request.body_arguments.items():
            self.request.arguments.setdefault(name, []).extend(values)
        self.check_xsrf_cookie()
        refuse_control_characters_in_form(self.request.body_arguments)

    def get_login_url(self):
        return "/login"

    def get_current_user(self):
        return None  # prepare() sets current_user from the session cookie

    async def start_session(self, user, memberships=()):
        """Sign this browser in as ``user`` (memberships: every account the sign-in proved, for the switcher)."""
        self.session_id = await sessions.start(self.services.db, user, memberships=memberships)
        self.set_signed_cookie(self.SESSION_COOKIE, self.session_id, expires_days=sessions.SESSION_DAYS,
                               **self.COOKIE_FLAGS)

    async def end_session(self):
        await sessions.end(self.services.db, self.session_id)
        self.session_id = None
        self.clear_cookie(self.SESSION_COOKIE, **self.COOKIE_FLAGS)

    async def over_a_limit(self, *limits):
        """Counts this request against each (key, per minute) limit in turn (services/ratelimit.py, shared by every
        process); at the first one over it, sets Retry-After and returns its seconds for the page to say. None:
        within every limit."""
        for key, per_minute in limits:
            allowed, headers = await self.services.limiter.hit_shared(key, per_minute)
            if not allowed:
                self.set_header("Retry-After", headers["Retry-After"])
                return headers["Retry-After"]
        return None

    def flash(self, kind, text):
        """A message for the next page this browser loads (after a redirect): kind is "success" or "error"."""
        self.set_signed_cookie(self.FLASH_COOKIE, json.dumps([kind, text]), expires_days=None, **self.COOKIE_FLAGS)

    def flash_saved(self, done, warnings=()):
        """The success message of a settings form, with the save's warnings (a host that does not resolve now)."""
        self.flash("success", " ".join([done, *(f"Note: {w}." for w in warnings)]))

    def pop_flashes(self):
        value = self.get_signed_cookie(self.FLASH_COOKIE, max_age_days=1)
        if value is None:
            return []
        self.clear_cookie(self.FLASH_COOKIE, **self.COOKIE_FLAGS)
        try:
            kind, text = json.loads(value)
        except (ValueError, TypeError):
            return []
        return [{"kind": kind, "text": text}]

    def page_flashes(self):
        """The message left for this page; a live fragment leaves it for the page the browser is going to (the
        page being left may refresh a part of itself between a form's redirect and the next page)."""
        return [] if self.live_fragment else self.pop_flashes()

    async def prepare(self):
        settings = self.application.settings_obj
        if settings.behind_proxy and self.request.protocol != "https":
            if self.request.method in ("GET", "HEAD"):
                self.redirect(settings.base_url + self.request.uri, permanent=True)
                return
            raise Forbidden("HTTPS is required", code="HTTPS_REQUIRED")
        self.refuse_oversized_body()
        self.session_id = _session_id(self)
        self.current_user = await session_user(self)
        if self.current_user and not users.allows(self.current_user.get("role"), self.role or "owner"):
            raise Forbidden(f"Your role ({self.current_user.get('role')}) cannot use this page. Ask an owner or "
                            f"an admin of the account.", code="ROLE_FORBIDDEN")
        if self.current_user and self.current_user.get("viewer") and not self.while_viewing_as:
            raise Forbidden(f"You are viewing {self.current_user['account_name']} as "
                            f"{self.current_user['viewer']['account_name']}: this page is for your own account. "
                            f"Go back to the agency first.", code="ROLE_FORBIDDEN")
        # Every page's navigation shows these (issue 25 §3, §5): the handoffs waiting, a sub-account's credits.
        self.nav_counts = self.credits = None
        if self.current_user and self.request.method == "GET" and not self.live_fragment:
            self.nav_counts = await inbox.nav_counts(self.services.db, self.account_id)
            if self.current_user.get("account_type") == "subaccount" and users.allows(self.current_user["role"],
                                                                                      "admin"):
                self.credits = await subaccounts.own_credits(self.services.db, self.account_id)
        self.reserve_body()

    @property
    def account_id(self):
        """The signed-in user's account: every page and action is scoped by it."""
        return self.current_user["account_id"]

    @property
    def actor(self):
        """Who a change is by, for the audit list: the signed-in user (an agency's, while viewing as)."""
        return audit.by_user(self.current_user)

    def wants_json(self):
        """A page's script made this request (fetch with Accept: application/json): it gets 204 or a JSON error
        rather than a redirect or an HTML page."""
        return "application/json" in self.request.headers.get("Accept", "")

    def action_done(self, next_url, message=None):
        """Answer a form action: 204 to a page's script (the live events show the result), else a redirect back
        with the message."""
        if self.wants_json():
            self.set_status(204)
            self.finish()
            return
        if message:
            self.flash("success", message)
        self.redirect(next_url, status=303)

    def render(self, template_name, status=200, flashes=None, **context):
        """Render templates/<template_name> with Jinja2 (autoescaped) and finish the response."""
        template = self.application.jinja.get_template(template_name)
        html = template.render(
            user=self.current_user, request_id=self.request_id, xsrf_form_html=Markup(self.xsrf_form_html()),
            path=self.request.path, uri=self.request.uri, nav_counts=getattr(self, "nav_counts", None),
            may=functools.partial(may_open, self.current_user),
            own_credits=getattr(self, "credits", None),
            static_url=self.static_url, flashes=self.page_flashes() + list(flashes or []), parley_version=VERSION,
            **context)
        self.set_status(status)
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.finish(html)

    def write_error(self, status_code, **kwargs):
        if self.wants_json():
            super().write_error(status_code, **kwargs)
            return
        exc = kwargs.get("exc_info", (None, None, None))[1]
        status_code, _, message = self.describe_error(status_code, exc)
        if status_code >= 500 and not isinstance(exc, DomainError):
            message = "Something went wrong on our side."
        elif isinstance(exc, tornado.web.HTTPError) and status_code == 403 and "xsrf" in message.lower():
            message = "This form expired or did not come from this site. Reload the page and try again."
        try:
            self.render("error.html", status=status_code, title=HTTPStatus(status_code).phrase, message=message)
        except Exception:
            log.exception("error page failed to render rid=%s", self.request_id)
            self.set_header("Content-Type", "text/plain; charset=UTF-8")
            self.finish(f"{status_code} {message} (request id {self.request_id})")


class NotFoundPage(UiHandler):
    """Every unknown path (the application's default handler). A browser loading a mistyped address of the app
    (Accept: text/html, outside /v1/) gets the error page, with the navigation when signed in; anything else,
    the API's paths above all, the JSON 404 of NotFoundHandler."""

    role = "agent"  # whoever is signed in sees the page
    html_errors = False  # a 431 (headers never read, Accept neither): the API's JSON, as before this page

    def for_a_browser(self):
        return not self.request.path.startswith("/v1/") and "text/html" in self.request.headers.get("Accept", "")

    async def prepare(self):
        if not self.for_a_browser():
            NotFoundHandler.prepare(self)
        await super().prepare()  # the session, for the navigation
        raise tornado.web.HTTPError(404, "There is no page at %s.", masked_uri(self.request.path))

    def write_error(self, status_code, **kwargs):
        if self.for_a_browser():
            super().write_error(status_code, **kwargs)
        else:
            BaseHandler.write_error(self, status_code, **kwargs)
