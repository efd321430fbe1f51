"""Issue 44 (for the people who build bridges), against real local HTTP receivers on both databases:
a reply that fails for good is told (message.updated with final, a message.failed notification and event,
GET /v1/messages?status=Failed&since=), replies carry what restores their order (createdAt, a per-contact
sequence) and who wrote them (author, authorUserId, accountId), and a receiver that answers again gets its
waiting retries at once rather than minutes later."""
import asyncio
import json
from datetime import timedelta

import pytest
from standardwebhooks import Webhook

from handlers.webhook_schemas import WEBHOOKS, ReplyPayload
from services import messaging
from common.ids import iso, parse_iso, utcnow
from storage.db import fetch_all
from tests.event_helpers import events_of
from tests.team_users import add_user
from tests.delivery_helpers import delivery_state, later, secret_of

pytestmark = pytest.mark.settings(webhook_timeout_seconds=1.0)  # a receiver that hangs fails in 1 s


async def send(api, key, body, from_id="user-1", channel="acme-chat"):
    r = await api.post("/v1/send_custom_channel_message",
                       {"customData": {"fromId": from_id, "customChannel": channel, "body": body}}, key=key)
    assert r.code == 200, r.body
    return r.json


def verified(services_secret, request):
    return Webhook(services_secret).verify(request["body"], request["headers"])


async def test_a_final_failure_is_told_by_event_notification_and_list(services, api, account, other_account,
                                                                      receiver, workers):
    """A 404 at the receiver is final: message.updated says Failed and final, message.failed goes to its
    notification URL (signed) and on the event stream with the same data, and GET /v1/messages?status=Failed
    lists it apart from a failure that will be retried (nextAttemptAt)."""
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url,
                                                 "notificationUrls": {"message.failed": receiver.url + "/failed"}},
                        key=key)
    assert r.code == 200, r.body
    worker = workers()
    receiver.answers = [(404, {}, b"no such hook")]
    final = await send(api, key, "during the deploy")
    now = utcnow()
    assert await worker.run_due(now) == 1
    assert await worker.run_due(utcnow()) == 1  # the message.failed notification
    receiver.answers = [(503, {}, b"busy")]
    retried = await send(api, key, "during an outage")
    assert await worker.run_due(utcnow()) == 1

    notified = [r for r in receiver.requests if r["path"] == "/hook/failed"]
    assert len(notified) == 1
    body = verified(await secret_of(services, account), notified[0])
    assert body["event"] == "message.failed" and body["accountId"] == account["account_id"]
    assert body["data"]["messageId"] == final["messageId"] and body["data"]["final"] is True
    assert body["data"]["contactId"] == final["contactId"] and body["data"]["error"]["httpStatus"] == 404
    WEBHOOKS["message.failed"][1].model_validate(body)  # as the OpenAPI document's webhooks say

    failed_events = await events_of(api, key, "message.failed")
    assert [e["data"] for e in failed_events] == [body["data"]]  # one, for the final failure only
    updates = [e["data"] for e in await events_of(api, key, "message.updated")]
    assert [(u["id"], u["final"], u["nextAttemptAt"] is None) for u in updates if u["status"] == "Failed"] == [
        (final["messageId"], True, True), (retried["messageId"], False, False)]

    r = await api.get("/v1/messages?status=Failed", key=key)
    assert r.code == 200, r.body
    listed = {m["id"]: m for m in r.json["data"]}
    assert set(listed) == {final["messageId"], retried["messageId"]}
    assert listed[final["messageId"]]["final"] is True and listed[final["messageId"]]["nextAttemptAt"] is None
    assert listed[retried["messageId"]]["final"] is False
    assert listed[retried["messageId"]]["nextAttemptAt"] == listed[retried["messageId"]]["error"]["nextAttemptAt"]
    since = listed[retried["messageId"]]["error"]["at"]
    r = await api.get(f"/v1/messages?status=Failed&since={since}", key=key)
    assert [m["id"] for m in r.json["data"]] == [retried["messageId"]]

    # Another account's key sees none of it.
    r = await api.get("/v1/messages?status=Failed", key=other_account["api_key"])
    assert r.code == 200 and r.json["data"] == []
    assert await events_of(api, other_account["api_key"], "message.failed") == []


async def test_failed_messages_page_by_cursor_in_the_order_they_failed(services, api, account, receiver, workers):
    key = account["api_key"]
    assert (await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url}, key=key)).code == 200
    worker = workers()
    ids = []
    for n in range(5):
        receiver.answers = [(401, {}, b"stale secret")]
        ids.append((await send(api, key, f"reply {n}"))["messageId"])
        assert await worker.run_due(later(utcnow(), n)) == 1
    seen, cursor = [], None
    while True:
        r = await api.get("/v1/messages?status=Failed&limit=2" + (f"&cursor={cursor}" if cursor else ""), key=key)
        assert r.code == 200, r.body
        seen += [m["id"] for m in r.json["data"]]
        cursor = r.json["nextCursor"]
        if cursor is None:
            break
    assert seen == ids


async def test_bad_list_parameters_are_400_naming_the_field(api, account):
    key = account["api_key"]
    for query, field in (("status=failed", "status"), ("", "status"), ("status=Failed&since=yesterday", "since"),
                         ("status=Failed&since=2026-01-01T00:00:00", "since"), ("status=Failed&limit=0", "limit"),
                         ("status=Failed&cursor=nope", "cursor")):
        r = await api.get(f"/v1/messages?{query}", key=key)
        assert r.code == 400, (query, r.body)
        assert field in r.json["error"]["message"], (query, r.json)


