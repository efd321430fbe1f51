"""Lists pages: the account's lists (create), a list's page (its members with remove buttons and checkboxes
to remove many at once, add a contact, rename) and the confirmation before a list is deleted. The API's
services do the work."""
from tornado.web import authenticated

from common.errors import Conflict, Invalid, NotFound
from handlers.ui_base import UiHandler
from services import contacts, lists

PAGE_SIZE = 50


class ListsHandler(UiHandler):
    """GET /lists?cursor=: the account's lists; POST /lists: create one."""
    role = "agent"

    @authenticated
    async def get(self):
        await self.render_lists()

    async def render_lists(self, status=200, error=None, name=""):
        page = await lists.list_lists(self.services.db, self.account_id, limit=str(PAGE_SIZE),
                                      cursor=self.get_query_argument("cursor", None))
        self.render("lists.html", status=status, page=page, name=name, error=error)

    @authenticated
    async def post(self):
        name = self.get_body_argument("name", "")
        try:
            created = await lists.create_list(self.services.db, self.account_id, name)
        except (Invalid, Conflict) as exc:
            await self.render_lists(status=exc.status, error=exc, name=name)
            return
        self.action_done(f"/lists/{created['id']}", "List created.")


class ListHandler(UiHandler):
    """GET /lists/{listId}?cursor=: the list and its members; POST: add a contact by phone, email or id."""
    role = "agent"

    @authenticated
    async def get(self, list_id):
        await self.render_list(list_id)

    async def render_list(self, list_id, status=200, error=None, contact="", name=None):
        db = self.services.db
        lst = await lists.get_list(db, self.account_id, list_id)
        members = await lists.list_members(db, self.account_id, list_id, limit=str(PAGE_SIZE),
                                           cursor=self.get_query_argument("cursor", None))
        self.render("list.html", status=status, lst=lst, members=members, contact=contact, error=error,
                    name=lst["name"] if name is None else name)

    @authenticated
    async def post(self, list_id):
        await lists.get_list(self.services.db, self.account_id, list_id)  # an unknown list is a 404 page
        text = self.get_body_argument("contact", "").strip()
        try:
            contact_id = await contacts.resolve_contact_id(self.services.db, self.account_id, text)
            result = await lists.add_contact(self.services.db, self.account_id, list_id, contact_id)
        except (Invalid, NotFound) as exc:
            exc.field = "contact"
            await self.render_list(list_id, status=400, error=exc, contact=text)
            return
        self.action_done(f"/lists/{list_id}", "Contact added." if result["added"]
                         else "The contact already was on this list.")


class ListRenameHandler(ListHandler):
    """POST /lists/{listId}/rename: name (unique per account, like PATCH /v1/lists/{id})."""

    @authenticated
    async def post(self, list_id):
        name = self.get_body_argument("name", "")
        try:
            await lists.rename_list(self.services.db, self.account_id, list_id, name)
        except (Invalid, Conflict) as exc:
            await self.render_list(list_id, status=exc.status, error=exc, name=name)
            return
        self.action_done(f"/lists/{list_id}", "List renamed.")


class ListRemoveMembersHandler(UiHandler):
    """POST /lists/{listId}/remove: one (a row's Remove button: one=contactId) or the checked (contactIds)
    members off the list; the contacts stay."""
    role = "agent"

    @authenticated
    async def post(self, list_id):
        one = self.get_body_argument("one", "")
        chosen = [one] if one else self.get_body_arguments("contactIds")
        if not chosen:
            self.flash("error", "Tick the contacts to remove first.")
            self.redirect(f"/lists/{list_id}", status=303)
            return
        removed = await lists.remove_contacts(self.services.db, self.account_id, list_id, chosen)
        self.action_done(f"/lists/{list_id}", f"Removed {removed} contact{'' if removed == 1 else 's'} from the list.")


class ListDeleteHandler(UiHandler):
    """GET /lists/{listId}/delete: what deleting takes with it (its memberships, never its contacts), to
    confirm; POST: delete it."""
    role = "agent"

    @authenticated
    async def get(self, list_id):
        await self.render_confirm(list_id)

    async def render_confirm(self, list_id, status=200, error=None):
        lst = await lists.get_list(self.services.db, self.account_id, list_id)
        self.render("list_delete.html", status=status, lst=lst, error=error)

    @authenticated
    async def post(self, list_id):
        try:
            result = await lists.delete_list(self.services.db, self.account_id, list_id, by=self.actor)
        except Conflict as exc:
            await self.render_confirm(list_id, status=409, error=exc)
            return
        n = result["removedMemberships"]
        self.action_done("/lists", f"List deleted with its {n} membership{'' if n == 1 else 's'}; the contacts stay.")
