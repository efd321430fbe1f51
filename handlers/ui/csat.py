"""/csat/<token>: the one-question page a CSAT ask links to on channels other than the website chat (services/csat.py).
No sign-in: the unguessable token is the permission; the form carries the XSRF token, the page is Jinja-escaped.
A used or expired link answers 410 with a page that says which, an unknown one 404."""
from handlers.ui_base import UiHandler
from common.errors import Invalid
from services import csat


class CsatPageHandler(UiHandler):
    role = "agent"  # nobody signs in here; a signed-in user of any role may open it too

    async def get(self, token):
        self.render_form(await csat.page(self.services.db, token))

    def render_form(self, ask, status=200, error=None, form=None):
        self.render("csat.html", status=status, ask=ask, answered=False, form=form or {},
                    max_comment=csat.MAX_COMMENT, ratings=csat.RATINGS,
                    flashes=[{"kind": "error", "text": error}] if error else [])

    async def post(self, token):
        # The comment as sent: Tornado's get_body_argument drops control characters silently; they are refused here.
        raw = self.request.body_arguments.get("comment") or [b""]
        form = {"rating": self.get_body_argument("rating", ""), "comment": raw[0].decode("utf-8", "replace")}
        try:
            await csat.answer_page(self.services.db, token, csat.rating_of_form(form["rating"]), form["comment"])
        except Invalid as exc:
            self.render_form(await csat.page(self.services.db, token), status=400,
                             error=exc.message[:1].upper() + exc.message[1:] + ".", form=form)
            return
        self.render("csat.html", ask=None, answered=True, form={}, max_comment=csat.MAX_COMMENT, ratings=(),
                    flashes=[])
