"""Custom-channel calls through the in-process app's API client (the `api` fixture): an inbound message's body, posting
it, and reading a message back."""
INBOUND = "/v1/incoming_custom_channel_message"
_sids = iter(range(1, 1_000_000))


def inbound_body(message_type=None, **custom):
    data = {"messageSid": f"sid-{next(_sids)}", "fromId": "user-1", "toId": "business-1", "body": "Hello"}
    data.update(custom)
    data = {k: v for k, v in data.items() if v is not ...}
    body = {"customData": data}
    if message_type is not None:
        body["messageType"] = message_type
    return body


async def post_inbound(api, key, path=INBOUND, message_type=None, **custom):
    return await api.post(path, inbound_body(message_type, **custom), key=key)


async def get_message(api, key, message_id):
    r = await api.get(f"/v1/messages/{message_id}", key=key)
    assert r.code == 200, r.body
    return r.json
