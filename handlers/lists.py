"""Lists API: POST/GET /v1/lists, GET /v1/lists/{id}, GET/POST /v1/lists/{id}/contacts."""
from handlers.base import ApiHandler
from handlers.schemas import AddToList, ListCreate
from services import lists


class ListsHandler(ApiHandler):
    async def post(self):
        body = self.json_body(ListCreate)
        self.respond(await lists.create_list(self.services.db, self.principal.account_id, body.name), 201)

    async def get(self):
        self.respond(await lists.list_lists(self.services.db, self.principal.account_id,
                                            limit=self.get_query_argument("limit", None),
                                            cursor=self.get_query_argument("cursor", None)))


class ListHandler(ApiHandler):
    async def get(self, list_id):
        self.respond(await lists.get_list(self.services.db, self.principal.account_id, list_id))


class ListContactsHandler(ApiHandler):
    async def get(self, list_id):
        self.respond(await lists.list_members(self.services.db, self.principal.account_id, list_id,
                                              limit=self.get_query_argument("limit", None),
                                              cursor=self.get_query_argument("cursor", None)))

    async def post(self, list_id):
        body = self.json_body(AddToList)
        self.respond(await lists.add_contact(self.services.db, self.principal.account_id, list_id,
                                             body.contactId))
