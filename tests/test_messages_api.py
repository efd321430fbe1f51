"""Message read API (docs/design.md#api-decisions "Account API"): GET /v1/messages/{id} with its delivery attempts, and
GET /v1/contacts/{id}/messages, cursor-paginated; both scoped to the calling account."""
import json

import pytest
import tornado.httpserver
import tornado.testing
import tornado.web

from services.delivery import DeliveryWorker
from common.ids import utcnow

INBOUND = "/v1/incoming_custom_channel_message"
SEND = "/v1/send_custom_channel_message"
_sids = iter(range(1, 1_000_000))
MESSAGE_KEYS = {"id", "direction", "status", "body", "channel", "contactId", "messageType", "media", "error",
                "attempts", "author", "createdAt"}


@pytest.fixture
def other_account(make_account):
    return make_account()


async def inbound(api, key, **custom):
    data = {"messageSid": f"sid-{next(_sids)}", "fromId": "reader-1", "toId": "biz", "body": "Hello", **custom}
    r = await api.post(INBOUND, {"customData": data}, key=key)
    assert r.code == 200, r.body
    return r.json["messageId"]


class FailingReceiver:
    """A real local webhook receiver that answers 503 with a short text."""

    def __init__(self):
        self.hits = 0
        receiver = self

        class Hook(tornado.web.RequestHandler):
            def check_xsrf_cookie(self):
                pass

            def post(self):
                receiver.hits += 1
                self.set_status(503)
                self.finish("down for maintenance")

        sock, self.port = tornado.testing.bind_unused_port()
        self.server = tornado.httpserver.HTTPServer(tornado.web.Application([(r"/hook", Hook)]))
        self.server.add_sockets([sock])

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/hook"


@pytest.fixture
def failing_receiver(io_loop):
    receiver = FailingReceiver()
    yield receiver
    receiver.server.stop()


async def test_get_message_shows_every_documented_field(api, account):
    """docs/design.md#api-decisions: GET /v1/messages/{messageId} → {id, direction, status, body, channel, contactId,
    messageType, media, error, attempts, createdAt}."""
    key = account["api_key"]
    message_id = await inbound(api, key, channel="sms-bridge")
    r = await api.get(f"/v1/messages/{message_id}", key=key)
    assert r.code == 200
    assert set(r.json) >= MESSAGE_KEYS
    assert r.json["id"] == message_id and r.json["direction"] == "inbound" and r.json["attempts"] == []
    assert r.json["createdAt"].endswith("Z")


async def test_failed_delivery_shows_status_error_and_attempts(api, account, services, failing_receiver):
    """Spec §3: Failed when "The client's reply URL returned an error ... The error details are stored with
    the message"; docs/design.md#api-decisions: attempts [{at, httpStatus, error}]."""
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": failing_receiver.url}, key=key)
    assert r.code == 200, r.body
    sent = await api.post(SEND, {"customData": {"fromId": "reader-1", "customChannel": "chat", "body": "Hi"}},
                          key=key)
    assert sent.code == 200, sent.body
    message_id = sent.json["messageId"]
    before = (await api.get(f"/v1/messages/{message_id}", key=key)).json
    assert (before["status"], before["attempts"], before["error"]) == ("Pending", [], None)

    worker = DeliveryWorker(services)
    try:
        assert await worker.run_due(utcnow()) == 1
    finally:
        await worker.stop()
    assert failing_receiver.hits == 1
    after = (await api.get(f"/v1/messages/{message_id}", key=key)).json
    assert after["status"] == "Failed"
    assert after["error"] is not None
    [attempt] = after["attempts"]
    assert attempt["httpStatus"] == 503 and attempt["at"].endswith("Z") and attempt["error"]


async def test_unknown_or_foreign_message_is_404(api, account, other_account):
    """docs/design.md#conventions: "a test per resource proves another account's key sees nothing"."""
    message_id = await inbound(api, account["api_key"])
    for key, path in ((account["api_key"], "/v1/messages/msg_doesnotexist"),
                      (other_account["api_key"], f"/v1/messages/{message_id}")):
        r = await api.get(path, key=key)
        assert r.code == 404
        assert r.json["error"]["code"] == "NOT_FOUND"
    assert (await api.get(f"/v1/messages/{message_id}")).code == 401


