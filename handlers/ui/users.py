"""The Users page (owners and admins): the account's users, invite (the one-time sign-in link is shown on the
answer; a pending invitation gets a new one), change a user's role, deactivate and reactivate, remove (after a
confirmation page). The same service as /v1/users does the work."""
from tornado.web import authenticated

from handlers.ui_base import UiHandler
from services import assignment, users
from common.errors import DomainError


class UsersPage(UiHandler):
    role = "admin"

    async def render_users(self, status=200, error=None, form=None, invited=None):
        page = await users.list_users(self.services.db, self.account_id)
        self.render("users.html", status=status, users=page["data"], roles=self.assignable_roles(),
                    form=form or {"email": "", "name": "", "role": "agent"}, invited=invited,
                    flashes=[{"kind": "error", "text": error.message}] if error else [], error=error)

    def assignable_roles(self):
        """The roles this user may give: an admin cannot make owners."""
        return [r for r in reversed(users.ROLES) if r != "owner" or users.allows(self.current_user["role"], "owner")]


class UsersHandler(UsersPage):
    @authenticated
    async def get(self):
        await self.render_users()

    @authenticated
    async def post(self):
        """Invite: the page again, with the sign-in link to pass on."""
        form = {name: self.get_body_argument(name, "") for name in ("email", "name", "role")}
        try:
            invited = await users.invite(self.services.db, self.services.box, self.application.settings_obj.base_url,
                                         self.account_id, email=form["email"], name=form["name"], role=form["role"],
                                         by=self.actor, actor_role=self.current_user["role"])
        except DomainError as exc:
            await self.render_users(status=exc.status, error=exc, form=form)
            return
        if invited["invitationEmailed"]:
            self.services.delivery.notify()  # its mail is in the outbox
        await self.render_users(status=201, invited=invited)


class UserUpdateHandler(UsersPage):
    """POST /users/{id}: change role, active (deactivate: the user's sessions and open pages end now), available or
    capacity (automatic assignment)."""

    @authenticated
    async def post(self, user_id):
        changes = {}
        if self.get_body_argument("role", None) is not None:
            changes["role"] = self.get_body_argument("role")
        if self.get_body_argument("active", None) is not None:
            changes["active"] = self.get_body_argument("active") == "1"
        if self.get_body_argument("available", None) is not None:
            changes["available"] = self.get_body_argument("available") == "1"
        if self.get_body_argument("capacity", None) is not None:
            changes["capacity"] = _capacity(self.get_body_argument("capacity"))
        try:
            user, deactivated, unassigned = await users.update(
                self.services.db, self.account_id, user_id, changes=changes, by=self.actor,
                actor_role=self.current_user["role"])
        except DomainError as exc:
            await self.render_users(status=exc.status, error=exc)
            return
        if deactivated or "role" in changes:  # their pages load again, with the events their role has now
            self.services.hub.disconnect(None, user=user_id)
        assignment.wake(self.services)  # back, or more capacity: waiting conversations may go to them now
        self.flash("success", f"{user['email']}: {_deactivated(unassigned) if deactivated else 'saved'}.")
        self.redirect("/users", status=303)


class InviteLinkHandler(UsersPage):
    """POST /users/{id}/invite-link: a new one-time sign-in link for a pending invitation, shown on the page as at
    the invitation (the earlier link stops working)."""

    @authenticated
    async def post(self, user_id):
        try:
            invited = await users.new_invitation_link(self.services.db, self.services.box,
                                                      self.application.settings_obj.base_url,
                                                      self.account_id, user_id, actor_role=self.current_user["role"])
        except DomainError as exc:
            await self.render_users(status=exc.status, error=exc)
            return
        if invited["invitationEmailed"]:
            self.services.delivery.notify()
        await self.render_users(invited={**invited, "renewed": True})


class UserRemoveHandler(UsersPage):
    """/users/{id}/remove: GET asks to confirm, POST removes the user from the account (their sessions here end,
    their email and name are erased here; services.users.remove)."""

    @authenticated
    async def get(self, user_id):
        user = await users.get_user(self.services.db, self.account_id, user_id)
        self.render("user_remove.html", target=user)

    @authenticated
    async def post(self, user_id):
        user = await users.get_user(self.services.db, self.account_id, user_id)
        try:
            unassigned = await users.remove(self.services.db, self.account_id, user_id, by=self.actor,
                                            actor_role=self.current_user["role"])
        except DomainError as exc:
            await self.render_users(status=exc.status, error=exc)
            return
        self.services.hub.disconnect(None, user=user_id)  # their open pages close
        removed = "removed from this account" + (_unassigned(unassigned) if unassigned else "")
        self.flash("success", f"{user['name'] or user['email']}: {removed}.")
        self.redirect("/users", status=303)


def _capacity(text):
    """The capacity field: blank is no limit; a whole number as typed (services.assignment.capacity_of checks it),
    anything else is left as text for it to refuse, naming capacity."""
    text = text.strip()
    return None if not text else int(text) if text.isascii() and text.lstrip("-").isdigit() else text


def _unassigned(unassigned):
    conversations = ("1 unresolved conversation is" if unassigned == 1
                     else f"{unassigned} unresolved conversations are")
    return f"; their {conversations} unassigned"


def _deactivated(unassigned):
    """The flash after a deactivation: what else it did (the user's open conversations are nobody's now)."""
    return "deactivated, signed out everywhere" + (_unassigned(unassigned) if unassigned else "")
