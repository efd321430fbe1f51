"""Private notes API: GET/POST /v1/conversations/{contactId}/notes, DELETE .../notes/{noteId}. A conversation is
the thread with one contact, so it is named by the contact's id."""
from handlers.base import ApiHandler, idempotent
from handlers.openapi import Operation
from handlers.schemas import PageQuery
from handlers.schemas_canned_notes import Deleted, Note, NoteCreate, NotePage
from services import notes

CONTACT_NOT_FOUND = "No such contact (CONTACT_NOT_FOUND)."
TAGS = ("notes",)
PRIVATE = ("A note is for the account's team: it is never sent to the contact, never in the reply webhook and "
           "never counted as a message; open inbox pages show it at once.")


class NotesHandler(ApiHandler):
    role = "agent"
    path_params = {"contactId": "The conversation's contact id (one conversation per contact)."}
    operations = {
        "post": Operation("Add a private note to a conversation", {201: (Note, "Created.")}, body=NoteCreate,
                          description=PRIVATE, errors={404: CONTACT_NOT_FOUND}, tags=TAGS),
        "get": Operation("A conversation's private notes", {200: NotePage}, query=PageQuery, tags=TAGS,
                         errors={400: "Invalid limit or cursor.", 404: CONTACT_NOT_FOUND}),
    }

    @idempotent
    async def post(self, contact_id):
        body = self.json_body(NoteCreate)
        self.respond(await notes.add(self.services.db, self.principal.account_id, contact_id, body.body), 201)

    async def get(self, contact_id):
        self.respond(await notes.list_page(self.services.db, self.principal.account_id, contact_id,
                                           limit=self.get_query_argument("limit", None),
                                           cursor=self.get_query_argument("cursor", None)))


class NoteHandler(ApiHandler):
    role = "agent"
    path_params = {"contactId": "The conversation's contact id.", "noteId": "The note's id."}
    operations = {"delete": Operation(
        "Delete a private note", {200: Deleted}, tags=TAGS,
        description="An API key acts for the account: it may delete any of its notes (in the inbox, a note's "
                    "author or an admin).", errors={404: "No such note in this conversation (NOT_FOUND)."})}

    @idempotent
    async def delete(self, contact_id, note_id):
        self.respond(await notes.delete(self.services.db, self.principal.account_id, contact_id, note_id))
