"""Helpers of the contact tests (issue 41): an inbound custom-channel message and the contact it reached."""
INBOUND = "/v1/incoming_custom_channel_message"


async def inbound(api, key, sid, from_id, body="Hi"):
    """Send an inbound message from from_id; the id of the contact it reached."""
    r = await api.post(INBOUND, {"customData": {"messageSid": sid, "fromId": from_id, "toId": "shop", "body": body}},
                       key=key)
    assert r.code == 200, r.body
    return (await api.get(f"/v1/messages/{r.json['messageId']}", key=key)).json["contactId"]
