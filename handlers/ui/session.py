"""Sign in, sign out, the account chooser (one person may be a user of several accounts), and the home page
redirect."""
import re
from urllib.parse import urlencode

from tornado.web import authenticated

from common.errors import NotFound
from handlers.ui_base import UiHandler, session_key
from services import accounts, forgot_password, sessions

WRONG_LOGIN = "Wrong email or password."
HOME = "/inbox"  # where sign-in leads unless a page asked for sign-in
# Sign-in attempts per email and client address, and per client address whatever the email (so that
# trying many emails is limited too): a burst of this many, then one every 60/N seconds.
LOGIN_ATTEMPTS_PER_MINUTE = 10
LOGIN_ATTEMPTS_PER_ADDRESS_PER_MINUTE = 30
# "Forgot password?" requests per email (each one mails every membership of it a new link) and per client address.
RESETS_PER_EMAIL_PER_MINUTE = 3
RESETS_PER_ADDRESS_PER_MINUTE = 10
RESET_SENT = ("If that email signs in to Parley, a link to choose a new password is on its way to it. The link works "
              "once, for 24 hours. No mail? Ask your account's owner or admin.")


# A path on this site in plain printable ASCII: no scheme, no "//host", no backslash, no whitespace or
# control character (a browser may read "/\v/evil" as "//evil", and Location cannot carry it anyway).
_SAFE_NEXT = re.compile(r"/(?![/\\])[!#-\[\]-~]*")


def safe_next(url):
    """Only a path on this site may follow sign-in (no open redirect to //evil.example)."""
    return url if url and _SAFE_NEXT.fullmatch(url) else HOME


class HomeHandler(UiHandler):
    role = "agent"

    def get(self):
        self.redirect(HOME)


class LoginHandler(UiHandler):
    role = "agent"

    def get(self):
        next_url = safe_next(self.get_query_argument("next", ""))
        if self.current_user:
            self.redirect(next_url)
            return
        self.render("login.html", email="", next_url=next_url)

    async def post(self):
        email = self.get_body_argument("email", "").strip().lower()
        password = self.get_body_argument("password", "")
        next_url = safe_next(self.get_body_argument("next", ""))
        address = self.request.remote_ip
        retry_after = await self.over_a_limit((f"login-address:{address}", LOGIN_ATTEMPTS_PER_ADDRESS_PER_MINUTE),
                                              (f"login:{email}|{address}", LOGIN_ATTEMPTS_PER_MINUTE))
        if retry_after is not None:
            self.render("login.html", status=429, email=email, next_url=next_url, flashes=[{
                "kind": "error", "text": f"Too many sign-in attempts. Try again in {retry_after} seconds."}])
            return
        memberships = await accounts.sign_in(self.services.db, email, password) if email else []
        if not memberships:
            self.render("login.html", status=401, email=email, next_url=next_url,
                        flashes=[{"kind": "error", "text": WRONG_LOGIN}])
            return
        # Several accounts: the session starts in the first, and the person chooses where to go.
        await self.start_session(memberships[0], memberships)
        if len(memberships) > 1:
            self.redirect("/accounts?" + urlencode({"next": next_url}), status=303)
            return
        self.redirect(next_url, status=303)


class ForgotPasswordHandler(UiHandler):
    """/forgot-password: an email in, a one-time reset link out by mail (services/forgot_password.py), the same
    answer whether or not the email is a user's (the work happens after the answer); limited per email and client."""
    role = "agent"

    def get(self):
        self.render("forgot_password.html", email="")

    async def post(self):
        email = self.get_body_argument("email", "").strip().lower()
        address = self.request.remote_ip
        retry_after = await self.over_a_limit((f"reset-address:{address}", RESETS_PER_ADDRESS_PER_MINUTE),
                                              (f"reset:{email}", RESETS_PER_EMAIL_PER_MINUTE))
        if retry_after is not None:
            self.render("forgot_password.html", status=429, email=email, flashes=[{
                "kind": "error", "text": f"Too many requests. Try again in {retry_after} seconds."}])
            return
        if email:
            forgot_password.start(self.services, self.application.settings_obj.base_url, email)
        self.render("forgot_password.html", email="", flashes=[{"kind": "success", "text": RESET_SENT}])


class LogoutHandler(UiHandler):
    role = "agent"

    async def post(self):
        if self.current_user:  # this session's open pages stop updating (the user's other sessions go on)
            self.services.hub.disconnect(None, session=session_key(self))  # a sub-account's viewed from it too
        await self.end_session()
        self.flash("success", "You are signed out.")
        self.redirect("/login", status=303)


class AccountsHandler(UiHandler):
    """/accounts: the accounts this sign-in may switch between (GET: the chooser, also after a sign-in that found
    several), and POST user=<their user id there>: switch. The session moves (a new cookie; the old session,
    its view-as sessions and open pages end) and the XSRF token is renewed, so that a form left open in
    another tab cannot act in the account just chosen."""
    role = "agent"
    while_viewing_as = False  # the person's own session: back to the agency first

    @authenticated
    async def get(self):
        choices = await sessions.accounts(self.services.db, self.session_id)
        self.render("accounts.html", choices=choices, next_url=safe_next(self.get_query_argument("next", "")))

    @authenticated
    async def post(self):
        old_key = session_key(self)
        new_id = await sessions.switch(self.services.db, self.session_id, self.get_body_argument("user", ""))
        if new_id is None:
            raise NotFound("That account is not one this sign-in may open. Sign in again.", field="user")
        self.services.hub.disconnect(None, session=old_key)
        self.session_id = new_id
        self.set_signed_cookie(self.SESSION_COOKIE, new_id, expires_days=sessions.SESSION_DAYS, **self.COOKIE_FLAGS)
        self.clear_cookie(self.VIEW_AS_COOKIE, **self.COOKIE_FLAGS)
        self.clear_cookie("_xsrf", **self.COOKIE_FLAGS)
        self.redirect(safe_next(self.get_body_argument("next", "")), status=303)
