"""Helpers of the contact and list tests: an inbound custom-channel message and the contact it reached, a contact
or list made through the API or the service, and a list's membership count."""
from services import contacts as contact_service

INBOUND = "/v1/incoming_custom_channel_message"


async def inbound(api, key, sid, from_id, body="Hi"):
    """Send an inbound message from from_id; the id of the contact it reached."""
    r = await api.post(INBOUND, {"customData": {"messageSid": sid, "fromId": from_id, "toId": "shop", "body": body}},
                       key=key)
    assert r.code == 200, r.body
    return (await api.get(f"/v1/messages/{r.json['messageId']}", key=key)).json["contactId"]


async def new_list(api, key, name="Leads"):
    r = await api.post("/v1/lists", {"name": name}, key=key)
    assert r.code == 201, r.body
    return r.json


async def new_contact(api, key, **body):
    r = await api.post("/v1/contacts", body, key=key)
    assert r.code in (200, 201), r.body
    return r.json


async def add(api, key, list_id, contact_id):
    return await api.post(f"/v1/lists/{list_id}/contacts", {"contactId": contact_id}, key=key)


def membership_rows(services, list_id):
    cx = services.db.connect_sync()
    try:
        return cx.execute("SELECT COUNT(*) FROM list_members WHERE list_id = ?", (list_id,)).fetchone()[0]
    finally:
        cx.close()


async def make_contact(services, account_id, **fields):
    contact, _ = await contact_service.create_contact(services.db, account_id, **fields)
    return contact
