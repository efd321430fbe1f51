"""Sign in, sign out, and the home page redirect."""
import asyncio
from urllib.parse import urlsplit

from handlers.base import UiHandler
from services import accounts, keys

WRONG_LOGIN = "Wrong email or password."
HOME = "/inbox"  # where sign-in leads unless a page asked for sign-in
# Per email and client address: a burst of this many attempts, then one every 60/N seconds.
LOGIN_ATTEMPTS_PER_MINUTE = 10
_dummy_hash = None


async def check_password(password, stored_hash):
    """scrypt is CPU-heavy: verify in an executor. Unknown users are checked against a dummy hash so
    that the answer takes as long as for a known one (no probing which emails exist)."""
    global _dummy_hash
    loop = asyncio.get_running_loop()
    if stored_hash is None:
        if _dummy_hash is None:
            _dummy_hash = await loop.run_in_executor(None, keys.hash_password, "no such user")
        await loop.run_in_executor(None, keys.verify_password, password, _dummy_hash)
        return False
    return await loop.run_in_executor(None, keys.verify_password, password, stored_hash)


def safe_next(url):
    """Only a path on this site may follow sign-in (no open redirect to //evil.example)."""
    if not url or not url.startswith("/") or url.startswith("//") or "\\" in url:
        return HOME
    parts = urlsplit(url)
    return url if not parts.scheme and not parts.netloc else HOME


class HomeHandler(UiHandler):
    def get(self):
        self.redirect(HOME)


class LoginHandler(UiHandler):
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
        allowed, headers = self.services.limiter.hit(f"login:{email}|{self.request.remote_ip}",
                                                     LOGIN_ATTEMPTS_PER_MINUTE)
        if not allowed:
            self.set_header("Retry-After", headers["Retry-After"])
            self.render("login.html", status=429, email=email, next_url=next_url, flashes=[{
                "kind": "error",
                "text": f"Too many sign-in attempts. Try again in {headers['Retry-After']} seconds."}])
            return
        user = await accounts.get_user_for_login(self.services.db, email) if email else None
        if not await check_password(password, user and user["password_hash"]):
            self.render("login.html", status=401, email=email, next_url=next_url,
                        flashes=[{"kind": "error", "text": WRONG_LOGIN}])
            return
        self.start_session(user["id"])
        self.redirect(next_url, status=303)


class LogoutHandler(UiHandler):
    def post(self):
        if self.current_user:
            self.services.hub.disconnect_user(self.current_user["id"])  # its open pages stop updating
        self.end_session()
        self.flash("success", "You are signed out.")
        self.redirect("/login", status=303)
