"""Reading an account's events in tests: GET /v1/events, each event checked against its type's schema."""
from pydantic import TypeAdapter

from handlers.event_schemas import Event

EVENT = TypeAdapter(Event)


async def events_of(api, key, types):
    r = await api.get(f"/v1/events?types={types}&limit=500", key=key, query_key=False)
    assert r.code == 200, r.body
    for event in r.json["data"]:
        EVENT.validate_python(event)  # each event against its type's schema
    return r.json["data"]
