"""Contacts API: POST /v1/contacts, GET /v1/contacts?phoneNumber=|email=, GET, PATCH and DELETE (erase)
/v1/contacts/{id}."""
from common.errors import Invalid
from handlers.base import ApiHandler, idempotent, send_csv
from handlers.openapi import CSV, Operation
from handlers.schemas import Contact, ContactCreate, ContactErased, ContactExportQuery, ContactLookup, ContactOrPage, ContactPatch
from handlers.contact_schemas import ContactExport, ContactMerge, ContactMerged
from services import contacts, erasure, idempotency, person_data


LISTING_PARAMETERS = {"tag", "listId", "limit", "cursor", "apiKey"}


class ContactsHandler(ApiHandler):
    operations = {
        "post": Operation(
            "Create a contact (or return the existing one)",
            {201: (Contact, "Created."), 200: (Contact, "A contact with this phone (or, without a phone, this "
                                                        "email) exists; its blank fields were filled.")},
            body=ContactCreate, errors={400: "Neither phone nor email, or an invalid one (INVALID_PHONE, "
                                             "INVALID_EMAIL).",
                                        409: "A new phone with an email another contact has (CONFLICT, "
                                             "error.existingId names it), as PATCH refuses it."},
            links={"GetContact": ("/v1/contacts/{contactId}", "get", {"contactId": "$response.body#/id"}),
                   "GetContactMessages": ("/v1/contacts/{contactId}/messages", "get",
                                          {"contactId": "$response.body#/id"})}),
        "get": Operation(
            "Look up a contact by phone number or email, or list every contact",
            {200: (ContactOrPage, "With phoneNumber or email: the contact. Without: {data, nextCursor}, the "
                                  "account's contacts in id order, narrowed by tag and listId.")},
            query=ContactLookup,
            errors={400: "A blank or invalid phoneNumber or email; an invalid tag, limit or cursor.",
                    404: "No such contact (CONTACT_NOT_FOUND) for phoneNumber/email; no such list "
                         "(LIST_NOT_FOUND) for listId."}),
    }

    @idempotent
    async def post(self):
        body = self.json_body(ContactCreate)
        contact, created = await contacts.create_contact(
            self.services.db, self.principal.account_id, first_name=body.firstName,
            last_name=body.lastName, phone=body.phone, email=body.email, tags=body.tags)
        self.respond(contact, 201 if created else 200)

    async def get(self):
        arg = self.get_query_argument
        if arg("phoneNumber", None) is None and arg("email", None) is None:  # the lookup otherwise (docs/api.md#contacts)
            # A misspelt lookup (?phonenumber=) must not answer with every contact.
            unknown = sorted(set(self.request.query_arguments) - LISTING_PARAMETERS)
            if unknown:
                raise Invalid(f"unknown query parameter {unknown[0]}: phoneNumber or email looks up one contact; "
                              "tag, listId, limit and cursor list them", field=unknown[0])
            self.respond(await contacts.list_contacts(
                self.services.db, self.principal.account_id, tag=arg("tag", None), list_id=arg("listId", None),
                limit=arg("limit", None), cursor=arg("cursor", None)))
            return
        # strip=False: a leading space is an unencoded "+" (normalize_phone reads it so).
        contact = await contacts.lookup_contact(
            self.services.db, self.principal.account_id,
            phone_number=self.get_query_argument("phoneNumber", None, strip=False),
            email=self.get_query_argument("email", None, strip=False))
        self.respond(contact)


