"""/setup/<token> and /reset/<token>: a one-time link (services/one_time_links.py) asks for a password,
spends itself, ends the user's other sessions and signs this browser in. The setup link then shows the
account's API key once, on the Settings page."""
from handlers.ui.settings import SettingsPage
from services import accounts, audit, one_time_links, sessions
from common.errors import Invalid


class OneTimeLinkHandler(SettingsPage):
    role = "agent"

    async def get(self, purpose, token):
        link = await one_time_links.peek(self.services.db, token, purpose)
        self.render_form(purpose, link)

    def render_form(self, purpose, link, status=200, error=None):
        self.render("set_password.html", status=status, purpose=purpose, email=link["email"],
                    expires_at=link["expires_at"], password_min=accounts.MIN_PASSWORD,
                    password_max=accounts.MAX_PASSWORD, flashes=[{"kind": "error", "text": error}] if error else [])

    async def post(self, purpose, token):
        db = self.services.db
        password = self.get_body_argument("password", "")
        try:
            if password != self.get_body_argument("password_again", ""):
                raise Invalid("password and its repetition differ")
            user = await one_time_links.redeem(db, token, purpose, password, accounts.MIN_PASSWORD,
                                               accounts.MAX_PASSWORD)
        except Invalid as exc:
            link = await one_time_links.peek(db, token, purpose)
            self.render_form(purpose, link, status=400, error=exc.message[:1].upper() + exc.message[1:] + ".")
            return
        await self.start_session(user)
        # The user's ended sessions: their open pages reload and find themselves signed out.
        self.services.hub.disconnect(None, user=user["id"],
                                     keep_session=sessions.session_hash(self.session_id))
        self.current_user = user
        if purpose == "setup":
            # The key made with the account was never shown: a new one is, once, here.
            api_key = await accounts.rotate_key(db, self.services.keys, user["account_id"],
                                                keep_session=self.session_id, by=audit.by_user(user))
            await self.render_settings(new_api_key=api_key, notice="Your password is set. Copy your API key now: "
                                                                   "it is shown only this once.")
            return
        self.flash("success", "Welcome: your password is set." if purpose == "invite" else
                   "Your new password is set. Every other session of yours is signed out.")
        self.redirect("/inbox", status=303)
