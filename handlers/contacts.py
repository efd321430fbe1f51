"""Contacts API: POST /v1/contacts, GET /v1/contacts?phoneNumber=|email=, GET /v1/contacts/{id}."""
from handlers.base import ApiHandler
from handlers.schemas import ContactCreate
from services import contacts


class ContactsHandler(ApiHandler):
    async def post(self):
        body = self.json_body(ContactCreate)
        contact, created = await contacts.create_contact(
            self.services.db, self.principal.account_id, first_name=body.firstName,
            last_name=body.lastName, phone=body.phone, email=body.email)
        self.respond(contact, 201 if created else 200)

    async def get(self):
        # strip=False: a leading space is an unencoded "+" (normalize_phone reads it so).
        contact = await contacts.lookup_contact(
            self.services.db, self.principal.account_id,
            phone_number=self.get_query_argument("phoneNumber", None, strip=False),
            email=self.get_query_argument("email", None, strip=False))
        self.respond(contact)


class ContactHandler(ApiHandler):
    async def get(self, contact_id):
        self.respond(await contacts.get_contact(self.services.db, self.principal.account_id, contact_id))