class ContactHandler(ApiHandler):
    path_params = {"contactId": "The contact's id."}
    operations = {
        "get": Operation("A contact by id", {200: Contact}, errors={404: "No such contact (CONTACT_NOT_FOUND)."}),
        "patch": Operation(
            "Correct a contact, or opt it out or in by hand", {200: (Contact, "The contact after the change.")},
            body=ContactPatch,
            description="Any subset of the fields; null clears an optional one (a phone or an email must stay). "
                        "Validated as on creation. Channel identities (fromId) stay with the contact. A change "
                        "queues a contact.updated notification (data: the contact).",
            errors={400: "An invalid field (INVALID_PHONE, INVALID_EMAIL, VALIDATION_ERROR), or neither phone nor "
                         "email would be left.",
                    404: "No such contact (CONTACT_NOT_FOUND).",
                    409: "Another contact of the account has this phone or email (CONFLICT; the message names "
                         "it and its id, error.existingId is its id); nothing changed."}),
        "delete": Operation(
            "Erase a contact (GDPR art. 17)", {200: (ContactErased, "Erased: nothing of the contact is left.")},
            description="Removes the contact, its messages and their stored media files, channel identities, "
                        "list memberships, bot pause, conversation, webhooks about it (pending or delivered, with "
                        "their attempts), live events and Idempotency-Key answers holding it, in one transaction. "
                        "Its campaign recipient rows stay, anonymised, so campaign totals still add up; credit "
                        "history is untouched. Cannot be undone.",
            errors={404: "No such contact (CONTACT_NOT_FOUND), also for another account's id."}),
    }

    async def get(self, contact_id):
        self.respond(await contacts.get_contact(self.services.db, self.principal.account_id, contact_id))

    async def request_fingerprint(self):
        if self.request.method != "PATCH":
            return await super().request_fingerprint()
        # Absent and null differ in a PATCH (unchanged vs cleared): the fingerprint keeps only what was sent.
        return idempotency.fingerprint({"path": list(self.path_args), "body": self.parsed_body.model_dump(
            mode="json", exclude_unset=True)})

    @idempotent
    async def patch(self, contact_id):
        body = self.json_body(ContactPatch)
        self.respond(await contacts.update_contact(self.services.db, self.principal.account_id, contact_id,
                                                   body.model_dump(exclude_unset=True), contacts.API_ACTOR,
                                                   by=self.actor))

    @idempotent
    async def delete(self, contact_id):
        self.respond(await erasure.erase_contact(self.services, self.principal.account_id, contact_id, self.actor))


class ContactsExportHandler(ApiHandler):
    operations = {"get": Operation(
        "Every contact as CSV", {200: (CSV, "Columns: " + ", ".join(contacts.CSV_COLUMNS) + ".")},
        query=ContactExportQuery,
        description="Streamed a page at a time, in id order. Tags are joined by \", \". Cells that a spreadsheet "
                    "would run as a formula (=, +, -, @) start with a quote, as in every CSV export.",
        errors={400: "An invalid tag.", 404: "No such list (LIST_NOT_FOUND)."})}

    async def get(self):
        await send_contacts_csv(self, self.principal.account_id)


async def send_contacts_csv(handler, account_id):
    """Stream the account's contacts (?tag=&listId=) as CSV: the API's export and the Contacts page's (session)."""
    arg = handler.get_query_argument
    await send_csv(handler, contacts.contacts_csv(handler.services.db, account_id, tag=arg("tag", None),
                                                  list_id=arg("listId", None)), "contacts.csv")


class ContactExportHandler(ApiHandler):
    path_params = {"contactId": "The contact's id."}
    operations = {"get": Operation(
        "Everything held on a contact, as JSON (GDPR access and portability)", {200: ContactExport},
        description="Its fields and tags, channel identities, every message, the team's notes, lists, opt-out "
                    "history, conversation state and campaigns, read in one transaction. Each export is recorded "
                    "in the audit list (contact.exported: who, and how many rows; never the data).",
        errors={404: "No such contact (CONTACT_NOT_FOUND), also for another account's id."})}

    async def get(self, contact_id):
        self.respond(await person_data.export_person(self.services, self.principal.account_id, contact_id,
                                                     self.actor))


class ContactMergeHandler(ApiHandler):
    path_params = {"contactId": "The contact to keep."}
    operations = {"post": Operation(
        "Merge another contact of the same person into this one", {200: (ContactMerged, "Merged.")},
        body=ContactMerge,
        description="The other contact's channel identities (new messages from them reach this contact), messages, "
                    "notes, list memberships, campaign rows, opt-out history and conversation move here, in one "
                    "transaction; this contact's blank fields are filled from it and tags joined; an opt-out on "
                    "either stays. The other contact is then deleted (404). Where both have a different value, "
                    "keep says whose stays: names default to this contact's; a phone or an email needs a choice. "
                    "Queues contact.updated (this contact) and contact.merged ({contactId, mergedId}); recorded in "
                    "the audit list (contact.merged).",
        errors={400: "otherId missing or this contact's id; an invalid keep.",
                404: "No such contact (CONTACT_NOT_FOUND) for the id or otherId, also another account's.",
                409: "Both have a different phone or email and keep does not choose (CONFLICT; the message names "
                     "the field, error.existingId the other contact), or together more than 50 tags. Nothing "
                     "changed."})}

    @idempotent
    async def post(self, contact_id):
        body = self.json_body(ContactMerge)
        self.respond(await contacts.merge_contacts(self.services.db, self.principal.account_id, contact_id,
                                                   body.otherId, body.keep, by=self.actor))
