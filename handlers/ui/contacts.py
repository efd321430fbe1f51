"""Contacts pages: search and create contacts, a contact's page (its fields edited in place, its lists, opt-out
and in by hand, its conversation), and erasing a contact after a confirm step. The API's services do the work
(the Lists pages: handlers/ui/lists.py)."""
import json

from tornado.web import authenticated

from common.errors import Conflict, Invalid, NotFound
from handlers.ui_base import UiHandler
from handlers.contacts import send_contacts_csv
from services import contacts, erasure, lists, person_data
from services.contact_fields import split_tags

PAGE_SIZE = 50


class ContactsHandler(UiHandler):
    """GET /contacts?q=&before=: search; POST /contacts: create (or find, like POST /v1/contacts)."""
    role = "agent"

    @authenticated
    async def get(self):
        await self.render_contacts()

    async def render_contacts(self, status=200, error=None, form=None):
        query = self.get_query_argument("q", "")
        tag = self.get_query_argument("tag", "")
        try:
            page = await contacts.search_contacts(self.services.db, self.account_id, query, tag=tag or None,
                                                  before=self.get_query_argument("before", None), limit=PAGE_SIZE)
        except Invalid as exc:  # a tag no contact can have
            page, error, status = {"items": [], "next_before": None}, exc.message, 400
        for row in page["items"]:
            row["tag_list"] = contacts.tags_of(row)
        self.render("contacts.html", status=status, page=page, query=query, tag=tag, form=form or {},
                    flashes=[{"kind": "error", "text": error}] if error else [])

    @authenticated
    async def post(self):
        form = {name: self.get_body_argument(name, "").strip()
                for name in ("firstName", "lastName", "phone", "email", "tags")}
        try:
            contact, created = await contacts.create_contact(
                self.services.db, self.account_id, first_name=form["firstName"], last_name=form["lastName"],
                phone=form["phone"], email=form["email"], tags=split_tags(form["tags"]))
        except Invalid as exc:
            await self.render_contacts(status=400, error=exc.message, form=form)
            return
        self.action_done(f"/contacts/{contact['id']}", "Contact created." if created
                         else "A contact with this phone or email exists already: here it is.")


class ContactsExportHandler(UiHandler):
    """GET /contacts/export.csv?tag=: the Contacts page's Export button (GET /v1/contacts/export.csv's stream).
    Admins only: every contact at once, as erasure is theirs."""
    role = "admin"

    @authenticated
    async def get(self):
        await send_contacts_csv(self, self.account_id)


FIELDS = ("firstName", "lastName", "phone", "email")


class ContactSuggestHandler(UiHandler):
    """GET /contacts/suggest?q=: the account's contacts whose name, phone or email has q, as <option>s for a
    <datalist> (static/parley.js fills the list page's: issue 43 §9, a member added by name). Each option's value
    is the contact's phone or email, which the form resolves to exactly that contact."""
    role = "agent"

    @authenticated
    async def get(self):
        query = self.get_query_argument("q", "").strip()
        found = (await contacts.search_contacts(self.services.db, self.account_id, query, limit=contacts.SUGGESTIONS)
                 if query else {"items": []})
        self.render("_contact_options.html", contacts=found["items"])


class ContactHandler(UiHandler):
    """GET /contacts/{contactId}: its fields (a form), lists, opt-out state and its conversation (message count,
    last message, a link to the thread); POST: save the fields, through PATCH /v1/contacts/{id}'s service (the
    same errors, next to their field)."""
    role = "agent"

    @authenticated
    async def get(self, contact_id):
        await self.render_contact(contact_id)

    async def render_contact(self, contact_id, status=200, form=None, error=None, merge=None):
        contact = await contacts.get_contact_row(self.services.db, self.account_id, contact_id)
        member_of = await lists.lists_of_contact(self.services.db, self.account_id, contact_id)
        all_lists = await lists.list_lists(self.services.db, self.account_id, limit=str(lists.MAX_LIMIT))
        joined = {lst["id"] for lst in member_of}
        public = contacts.public_contact(contact)
        conversation = await contacts.conversation_summary(self.services.db, self.account_id, contact_id)
        self.render("contact.html", status=status, contact=contact, member_of=member_of, conversation=conversation,
                    form=form or {**{name: public[name] or "" for name in FIELDS}, "tags": ", ".join(public["tags"])},
                    error=error, tags=public["tags"], merge=merge or {},
                    opt_out=public["optOutChange"],
                    other_lists=[lst for lst in all_lists["data"] if lst["id"] not in joined])

    @authenticated
    async def post(self, contact_id):
        form = {name: self.get_body_argument(name, "").strip() for name in (*FIELDS, "tags")}
        try:
            await contacts.update_contact(self.services.db, self.account_id, contact_id,
                                          {**form, "tags": split_tags(form["tags"])},
                                          contacts.user_actor(self.actor["actor_label"]), by=self.actor)
        except (Invalid, Conflict) as exc:
            await self.render_contact(contact_id, status=exc.status, form=form, error=exc)
            return
        self.action_done(f"/contacts/{contact_id}", "Contact saved.")


