"""The Audit page: who changed settings, keys, users, credits or erased a contact (owners and admins)."""
from tornado.web import authenticated

from handlers.ui_base import UiHandler
from services import audit


class AuditHandler(UiHandler):
    role = "admin"

    @authenticated
    async def get(self):
        entries = await audit.list_audit(self.services.db, self.account_id,
                                         cursor=self.get_query_argument("cursor", None))
        self.render("audit.html", entries=entries)
