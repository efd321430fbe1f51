"""Agency pages: the sub-accounts with balance and auto-recharge, each one's credit history, grant, create,
set and clear auto-recharge. Agency users only (anyone else gets 404); the API's services do the work."""
from tornado.web import authenticated

from common.errors import Conflict, IdempotencyKeyReused, Invalid, NotFound
from common.ids import new_id
from handlers.ui_base import UiHandler, session_key, view_as_id
from services import credits, sessions, subaccounts


def new_grant_key():
    """The Idempotency-Key a grant form carries from the moment it is rendered: submitting the same form twice
    grants once (docs/design.md#api-decisions "Credits")."""
    return new_id("uigrant")


class AgencyPage(UiHandler):
    role = "admin"

    async def prepare(self):
        await super().prepare()
        if not self._finished and self.current_user and self.current_user.get("account_type") != "agency":
            raise NotFound("no such page")

    @property
    def agency_id(self):
        return self.current_user["account_id"]

    async def render_list(self, status=200, error=None, form=None):
        page = await subaccounts.list_subaccounts(self.services.db, self.agency_id, "agency",
                                                  cursor=self.get_query_argument("cursor", None))
        self.render("agency.html", status=status, page=page, form=form or {"name": "", "email": ""},
                    flashes=[{"kind": "error", "text": error}] if error else [])

    async def render_subaccount(self, sub_id, status=200, error=None, grant=None, recharge=None, price=None):
        db = self.services.db
        sub = await subaccounts.get_subaccount(db, self.agency_id, "agency", sub_id)
        history = await subaccounts.list_transactions(db, self.agency_id, "agency", sub_id,
                                                      cursor=self.get_query_argument("cursor", None))
        setting = sub["autoRecharge"] or {}
        self.render("subaccount.html", status=status, sub=sub, history=history,
                    grant=grant or {"amount": "", "description": "", "key": new_grant_key()},
                    recharge=recharge or {"threshold": setting.get("threshold", ""), "amount": setting.get("amount", "")},
                    price=sub["creditsPerReply"] if price is None else price,
                    flashes=[{"kind": "error", "text": error}] if error else [])

    def back_to(self, sub_id, kind, text):
        self.flash(kind, text)
        self.redirect(f"/agency/subaccounts/{sub_id}", status=303)


class AgencyHandler(AgencyPage):
    @authenticated
    async def get(self):
        await self.render_list()


class SubaccountCreateHandler(AgencyPage):
    """Create: the new sub-account's API key and UI password are shown once, on the answer to this POST."""

    @authenticated
    async def post(self):
        form = {"name": self.get_body_argument("name", ""), "email": self.get_body_argument("email", "")}
        try:
            created = await subaccounts.create_subaccount(self.services.db, self.services.box, self.services.keys,
                                                          self.agency_id, "agency", **form, by=self.actor)
        except (Invalid, Conflict) as exc:
            await self.render_list(status=exc.status, error=exc.message, form=form)
            return
        self.render("subaccount_created.html", sub=created)


class SubaccountPageHandler(AgencyPage):
    @authenticated
    async def get(self, sub_id):
        await self.render_subaccount(sub_id)


class SubaccountGrantHandler(AgencyPage):
    @authenticated
    async def post(self, sub_id):
        sub = await subaccounts.get_subaccount(self.services.db, self.agency_id, "agency", sub_id)
        form = {"amount": self.get_body_argument("amount", ""), "description": self.get_body_argument("description", ""),
                "key": self.get_body_argument("idempotency_key", "")}
        try:
            result, replayed = await credits.grant_credits(
                self.services.db, self.agency_id, "agency", email=sub["email"],
                amount=credits.number_from_text(form["amount"]), description=form["description"],
                idempotency_key=form["key"] or None, by=self.actor)
        except IdempotencyKeyReused:
            await self.render_subaccount(sub_id, status=422, error="This form was already used for another grant; "
                                                                   "nothing was granted. Enter the grant again.")
            return
        except Invalid as exc:
            await self.render_subaccount(sub_id, status=400, error=exc.message, grant=form)
            return
        if replayed:
            self.back_to(sub_id, "success", f"This grant was already made (the form was sent twice); nothing more "
                                            f"was granted. Balance: {result['new_balance']} credits.")
        else:
            self.back_to(sub_id, "success", f"Granted {result['credits_added']} credits. "
                                            f"Balance: {result['new_balance']} credits.")


