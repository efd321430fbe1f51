"""Sign in, sign out, and the home page redirect."""
import re

from handlers.ui_base import UiHandler, session_key
from services import accounts

WRONG_LOGIN = "Wrong email or password."
HOME = "/inbox"  # where sign-in leads unless a page asked for sign-in
# Sign-in attempts per email and client address, and per client address whatever the email (so that
# trying many emails is limited too): a burst of this many, then one every 60/N seconds.
LOGIN_ATTEMPTS_PER_MINUTE = 10
LOGIN_ATTEMPTS_PER_ADDRESS_PER_MINUTE = 30


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
        limiter, address = self.services.limiter, self.request.remote_ip
        allowed, headers = await limiter.hit_shared(f"login-address:{address}", LOGIN_ATTEMPTS_PER_ADDRESS_PER_MINUTE)
        if allowed:
            allowed, headers = await limiter.hit_shared(f"login:{email}|{address}", LOGIN_ATTEMPTS_PER_MINUTE)
        if not allowed:
            self.set_header("Retry-After", headers["Retry-After"])
            self.render("login.html", status=429, email=email, next_url=next_url, flashes=[{
                "kind": "error",
                "text": f"Too many sign-in attempts. Try again in {headers['Retry-After']} seconds."}])
            return
        user = await accounts.get_user_for_login(self.services.db, email) if email else None
        if not await accounts.verify_password(password, user and user["password_hash"], self.services.db,
                                              user and user["id"]):
            self.render("login.html", status=401, email=email, next_url=next_url,
                        flashes=[{"kind": "error", "text": WRONG_LOGIN}])
            return
        await self.start_session(user)
        self.redirect(next_url, status=303)


class LogoutHandler(UiHandler):
    role = "agent"

    async def post(self):
        if self.current_user:  # this session's open pages stop updating (the user's other sessions go on)
            self.services.hub.disconnect(None, session=session_key(self))  # a sub-account's viewed from it too
        await self.end_session()
        self.flash("success", "You are signed out.")
        self.redirect("/login", status=303)
