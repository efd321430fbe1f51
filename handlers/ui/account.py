"""Your account (/account): every user's own page (name, email, role, password). Agents have no Settings page, so
their name, sign-in email and password forms are here."""
from tornado.web import authenticated

from handlers.ui.session import safe_next
from handlers.ui_base import UiHandler
from services import accounts, assignment, users


def render_account(handler, status=200, error=None, profile_form=None):
    handler.render("account.html", status=status, password_min=accounts.MIN_PASSWORD,
                   password_max=accounts.MAX_PASSWORD, profile_form=profile_form or {},
                   flashes=[{"kind": "error", "text": error}] if error else [])


class AccountHandler(UiHandler):
    role = "agent"

    @authenticated
    def get(self):
        render_account(self)


class AvailabilityHandler(UiHandler):
    """POST /availability: the user's own away switch in the page header (automatic assignment gives an away user
    nothing; services/assignment.py). Back to the page it was pressed on."""
    role = "agent"

    @authenticated
    async def post(self):
        await users.set_own_availability(self.services.db, self.current_user,
                                         self.get_body_argument("available", "") == "1", by=self.actor)
        assignment.wake(self.services)  # back: conversations waiting may go to them now
        self.redirect(safe_next(self.get_body_argument("next", "")), status=303)