async def test_replies_carry_created_at_a_per_contact_sequence_author_and_account(services, api, account, receiver,
                                                                                  workers):
    """Each reply payload: createdAt (the message's), sequence (1, 2, 3 ... per contact, whoever wrote it),
    author (bot, user, api, campaign), authorUserId only for a person, accountId; the spec's six fields stay
    and the signature still verifies with standardwebhooks."""
    key = account["api_key"]
    assert (await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url}, key=key)).code == 200
    first = await send(api, key, "one", from_id="user-1")
    await send(api, key, "other contact", from_id="user-2")
    contact_id = first["contactId"]
    user_id = await add_user(services, account["account_id"], "agent@example.com")
    await messaging.send_reply(services, account["account_id"], contact_id, "two", author="user",
                               author_user_id=user_id)
    await messaging.send_reply(services, account["account_id"], contact_id, "three", author="bot")
    while await workers().run_due(utcnow()):
        pass
    secret = await secret_of(services, account)
    payloads = [verified(secret, r) for r in receiver.requests]
    by_body = {p["body"]: p for p in payloads}
    assert [by_body[b]["sequence"] for b in ("one", "two", "three")] == [1, 2, 3]
    assert by_body["other contact"]["sequence"] == 1
    assert [by_body[b]["author"] for b in ("one", "two", "three")] == ["api", "user", "bot"]
    assert by_body["two"]["authorUserId"] == user_id
    assert "authorUserId" not in by_body["one"] and "authorUserId" not in by_body["three"]
    for payload in payloads:
        ReplyPayload.model_validate(payload)  # as the OpenAPI document's webhooks say
        assert set(ReplyPayload.model_fields) >= set(payload)  # every field sent is documented
        assert payload["accountId"] == account["account_id"]
        assert {"contactId", "messageId", "userId", "body", "toId", "channel"} <= set(payload)
        r = await api.get(f"/v1/messages/{payload['messageId']}", key=key)
        assert payload["createdAt"] == r.json["createdAt"]


async def test_concurrent_replies_to_one_contact_get_distinct_sequences(services, api, account, receiver, workers):
    key = account["api_key"]
    assert (await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url}, key=key)).code == 200
    await asyncio.gather(*(send(api, key, f"reply {n}") for n in range(12)))
    rows = await services.db.read(fetch_all, "SELECT payload FROM outbox WHERE account_id = ? AND kind = 'reply'",
                                  (account["account_id"],))
    assert sorted(json.loads(r["payload"])["sequence"] for r in rows) == list(range(1, 13))


async def test_a_receiver_that_answers_again_gets_its_waiting_retries_at_once(services, api, account, receiver,
                                                                             workers):
    """A reply that failed twice waits 5 minutes for its next try; when another reply to the same URL is
    delivered, the waiting one is due at once (and its message says so), not 5 minutes later."""
    key = account["api_key"]
    assert (await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url}, key=key)).code == 200
    worker = workers()
    receiver.answers = [(503, {}, b"down"), (503, {}, b"down")]
    waiting = await send(api, key, "first")
    now = utcnow()
    assert await worker.run_due(now) == 1
    assert await worker.run_due(later(now, 10)) == 1
    message, outbox, _ = await delivery_state(services, account, waiting["messageId"])
    assert parse_iso(outbox["next_attempt_at"]) > later(now, 250)  # 5 minutes away
    await send(api, key, "second")
    assert await worker.run_due(later(now, 20)) == 1  # the second reply, delivered: the receiver is back
    message, outbox, _ = await delivery_state(services, account, waiting["messageId"])
    assert outbox["next_attempt_at"] == iso(later(now, 20)) == message["error"]["nextAttemptAt"]
    assert await worker.run_due(later(now, 21)) == 1
    message, outbox, _ = await delivery_state(services, account, waiting["messageId"])
    assert message["status"] == "Sent" and outbox["attempts"] == 3
    assert [verified(await secret_of(services, account), r)["body"] for r in receiver.requests] == [
        "first", "first", "second", "first"]


async def test_a_campaigns_waiting_deliveries_keep_their_schedule(services, api, account, receiver, workers):
    """Only the account's replies and notifications are brought forward: rows not yet tried (attempts 0) or
    being tried are not touched, and the rows of another account neither."""
    key = account["api_key"]
    assert (await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url}, key=key)).code == 200
    worker = workers()
    receiver.answers = [(503, {}, b"down")] * 2
    waiting = await send(api, key, "first")
    now = utcnow()
    assert await worker.run_due(now) == 1
    assert await worker.run_due(later(now, 10)) == 1
    before = (await delivery_state(services, account, waiting["messageId"]))[1]["next_attempt_at"]
    receiver.answers = [(500, {}, b"still down")]
    await send(api, key, "second")
    await worker.run_due(later(now, 20))  # failed: nothing is brought forward
    assert (await delivery_state(services, account, waiting["messageId"]))[1]["next_attempt_at"] == before
    assert before > iso(later(now, 20)) and timedelta(0) < parse_iso(before) - later(now, 20)
