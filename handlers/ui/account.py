"""Your account (/account): every user's own page (name, email, role, password). Agents have no Settings page, so
their name, sign-in email and password forms are here."""
from tornado.web import authenticated

from handlers.ui_base import UiHandler
from services import accounts


def render_account(handler, status=200, error=None, profile_form=None):
    handler.render("account.html", status=status, password_min=accounts.MIN_PASSWORD,
                   password_max=accounts.MAX_PASSWORD, profile_form=profile_form or {},
                   flashes=[{"kind": "error", "text": error}] if error else [])


class AccountHandler(UiHandler):
    role = "agent"

    @authenticated
    def get(self):
        render_account(self)