class ContactOptOutHandler(UiHandler):
    """POST /contacts/{contactId}/opt-out: optedOut=1 opts the contact out by hand, 0 back in; who (the
    signed-in user) and when are kept on the contact."""
    role = "agent"

    @authenticated
    async def post(self, contact_id):
        opted_out = self.get_body_argument("optedOut", "") == "1"
        await contacts.update_contact(self.services.db, self.account_id, contact_id, {"optedOut": opted_out},
                                      contacts.user_actor(self.actor["actor_label"]), by=self.actor)
        self.action_done(f"/contacts/{contact_id}", "Opted out: campaigns skip this contact and the bot does not "
                         "answer it." if opted_out else "Opted back in.")


class ContactListRemoveHandler(UiHandler):
    """POST /contacts/{contactId}/lists/{listId}/remove: take the contact off one of its lists."""
    role = "agent"

    @authenticated
    async def post(self, contact_id, list_id):
        result = await lists.remove_contact(self.services.db, self.account_id, list_id, contact_id)
        self.action_done(f"/contacts/{contact_id}", "Removed from the list." if result["removed"]
                         else "The contact was not on this list.")


class ContactListsHandler(UiHandler):
    """POST /contacts/{contactId}/lists: listId. Add the contact to one of the account's lists."""
    role = "agent"

    @authenticated
    async def post(self, contact_id):
        result = await lists.add_contact(self.services.db, self.account_id, self.get_body_argument("listId", ""),
                                         contact_id)
        self.action_done(f"/contacts/{contact_id}", "Added to the list." if result["added"]
                         else "The contact already was on this list.")


class ContactMergeHandler(ContactHandler):
    """POST /contacts/{contactId}/merge: other (a name, phone, email or id, as the list page's member field) merged
    into this contact (POST /v1/contacts/{id}/merge's service). A phone or email both have, different, shows the
    contact page again with a choice for each (keep_phone, keep_email: this or other)."""
    role = "agent"

    async def get(self, contact_id):
        self.redirect(f"/contacts/{contact_id}")

    @authenticated
    async def post(self, contact_id):
        text = self.get_body_argument("other", "").strip()
        keep = {name: self.get_body_argument(f"keep_{name}") for name in ("phone", "email")
                if self.get_body_argument(f"keep_{name}", "")}
        await contacts.get_contact_row(self.services.db, self.account_id, contact_id)  # this one: a 404 page
        try:  # from here a contact not found is the other one: said next to its field
            other_id = await contacts.resolve_contact_id(self.services.db, self.account_id, text)
            result = await contacts.merge_contacts(self.services.db, self.account_id, contact_id, other_id, keep,
                                                   by=self.actor)
        except (Invalid, Conflict, NotFound) as exc:
            await self.render_contact(contact_id, status=exc.status, merge={
                "text": text, "error": exc.message, "choices": await self._choices(contact_id, exc)})
            return
        self.action_done(f"/contacts/{contact_id}", f"Merged: {result['mergedId']}'s messages, notes and lists are "
                         "this contact's now.")

    async def _choices(self, contact_id, exc):
        """For a phone or email both contacts have: [(field, this value, other value)], and the other's id."""
        if not isinstance(exc, Conflict) or not exc.existing_id:
            return None
        this = await contacts.get_contact(self.services.db, self.account_id, contact_id)
        other = await contacts.get_contact(self.services.db, self.account_id, exc.existing_id)
        fields = [(f, this[f], other[f]) for f in ("phone", "email") if this[f] and other[f] and this[f] != other[f]]
        return {"other_id": other["id"], "fields": fields} if fields else None


class ContactExportHandler(UiHandler):
    """GET /contacts/{contactId}/export: the contact page's "Download data" (GET /v1/contacts/{id}/export's JSON, as
    a file), audited as the signed-in user. Admins only, as erasure."""
    role = "admin"

    @authenticated
    async def get(self, contact_id):
        data = await person_data.export_person(self.services, self.account_id, contact_id, self.actor)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Content-Disposition", f'attachment; filename="{contact_id}.json"')
        self.finish(json.dumps(data, ensure_ascii=False, indent=2))


class ContactEraseHandler(UiHandler):
    """GET /contacts/{contactId}/erase: what erasing removes and what stays, and the confirm step (type the
    contact's phone or email); POST: erase it (DELETE /v1/contacts/{id}'s service), then the Contacts page."""
    role = "admin"

    @authenticated
    async def get(self, contact_id):
        await self.render_erase(contact_id)

    async def render_erase(self, contact_id, status=200, error=None):
        contact = await contacts.get_contact_row(self.services.db, self.account_id, contact_id)
        conversation = await contacts.conversation_summary(self.services.db, self.account_id, contact_id)
        member_of = await lists.lists_of_contact(self.services.db, self.account_id, contact_id)
        self.render("contact_erase.html", status=status, contact=contact, conversation=conversation,
                    member_of=member_of, error=error)

    @authenticated
    async def post(self, contact_id):
        contact = await contacts.get_contact_row(self.services.db, self.account_id, contact_id)
        try:
            erasure.check_confirmation(contact, self.get_body_argument("confirm", ""))
        except Invalid as exc:
            await self.render_erase(contact_id, status=exc.status, error=exc)
            return
        await erasure.erase_contact(self.services, self.account_id, contact_id, self.actor)
        self.action_done("/contacts", "Contact erased: its details, messages, media files, list memberships and "
                                      "conversation are gone. Campaign totals still count it.")