async def test_contact_messages_are_paginated_oldest_first(api, account):
    """docs/design.md#api-decisions: GET /v1/contacts/{id}/messages (cursor-paginated) → {data, nextCursor}."""
    key = account["api_key"]
    ids = [await inbound(api, key, fromId="pager", body=f"m{i}") for i in range(5)]
    await inbound(api, key, fromId="someone-else")  # another contact's message is not listed
    contact_id = (await api.get(f"/v1/messages/{ids[0]}", key=key)).json["contactId"]

    seen, cursor, pages = [], None, 0
    while True:
        path = f"/v1/contacts/{contact_id}/messages?limit=2" + (f"&cursor={cursor}" if cursor else "")
        r = await api.get(path, key=key)
        assert r.code == 200, r.body
        assert set(r.json) == {"data", "nextCursor"}
        seen += [m["id"] for m in r.json["data"]]
        pages += 1
        cursor = r.json["nextCursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == sorted(ids) and set(seen) == set(ids)
    assert all(m["contactId"] == contact_id for m in r.json["data"])
    everything = (await api.get(f"/v1/contacts/{contact_id}/messages", key=key)).json
    assert [m["body"] for m in everything["data"]] == [f"m{i}" for i in range(5)] and everything["nextCursor"] is None


async def test_contact_messages_of_unknown_or_foreign_contact_is_404(api, account, other_account):
    message_id = await inbound(api, account["api_key"])
    contact_id = (await api.get(f"/v1/messages/{message_id}", key=account["api_key"])).json["contactId"]
    for key, cid in ((account["api_key"], "ct_nope"), (other_account["api_key"], contact_id)):
        r = await api.get(f"/v1/contacts/{cid}/messages", key=key)
        assert r.code == 404
        assert r.json["error"]["code"] == "CONTACT_NOT_FOUND"


@pytest.mark.parametrize("limit", ["0", "201", "ten"])
async def test_bad_limit_is_400(api, account, limit):
    message_id = await inbound(api, account["api_key"])
    contact_id = (await api.get(f"/v1/messages/{message_id}", key=account["api_key"])).json["contactId"]
    r = await api.get(f"/v1/contacts/{contact_id}/messages?limit={limit}", key=account["api_key"])
    assert r.code == 400 and r.json["error"]["code"] == "VALIDATION_ERROR"
    assert json.dumps(r.json).count("limit") >= 1


# ---- POST /v1/messages/{id}/retry (docs/design.md#api-decisions: "202, 409 CONFLICT unless Failed") ----------------

async def test_retry_sends_a_failed_reply_again(api, account, other_account, services):
    from tests.delivery_helpers import Receiver
    key = account["api_key"]
    receiver = Receiver().start()
    try:
        receiver.answers = [(410, {}, b"gone")]
        r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url}, key=key)
        assert r.code == 200
        queued = await api.post(SEND, {"customData": {"fromId": "+14155552671", "customChannel": "webchat",
                                                      "body": "Hello"}}, key=key)
        message_id = queued.json["messageId"]
        r = await api.post(f"/v1/messages/{message_id}/retry", key=key)
        assert (r.code, r.json["error"]["code"]) == (409, "CONFLICT")  # Pending: not retried
        await services.delivery.run_due()
        assert (await api.get(f"/v1/messages/{message_id}", key=key)).json["status"] == "Failed"

        for unknown in (f"/v1/messages/{message_id}/retry", "/v1/messages/msg_unknown/retry"):
            r = await api.post(unknown, key=other_account["api_key"] if message_id in unknown else key)
            assert (r.code, r.json["error"]["code"]) == (404, "NOT_FOUND")
        r = await api.post(f"/v1/messages/{message_id}/retry", key=key)
        assert r.code == 202 and r.json == {"success": True, "messageId": message_id, "status": "Pending"}
        assert (await api.get(f"/v1/messages/{message_id}", key=key)).json["status"] == "Pending"
        await services.delivery.run_due()
        message = (await api.get(f"/v1/messages/{message_id}", key=key)).json
        assert message["status"] == "Sent" and len(message["attempts"]) == 2
        r = await api.post(f"/v1/messages/{message_id}/retry", key=key)
        assert (r.code, r.json["error"]["code"]) == (409, "CONFLICT")  # Sent
        inbound_id = await inbound(api, key)
        r = await api.post(f"/v1/messages/{inbound_id}/retry", key=key)
        assert r.code == 404  # inbound messages have no delivery
        r = await api.get(f"/v1/messages/{message_id}/retry", key=key)
        assert r.code == 405 and r.headers["Allow"] == "POST"
    finally:
        await receiver.close()
