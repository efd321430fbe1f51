"""Contacts and Lists pages: search and create contacts, a contact's page (fields, lists, opt-out, its
conversation), lists with their members, adding a contact to a list. The API's services do the work."""
from tornado.web import authenticated

from common.errors import Invalid, NotFound
from handlers.base import UiHandler
from services import contacts, lists

PAGE_SIZE = 50


class ContactsHandler(UiHandler):
    """GET /contacts?q=&before=: search; POST /contacts: create (or find, like POST /v1/contacts)."""

    @authenticated
    async def get(self):
        await self.render_contacts()

    async def render_contacts(self, status=200, error=None, form=None):
        query = self.get_query_argument("q", "")
        page = await contacts.search_contacts(self.services.db, self.account_id, query,
                                              before=self.get_query_argument("before", None), limit=PAGE_SIZE)
        self.render("contacts.html", status=status, page=page, query=query, form=form or {},
                    flashes=[{"kind": "error", "text": error}] if error else [])

    @authenticated
    async def post(self):
        form = {name: self.get_body_argument(name, "").strip() for name in ("firstName", "lastName", "phone", "email")}
        try:
            contact, created = await contacts.create_contact(
                self.services.db, self.account_id, first_name=form["firstName"], last_name=form["lastName"],
                phone=form["phone"], email=form["email"])
        except Invalid as exc:
            await self.render_contacts(status=400, error=exc.message, form=form)
            return
        self.action_done(f"/contacts/{contact['id']}", "Contact created." if created
                         else "A contact with this phone or email exists already: here it is.")


class ContactHandler(UiHandler):
    """GET /contacts/{contactId}: its fields, lists, opt-out state and a link to its conversation."""

    @authenticated
    async def get(self, contact_id):
        contact = await contacts.get_contact_row(self.services.db, self.account_id, contact_id)
        member_of = await lists.lists_of_contact(self.services.db, self.account_id, contact_id)
        all_lists = await lists.list_lists(self.services.db, self.account_id, limit=str(lists.MAX_LIMIT))
        joined = {lst["id"] for lst in member_of}
        self.render("contact.html", contact=contact, member_of=member_of,
                    other_lists=[lst for lst in all_lists["data"] if lst["id"] not in joined])


class ContactListsHandler(UiHandler):
    """POST /contacts/{contactId}/lists: listId. Add the contact to one of the account's lists."""

    @authenticated
    async def post(self, contact_id):
        result = await lists.add_contact(self.services.db, self.account_id, self.get_body_argument("listId", ""),
                                         contact_id)
        self.action_done(f"/contacts/{contact_id}", "Added to the list." if result["added"]
                         else "The contact already was on this list.")


class ListsHandler(UiHandler):
    """GET /lists?cursor=: the account's lists; POST /lists: create one."""

    @authenticated
    async def get(self):
        await self.render_lists()

    async def render_lists(self, status=200, error=None, name=""):
        page = await lists.list_lists(self.services.db, self.account_id, limit=str(PAGE_SIZE),
                                      cursor=self.get_query_argument("cursor", None))
        self.render("lists.html", status=status, page=page, name=name,
                    flashes=[{"kind": "error", "text": error}] if error else [])

    @authenticated
    async def post(self):
        name = self.get_body_argument("name", "")
        try:
            created = await lists.create_list(self.services.db, self.account_id, name)
        except Invalid as exc:
            await self.render_lists(status=400, error=exc.message, name=name)
            return
        self.action_done(f"/lists/{created['id']}", "List created.")


class ListHandler(UiHandler):
    """GET /lists/{listId}?cursor=: the list and its members; POST: add a contact by phone, email or id."""

    @authenticated
    async def get(self, list_id):
        await self.render_list(list_id)

    async def render_list(self, list_id, status=200, error=None, contact=""):
        db = self.services.db
        lst = await lists.get_list(db, self.account_id, list_id)
        members = await lists.list_members(db, self.account_id, list_id, limit=str(PAGE_SIZE),
                                           cursor=self.get_query_argument("cursor", None))
        self.render("list.html", status=status, lst=lst, members=members, contact=contact,
                    flashes=[{"kind": "error", "text": error}] if error else [])

    @authenticated
    async def post(self, list_id):
        await lists.get_list(self.services.db, self.account_id, list_id)  # an unknown list is a 404 page
        text = self.get_body_argument("contact", "").strip()
        try:
            contact_id = await contacts.resolve_contact_id(self.services.db, self.account_id, text)
            result = await lists.add_contact(self.services.db, self.account_id, list_id, contact_id)
        except (Invalid, NotFound) as exc:
            await self.render_list(list_id, status=400, error=exc.message, contact=text)
            return
        self.action_done(f"/lists/{list_id}", "Contact added." if result["added"]
                         else "The contact already was on this list.")
