"""Lists API: POST/GET /v1/lists, GET/PATCH/DELETE /v1/lists/{id}, GET/POST /v1/lists/{id}/contacts,
DELETE /v1/lists/{id}/contacts/{contactId}."""
from handlers.base import ApiHandler, idempotent
from handlers.openapi import Operation
from handlers.schemas import (AddToList, AddToListResult, ContactPage, ListCreate, ListDeleted, ListOut, ListPage,
                              ListPatch, PageQuery, RemoveFromListResult)
from services import lists


NOT_FOUND = "No such list (LIST_NOT_FOUND)."


class ListsHandler(ApiHandler):
    operations = {
        "post": Operation("Create a list", {201: (ListOut, "Created.")}, body=ListCreate, errors={
            409: "The account has a list of this name, compared without case and surrounding spaces (CONFLICT; "
                 "error.existingId is its id)."}, links={
            "GetList": ("/v1/lists/{listId}", "get", {"listId": "$response.body#/id"}),
            "GetListContacts": ("/v1/lists/{listId}/contacts", "get", {"listId": "$response.body#/id"}),
            "AddContactToList": ("/v1/lists/{listId}/contacts", "post", {"listId": "$response.body#/id"})}),
        "get": Operation("The account's lists", {200: ListPage}, query=PageQuery,
                         errors={400: "Invalid limit or cursor."}),
    }

    @idempotent
    async def post(self):
        body = self.json_body(ListCreate)
        self.respond(await lists.create_list(self.services.db, self.principal.account_id, body.name), 201)

    async def get(self):
        self.respond(await lists.list_lists(self.services.db, self.principal.account_id,
                                            limit=self.get_query_argument("limit", None),
                                            cursor=self.get_query_argument("cursor", None)))


class ListHandler(ApiHandler):
    path_params = {"listId": "The list's id."}
    operations = {
        "get": Operation("A list by id", {200: ListOut}, errors={404: NOT_FOUND}),
        "patch": Operation("Rename a list", {200: (ListOut, "The renamed list.")}, body=ListPatch,
                           errors={404: NOT_FOUND, 409: "Another list of the account has this name, compared "
                                                        "without case and surrounding spaces (CONFLICT; "
                                                        "error.existingId is its id)."}),
        "delete": Operation(
            "Delete a list and its memberships", {200: ListDeleted},
            description="Its contacts stay. Campaigns that already started keep their recipients (fixed at "
                        "start).",
            errors={404: NOT_FOUND, 409: "A scheduled campaign is to send to this list (CONFLICT; "
                                         "error.existingId is the campaign's id): cancel it first."}),
    }

    async def get(self, list_id):
        self.respond(await lists.get_list(self.services.db, self.principal.account_id, list_id))

    @idempotent
    async def patch(self, list_id):
        body = self.json_body(ListPatch)
        self.respond(await lists.rename_list(self.services.db, self.principal.account_id, list_id, body.name))

    async def delete(self, list_id):
        self.respond(await lists.delete_list(self.services.db, self.principal.account_id, list_id, by=self.actor))


class ListContactsHandler(ApiHandler):
    path_params = {"listId": "The list's id."}
    operations = {
        "get": Operation("The contacts of a list", {200: ContactPage}, query=PageQuery,
                         errors={400: "Invalid limit or cursor.", 404: "No such list (LIST_NOT_FOUND)."}),
        "post": Operation(
            "Add a contact to a list", {200: (AddToListResult, "Added, or already a member (added: false).")},
            body=AddToList, errors={404: "No such list (LIST_NOT_FOUND) or contact (CONTACT_NOT_FOUND)."}),
    }

    async def get(self, list_id):
        self.respond(await lists.list_members(self.services.db, self.principal.account_id, list_id,
                                              limit=self.get_query_argument("limit", None),
                                              cursor=self.get_query_argument("cursor", None)))

    @idempotent
    async def post(self, list_id):
        body = self.json_body(AddToList)
        self.respond(await lists.add_contact(self.services.db, self.principal.account_id, list_id,
                                             body.contactId))


class ListMemberHandler(ApiHandler):
    path_params = {"listId": "The list's id.", "contactId": "The contact's id."}
    operations = {"delete": Operation(
        "Remove a contact from a list", {200: (RemoveFromListResult, "Removed, or was not a member (removed: "
                                                                     "false).")},
        description="The contact itself stays.", errors={404: NOT_FOUND})}

    async def delete(self, list_id, contact_id):
        self.respond(await lists.remove_contact(self.services.db, self.principal.account_id, list_id, contact_id))