class SubaccountAutoRechargeHandler(AgencyPage):
    @authenticated
    async def post(self, sub_id):
        form = {"threshold": self.get_body_argument("threshold", ""), "amount": self.get_body_argument("amount", "")}
        try:
            setting = {"threshold": credits.number_from_text(form["threshold"], "autoRecharge.threshold"),
                       "amount": credits.number_from_text(form["amount"], "autoRecharge.amount")}
            await subaccounts.set_auto_recharge(self.services.db, self.agency_id, "agency", sub_id, setting,
                                                by=self.actor)
        except Invalid as exc:
            await self.render_subaccount(sub_id, status=400, error=exc.message, recharge=form)
            return
        self.back_to(sub_id, "success", "Auto-recharge saved.")


class SubaccountAutoRechargeOffHandler(AgencyPage):
    @authenticated
    async def post(self, sub_id):
        await subaccounts.set_auto_recharge(self.services.db, self.agency_id, "agency", sub_id, None, by=self.actor)
        self.back_to(sub_id, "success", "Auto-recharge is off.")


class SubaccountPriceHandler(AgencyPage):
    """The sub-account's price per bot reply: the agency's to set (the sub-account's own settings cannot)."""

    @authenticated
    async def post(self, sub_id):
        text = self.get_body_argument("creditsPerReply", "")
        try:
            price = credits.number_from_text(text, "creditsPerReply")
            await subaccounts.update_subaccount(self.services.db, self.agency_id, "agency", sub_id,
                                                {"creditsPerReply": price}, by=self.actor)
        except Invalid as exc:
            await self.render_subaccount(sub_id, status=400, error=exc.message, price=text)
            return
        self.back_to(sub_id, "success", f"Price saved: {price.normalize():f} credits per bot reply.")


class SubaccountResetPasswordHandler(AgencyPage):
    """The sub-account's one-time sign-in link, shown to the agency once, on the answer to this POST."""
    role = "owner"

    @authenticated
    async def post(self, sub_id):
        link = await subaccounts.reset_password_link(self.services.db, self.application.settings_obj.base_url,
                                                     self.agency_id, "agency", sub_id)
        sub = await subaccounts.get_subaccount(self.services.db, self.agency_id, "agency", sub_id)
        self.render("subaccount_reset.html", sub=sub, link=link)


class SubaccountViewAsHandler(AgencyPage):
    """Open the sub-account's UI without its password: a second cookie beside the agency user's own session,
    which is not changed; there they act with their own role, never above admin (no API key, signing secret or
    owners), and every page says "Viewing as …: back to the agency". It ends with their session, a change of
    their role or their deactivation (services.sessions.start_view_as)."""

    @authenticated
    async def post(self, sub_id):
        view_id = await subaccounts.start_view_as(self.services.db, self.current_user, self.session_id, "agency",
                                                  sub_id, by=self.actor)
        self.set_signed_cookie(self.VIEW_AS_COOKIE, view_id, expires_days=None, **self.COOKIE_FLAGS)
        self.redirect("/inbox", status=303)


class ViewAsEndHandler(UiHandler):
    """Back to the agency: the view-as session ends; the agency's own session goes on."""
    role = "agent"

    @authenticated
    async def post(self):
        sub_id = self.current_user["account_id"] if self.current_user.get("viewer") else None
        if sub_id:  # its open pages close (the agency's own go on)
            self.services.hub.disconnect(sub_id, session=session_key(self, self.current_user))
        await sessions.end(self.services.db, view_as_id(self), by=self.actor if sub_id else None)
        self.clear_cookie(self.VIEW_AS_COOKIE, **self.COOKIE_FLAGS)
        self.redirect(f"/agency/subaccounts/{sub_id}" if sub_id else "/agency", status=303)
