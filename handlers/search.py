"""GET /v1/search: the account's messages whose text matches a query (services/search.py)."""
from handlers.base import ApiHandler
from handlers.openapi import Operation
from handlers.search_schemas import SearchPage, SearchQuery
from services import search


class SearchHandler(ApiHandler):
    role = "agent"
    operations = {"get": Operation(
        "Search the text of every message", {200: SearchPage}, query=SearchQuery, tags=("messages",),
        errors={400: "q is missing, blank, longer than 200 characters or has no word of 2+ characters; or limit or "
                     "cursor is invalid (named in the message)."},
        description="Every message of the account, inbound and outbound, however old, newest first. "
                    "docs/api.md \"Search\".")}

    async def get(self):
        arg = self.get_query_argument
        self.respond(await search.search_messages(self.services.db, self.principal.account_id, arg("q", None),
                                                  limit=arg("limit", None), cursor=arg("cursor", None)))
