"""Canned replies pages: the account's saved replies (create), one reply's edit form (save, delete), and the
thread's /code picker source: every reply rendered for the thread's contact, as JSON for static/canned.js."""
import json

from tornado.web import authenticated

from common.errors import Conflict, Invalid
from handlers.ui_base import UiHandler
from services import canned_replies


class CannedReplyForm(UiHandler):
    """The New and Edit forms: the same fields, saved, or shown again with the error by its field."""
    role = "agent"

    async def save(self, write, show_error):
        form = {"code": self.get_body_argument("code", "").strip(), "body": self.get_body_argument("body", "")}
        try:
            await write(self.services.db, self.account_id, **form, by=self.actor)
        except (Invalid, Conflict) as exc:
            await show_error(exc, form)
            return
        self.action_done("/canned-replies", f"Canned reply /{form['code']} saved.")


class CannedRepliesHandler(CannedReplyForm):
    """GET /canned-replies: the list and the New form; POST: create (code, body)."""

    @authenticated
    async def get(self):
        await self.render_page()

    async def render_page(self, error=None, form=None):
        replies = await canned_replies.list_all(self.services.db, self.account_id)
        self.render("canned_replies.html", status=error.status if error else 200, replies=replies["data"],
                    error=error, form=form or {"code": "", "body": ""})

    @authenticated
    async def post(self):
        await self.save(canned_replies.create, self.render_page)


class CannedReplyHandler(CannedReplyForm):
    """GET /canned-replies/{id}: the edit form; POST: save it."""

    @authenticated
    async def get(self, reply_id):
        reply = await canned_replies.get(self.services.db, self.account_id, reply_id)
        self.render("canned_reply.html", reply=reply, form=reply, error=None)

    @authenticated
    async def post(self, reply_id):
        reply = await canned_replies.get(self.services.db, self.account_id, reply_id)  # 404 page unless the account's

        async def update(db, account_id, **form):
            await canned_replies.update(db, account_id, reply_id, **form)  # form: code, body and by

        async def show_error(error, form):
            self.render("canned_reply.html", status=error.status, reply=reply, form=form, error=error)
        await self.save(update, show_error)


class CannedReplyDeleteHandler(UiHandler):
    """POST /canned-replies/{id}/delete."""
    role = "agent"

    @authenticated
    async def post(self, reply_id):
        reply = await canned_replies.get(self.services.db, self.account_id, reply_id)
        await canned_replies.delete(self.services.db, self.account_id, reply_id, by=self.actor)
        self.action_done("/canned-replies", f"Canned reply /{reply['code']} deleted.")


class ThreadCannedRepliesHandler(UiHandler):
    """GET /inbox/{contactId}/canned-replies: {items: [{id, code, body}]}, each body rendered for this contact."""
    role = "agent"

    @authenticated
    async def get(self, contact_id):
        items = await canned_replies.rendered_for_contact(self.services.db, self.account_id, contact_id)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps({"items": items}))
