"""GET /v1/events: the account's event stream (services/event_stream.py)."""
from handlers.base import ApiHandler
from handlers.event_schemas import EventPage, EventsQuery
from handlers.openapi import Operation
from services import event_stream
from services.keys import hash_api_key


class EventsHandler(ApiHandler):
    operations = {"get": Operation(
        "The account's events since a cursor, in commit order", {200: EventPage}, query=EventsQuery,
        tags=("events",),
        errors={400: "after, types, limit or wait is malformed, out of range or names an unknown type (named in "
                     "the message).",
                410: "after is older than the events kept, --event-retention-days (CURSOR_EXPIRED): read from "
                     "the oldest kept and resync."},
        description="Every client's \"what happened since I last looked\": page with after = nextCursor and each "
                    "event is read exactly once, in the order the changes committed. With wait, an empty answer "
                    "waits until an event of these types commits (long-poll); long-polls waiting at once are "
                    "limited per key and per account (429 with Retry-After). docs/api.md \"Events\".")}

    async def get(self):
        arg = self.get_query_argument
        self.respond(await event_stream.read(
            self.services, self.principal.account_id, hash_api_key(self.api_key()), after=arg("after", None),
            types=arg("types", None), limit=arg("limit", None), wait=arg("wait", None)))
