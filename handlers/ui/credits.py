"""A sub-account's Credits page: its balance, auto-recharge and credit history (issue 25 §5). Other accounts
have no such page (404). The balance in the navigation and the low-credit banner are on every page
(UiHandler.prepare loads them)."""
from tornado.web import authenticated

from handlers.ui_base import UiHandler
from services import subaccounts
from common.errors import NotFound


class CreditsHandler(UiHandler):
    role = "admin"

    @authenticated
    async def get(self):
        if self.credits is None:
            raise NotFound("no such page")
        history = await subaccounts.own_transactions(self.services.db, self.account_id,
                                                     cursor=self.get_query_argument("cursor", None))
        self.render("credits.html", sub=self.credits, history=history)
