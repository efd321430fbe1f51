"""Idempotency-Key on every mutating POST (docs/design.md#api-decisions "Idempotency (all mutating POSTs)"): "first answer
replayed for 24 h with Idempotent-Replayed: true, other parameters -> 422 IDEMPOTENCY_KEY_REUSED", per
calling account, stored in the transaction of the write it protects -- so exactly-once holds when the
writer dies after COMMIT too."""
import asyncio
import json

import pytest
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from handlers import routes
from handlers.base import ApiHandler
from handlers.openapi import build_document, implemented_methods, path_template
from common.errors import Conflict
from services import accounts, idempotency
from services import bot as bot_module
from storage import delivery as delivery_store
from storage.db import reads

INBOUND = "/v1/incoming_custom_channel_message"
SEND = "/v1/send_custom_channel_message"
KEY = "Idempotency-Key"
_n = iter(range(1, 1_000_000))


@reads
def _count(cx, sql, *params):
    return cx.execute(sql, params).fetchone()[0]


class World:
    """What the examples need: a standard account with a webhook URL, one contact and one list of it,
    an agency with a sub-account."""

    def __init__(self, api, services, account, agency, sub):
        self.api, self.services, self.account, self.agency, self.sub = api, services, account, agency, sub
        self.key = account["api_key"]

    async def setup(self):
        r = await self.api.patch("/v1/account/settings", {"customChannelWebhookUrl": "http://127.0.0.1:9/hook",
                                                          "notificationUrls": {"contact.updated": "http://127.0.0.1:9/n"}},
                                 key=self.key)
        assert r.code == 200, r.body
        self.contact = (await self.api.post("/v1/contacts", {"email": "member@example.com"}, key=self.key)).json
        self.list = (await self.api.post("/v1/lists", {"name": "Members"}, key=self.key)).json
        self.campaign = (await self.api.post("/v1/campaigns", {"name": "Later", "listId": self.list["id"], "body": "Hi",
                                                                "startAt": "2099-01-01T00:00:00Z"}, key=self.key)).json
        self.draft = (await self.api.post("/v1/campaigns", {"name": "Draft", "listId": self.list["id"], "body": "Hi",
                                                             "draft": True}, key=self.key)).json
        self.member = (await self.api.post("/v1/users", {"email": "member@acme.example", "role": "agent"},
                                           key=self.key)).json
        self.failed_message = (await self.api.post(SEND, _send("Will fail"), key=self.key)).json["messageId"]
        self.canned = (await self.api.post("/v1/canned-replies", {"code": "thanks", "body": "Thanks!"},
                                           key=self.key)).json
        self.note = (await self.api.post(f"/v1/conversations/{self.contact['id']}/notes", {"body": "Seen"},
                                         key=self.key)).json
        self.spare_key = (await self.api.post("/v1/account/api-keys", {"name": "Spare"}, key=self.key)).json
        self.duplicate = (await self.api.post("/v1/contacts", {"phone": "+14155550100"}, key=self.key)).json
        row = await delivery_store.get_outbox_for_message(self.services.db, self.account["account_id"],
                                                          self.failed_message)
        await delivery_store.record_attempt(  # a final failure: what the inbox's Retry is for
            self.services.db, row, {"at": row["created_at"], "http_status": 410, "error": "HTTP 410 Gone",
                                    "response_excerpt": None, "duration_ms": 1},
            status="failed", next_attempt_at=None, error={"at": row["created_at"], "httpStatus": 410,
                                                          "error": "HTTP 410 Gone", "nextAttemptAt": None})
        self.conversation = (await self.api.get(f"/v1/messages/{self.failed_message}", key=self.key)).json["contactId"]
        return self

    def count(self, sql, *params):
        return _count(self.services.db, sql, *params)


def _inbound(sid, body="Hello"):
    return {"customData": {"messageSid": sid, "fromId": "idem-user", "toId": "shop", "body": body}}


def _send(body):
    return {"customData": {"fromId": "idem-user", "customChannel": "webchat", "body": body}}


# One example per idempotent operation: (path, body, other body, the effect (an async callable whose value
# a write changes), whose key: the standard account's or the agency's).
# A new POST endpoint fails test_every_idempotent_operation_replays_its_first_answer until it has one.
EXAMPLES = {
    ("/v1/contacts", "post"): lambda w, n: (
        "/v1/contacts", {"phone": f"+1415555{n:04d}"}, {"phone": f"+1415556{n:04d}"},
        lambda: w.count("SELECT COUNT(*) FROM contacts WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/lists", "post"): lambda w, n: (
        "/v1/lists", {"name": f"List {n}"}, {"name": f"Other {n}"},
        lambda: w.count("SELECT COUNT(*) FROM lists WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/lists/{listId}/contacts", "post"): lambda w, n: (
        f"/v1/lists/{w.list['id']}/contacts", {"contactId": w.contact["id"]}, {"contactId": "ct_other"},
        lambda: w.count("SELECT contact_count FROM lists WHERE id = ?", w.list["id"]), "standard"),
    ("/v1/contacts/{contactId}", "patch"): lambda w, n: (
        f"/v1/contacts/{w.contact['id']}", {"firstName": f"Name {n}"}, {"firstName": f"Other {n}"},
        lambda: w.count("SELECT COUNT(*) FROM outbox WHERE account_id = ? AND event_type = 'contact.updated'",
                        w.account["account_id"]), "standard"),
    ("/v1/contacts/{contactId}", "delete"): lambda w, n: (
        f"/v1/contacts/{w.contact['id']}", None, None,
        lambda: w.count("SELECT COUNT(*) FROM contacts WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/conversations/{conversationId}", "patch"): lambda w, n: (
        f"/v1/conversations/{w.conversation}", {"status": "resolved"}, {"status": "pending"},
        lambda: w.count("SELECT status FROM conversations WHERE contact_id = ?", w.conversation), "standard"),
    ("/v1/conversations/bulk", "post"): lambda w, n: (
        "/v1/conversations/bulk", {"conversationIds": [w.conversation], "status": "resolved"},
        {"conversationIds": [w.conversation], "status": "pending"},
        lambda: w.count("SELECT status FROM conversations WHERE contact_id = ?", w.conversation), "standard"),
    ("/v1/lists/{listId}", "patch"): lambda w, n: (
        f"/v1/lists/{w.list['id']}", {"name": f"Renamed {n}"}, {"name": f"Other {n}"},
        lambda: w.count("SELECT name FROM lists WHERE id = ?", w.list["id"]), "standard"),
    ("/v1/incoming_custom_channel_message", "post"): lambda w, n: (
        INBOUND, _inbound(f"idem-{n}"), _inbound(f"idem-{n}", "Other"),
        lambda: w.count("SELECT COUNT(*) FROM messages WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/incomingCustomChannelMessage", "post"): lambda w, n: (
        "/incomingCustomChannelMessage", _inbound(f"idem-{n}"), _inbound(f"other-{n}"),
        lambda: w.count("SELECT COUNT(*) FROM messages WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/send_custom_channel_message", "post"): lambda w, n: (
        SEND, _send(f"Reply {n}"), _send(f"Other {n}"),
        lambda: w.count("SELECT COUNT(*) FROM messages WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/sendCustomChannelMessage", "post"): lambda w, n: (
        "/v1/sendCustomChannelMessage", _send(f"Reply {n}"), _send(f"Other {n}"),
        lambda: w.count("SELECT COUNT(*) FROM messages WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/account/webhook-secret/rotate", "post"): lambda w, n: (
        "/v1/account/webhook-secret/rotate", None, None,
        lambda: w.count("SELECT webhook_secret FROM accounts WHERE id = ?", w.account["account_id"]), "standard"),
    ("/v1/campaigns", "post"): lambda w, n: (
        "/v1/campaigns", {"name": f"Campaign {n}", "listId": w.list["id"], "body": "Hi {{firstName}}",
                          "startAt": "2099-01-01T00:00:00Z"},
        {"name": f"Other {n}", "listId": w.list["id"], "body": "Hi", "startAt": "2099-01-01T00:00:00Z"},
        lambda: w.count("SELECT COUNT(*) FROM campaigns WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/campaigns/{campaignId}/{action}", "post"): lambda w, n: (
        f"/v1/campaigns/{w.campaign['id']}/cancel", None, None,
        lambda: w.count("SELECT status FROM campaigns WHERE id = ?", w.campaign["id"]), "standard"),
    ("/v1/campaigns/{campaignId}/start", "post"): lambda w, n: (
        f"/v1/campaigns/{w.draft['id']}/start", {"startAt": "2098-01-01T00:00:00Z"}, {"startAt": "2097-01-01T00:00:00Z"},
        lambda: w.count("SELECT status FROM campaigns WHERE id = ?", w.draft["id"]), "standard"),
    ("/v1/campaigns/{campaignId}/test", "post"): lambda w, n: (
        f"/v1/campaigns/{w.campaign['id']}/test", {"contactId": w.contact["id"]}, {"contactId": "ct_other"},
        lambda: w.count("SELECT COUNT(*) FROM messages WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/messages/{messageId}/retry", "post"): lambda w, n: (
        f"/v1/messages/{w.failed_message}/retry", None, None,
        lambda: w.count("SELECT status FROM messages WHERE id = ?", w.failed_message), "standard"),
    ("/v1/canned-replies", "post"): lambda w, n: (
        "/v1/canned-replies", {"code": f"c{n}", "body": "Hi {{firstName}}"}, {"code": f"o{n}", "body": "Hi"},
        lambda: w.count("SELECT COUNT(*) FROM canned_replies WHERE account_id = ?", w.account["account_id"]),
        "standard"),
    ("/v1/canned-replies/{cannedReplyId}", "patch"): lambda w, n: (
        f"/v1/canned-replies/{w.canned['id']}", {"body": f"Thanks {n}"}, {"body": f"Other {n}"},
        lambda: w.count("SELECT body FROM canned_replies WHERE id = ?", w.canned["id"]), "standard"),
    ("/v1/canned-replies/{cannedReplyId}", "delete"): lambda w, n: (
        f"/v1/canned-replies/{w.canned['id']}", None, None,
        lambda: w.count("SELECT COUNT(*) FROM canned_replies WHERE id = ?", w.canned["id"]), "standard"),
    ("/v1/conversations/{contactId}/notes", "post"): lambda w, n: (
        f"/v1/conversations/{w.contact['id']}/notes", {"body": f"Note {n}"}, {"body": f"Other {n}"},
        lambda: w.count("SELECT COUNT(*) FROM notes WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/conversations/{contactId}/notes/{noteId}", "delete"): lambda w, n: (
        f"/v1/conversations/{w.contact['id']}/notes/{w.note['id']}", None, None,
        lambda: w.count("SELECT COUNT(*) FROM notes WHERE id = ?", w.note["id"]), "standard"),
    ("/v1/account/api-keys", "post"): lambda w, n: (
        "/v1/account/api-keys", {"name": f"Key {n}"}, {"name": f"Other {n}"},
        lambda: w.count("SELECT COUNT(*) FROM api_keys WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/account/api-keys/{keyId}", "delete"): lambda w, n: (
        f"/v1/account/api-keys/{w.spare_key['id']}", None, None,
        lambda: w.count("SELECT COUNT(*) FROM api_keys WHERE id = ?", w.spare_key["id"]), "standard"),
    ("/v1/subaccounts", "post"): lambda w, n: (
        "/v1/subaccounts", {"name": f"Client {n}", "email": f"client{n}@example.com"},
        {"name": f"Client {n}", "email": f"other{n}@example.com"},
        lambda: w.count("SELECT COUNT(*) FROM accounts WHERE parent_agency_id = ?", w.agency["account_id"]), "agency"),
    ("/v1/subaccounts/credits", "post"): lambda w, n: (
        "/v1/subaccounts/credits", {"email": w.sub["email"], "amount": 5}, {"email": w.sub["email"], "amount": 6},
        lambda: w.count("SELECT credit_hundredths FROM accounts WHERE id = ?", w.sub["account_id"]), "agency"),
    ("/v1/users", "post"): lambda w, n: (
        "/v1/users", {"email": f"user{n}@acme.example", "role": "agent"}, {"email": f"other{n}@acme.example",
                                                                           "role": "agent"},
        lambda: w.count("SELECT COUNT(*) FROM users WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/account/widget/identity-secret", "post"): lambda w, n: (
        "/v1/account/widget/identity-secret", None, None,
        lambda: w.count("SELECT MAX(identity_secret) FROM widgets WHERE account_id = ?", w.account["account_id"]),
        "standard"),
    ("/v1/contacts/{contactId}/merge", "post"): lambda w, n: (
        f"/v1/contacts/{w.contact['id']}/merge", {"otherId": w.duplicate["id"]}, {"otherId": "ct_other"},
        lambda: w.count("SELECT COUNT(*) FROM contacts WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/contacts/{contactId}/messages", "post"): lambda w, n: (
        f"/v1/contacts/{w.conversation}/messages", {"body": f"Reply {n}", "channel": "webchat"},
        {"body": f"Other {n}", "channel": "webchat"},
        lambda: w.count("SELECT COUNT(*) FROM messages WHERE account_id = ?", w.account["account_id"]), "standard"),
    ("/v1/users/{userId}", "patch"): lambda w, n: (
        f"/v1/users/{w.member['id']}", {"name": f"Name {n}"}, {"name": f"Other {n}"},
        lambda: w.count("SELECT name FROM users WHERE id = ?", w.member["id"]), "standard"),
}


# POSTs that write nothing: they need no example. The bot's dry run; a campaign's preview; Send test event, which stores nothing
# (outside the outbox) and whose answer is what the receiver does now: a retry that sends one more ping is
# what a client asks for, a replayed answer would report a receiver's state that may since have changed.
READ_ONLY_POSTS = {"/v1/bot/test", "/v1/account/webhook-test", "/v1/account/email/test",
                   "/v1/campaigns/{campaignId}/preview"}
# The chat widget's visitors (no API key, so no account's key space to claim a key in): their frame sends each
# message once and shows a failed send for the visitor to send again.
VISITOR_POSTS = {"/widget/{widgetId}/messages", "/widget/{widgetId}/identify", "/widget/{widgetId}/email",
                 "/widget/{widgetId}/csat"}


def idempotent_operations():
    """(path template, method, handler) of every API operation whose method is @idempotent."""
    found = []
    for pattern, handler, *_ in routes():
        if issubclass(handler, ApiHandler):
            for method in implemented_methods(handler):
                if getattr(getattr(handler, method), "idempotent", False):
                    found.append((path_template(pattern, handler)[0], method, handler))
    return found


def test_every_mutating_post_takes_an_idempotency_key_and_the_document_says_so():
    """docs/design.md#api-decisions: "Every POST of the API accepts an optional Idempotency-Key header"; the OpenAPI document
    shows the header, the 422 and Idempotent-Replayed on each. (PATCH /v1/account/settings does not take
    one: it sets absolute values, so repeating it is already harmless; see docs/api.md.)"""
    posts = {(path_template(p, h)[0], "post") for p, h, *_ in routes()
             if issubclass(h, ApiHandler) and "post" in implemented_methods(h)}
    assert posts and posts == {(path, method) for path, method, _ in idempotent_operations() if method == "post"} | {
        (path, "post") for path in READ_ONLY_POSTS | VISITOR_POSTS}
    document = build_document(routes())
    for path, method, _ in idempotent_operations():
        operation = document["paths"][path][method]
        assert {"name": KEY, "in": "header"}.items() <= next(
            p for p in operation["parameters"] if p["name"] == KEY).items()
        assert "422" in operation["responses"]
        success = next(s for s in operation["responses"] if s.startswith("2"))
        assert "Idempotent-Replayed" in operation["responses"][success]["headers"]
    assert "parameters" not in document["paths"]["/v1/account/settings"]["patch"]


@pytest.fixture
def world(io_loop, api, services, account, agency, sub):
    return io_loop.run_sync(World(api, services, account, agency, sub).setup)


async def _post(w, path, body, key, auth, method="post"):
    headers = {KEY: key} if key is not None else {}
    api_key = w.key if auth == "standard" else w.agency["api_key"]
    call = getattr(w.api, method)
    if body is None:
        return await call(path, key=api_key, headers=headers, query_key=auth == "standard")
    return await call(path, body, key=api_key, headers=headers, query_key=auth == "standard")


@pytest.mark.parametrize("path,method", [(p, m) for p, m, _ in idempotent_operations() if p not in READ_ONLY_POSTS])
async def test_every_idempotent_operation_replays_its_first_answer(world, path, method):
    """For every POST: the same key and parameters again -> the first answer (status and body) with
    Idempotent-Replayed: true, and the effect happened once; the same key with other parameters -> 422
    IDEMPOTENCY_KEY_REUSED, nothing written."""
    assert (path, method) in EXAMPLES, f"add an example for {method.upper()} {path} to EXAMPLES"
    target, body, other, effect, auth = EXAMPLES[(path, method)](world, next(_n))
    before = await effect()
    key = f"key-{next(_n)}"
    first = await _post(world, target, body, key, auth, method)
    assert 200 <= first.code < 300, first.body
    assert "Idempotent-Replayed" not in first.headers
    after = await effect()
    assert after != before
    again = await _post(world, target, body, key, auth, method)
    assert (again.code, again.json) == (first.code, first.json)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert await effect() == after
    if target.endswith("/rotate"):  # the replayed secret is the one that signs
        live = await world.api.get("/v1/account/webhook-secret", key=world.key)
        assert live.json["secret"] == first.json["secret"]
    if target == "/v1/account/api-keys":  # the key shown once, shown again to the retry, is the live one
        assert (await world.api.get("/v1/account", key=first.json["key"])).code == 200
    if target == "/v1/subaccounts":  # the key shown once, shown again to the retry, is the live one
        assert (await world.api.get("/v1/account", key=first.json["apiKey"])).json["id"] == first.json["id"]
    if other is not None:
        reused = await _post(world, target, other, key, auth, method)
        assert reused.code == 422, reused.body
        error = reused.json["error"]
        assert "Idempotency-Key" in (error if isinstance(error, str) else error["message"])
        assert isinstance(error, str) or error["code"] == "IDEMPOTENCY_KEY_REUSED"
        assert await effect() == after


async def test_a_repeat_without_a_key_is_not_a_replay(world):
    """Without the header nothing is remembered: a second POST /v1/lists of the same name is the 409 of a
    taken name (list names are unique), and a repeated membership answers added: false (a replay answers
    the first answer, added: true)."""
    lists_before = await world.count("SELECT COUNT(*) FROM lists WHERE account_id = ?", world.account["account_id"])
    assert [(await world.api.post("/v1/lists", {"name": "Twice"}, key=world.key)).code for _ in range(2)] == [201, 409]
    assert await world.count("SELECT COUNT(*) FROM lists WHERE account_id = ?",
                             world.account["account_id"]) == lists_before + 1
    path = f"/v1/lists/{world.list['id']}/contacts"
    first = await world.api.post(path, {"contactId": world.contact["id"]}, key=world.key, headers={KEY: "m1"})
    assert first.json["added"] is True
    replay = await world.api.post(path, {"contactId": world.contact["id"]}, key=world.key, headers={KEY: "m1"})
    assert replay.json["added"] is True and replay.headers["Idempotent-Replayed"] == "true"
    plain = await world.api.post(path, {"contactId": world.contact["id"]}, key=world.key)
    assert plain.json["added"] is False and "Idempotent-Replayed" not in plain.headers


async def test_keys_are_per_account_and_checked(world, other_account):
    """A key belongs to the calling account: another account's identical key is its own. A malformed
    key is 400 naming the header, in each endpoint's error shape, and writes nothing."""
    a = await world.api.post("/v1/lists", {"name": "Mine"}, key=world.key, headers={KEY: "shared"})
    b = await world.api.post("/v1/lists", {"name": "Theirs"}, key=other_account["api_key"], headers={KEY: "shared"})
    assert a.code == b.code == 201 and a.json["id"] != b.json["id"] and "Idempotent-Replayed" not in b.headers
    lists = await world.count("SELECT COUNT(*) FROM lists")
    for bad in ("x" * 256, "tab\there", "é-key"):
        r = await world.api.post("/v1/lists", {"name": "Bad key"}, key=world.key, headers={KEY: bad})
        assert r.code == 400 and "Idempotency-Key" in r.json["error"]["message"], (bad, r.body)
        r = await world.api.post(INBOUND, _inbound("bad-key"), key=world.key, headers={KEY: bad})
        assert r.code == 400 and "Idempotency-Key" in r.json["error"], (bad, r.body)
    assert await world.count("SELECT COUNT(*) FROM lists") == lists


async def test_failures_are_not_remembered(world):
    """A request that failed wrote nothing, its key included: the corrected request with the same key
    is performed (spec errors are answers to fix, not results to replay)."""
    path = f"/v1/lists/{world.list['id']}/contacts"
    r = await world.api.post(path, {"contactId": "ct_missing"}, key=world.key, headers={KEY: "fix-me"})
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND"
    other = (await world.api.post("/v1/contacts", {"email": "later@example.com"}, key=world.key)).json
    r = await world.api.post(path, {"contactId": other["id"]}, key=world.key, headers={KEY: "fix-me"})
    assert r.code == 200 and r.json["added"] is True and "Idempotent-Replayed" not in r.headers


async def test_the_same_key_sent_concurrently_has_one_effect_and_one_answer(world, http_server_client):
    """Twenty identical sends with one key at the same moment: one message, one delivery queued, and
    every caller gets the same answer (the single writer serializes the key's check and insert)."""
    account_id = world.account["account_id"]
    before = await world.count("SELECT COUNT(*) FROM messages WHERE account_id = ?", account_id)
    client = SimpleAsyncHTTPClient(force_instance=True, max_clients=32)
    try:
        responses = await asyncio.gather(*(client.fetch(
            http_server_client.get_url(f"{SEND}?apiKey={world.key}"), method="POST", raise_error=False,
            headers={"Content-Type": "application/json", KEY: "race"}, body=json.dumps(_send("Only once")))
            for _ in range(20)))
    finally:
        client.close()
    assert [r.code for r in responses] == [200] * 20
    assert len({r.body for r in responses}) == 1
    assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in responses) == 19
    assert await world.count("SELECT COUNT(*) FROM messages WHERE account_id = ?", account_id) == before + 1
    message_id = json.loads(responses[0].body)["messageId"]
    assert await world.count("SELECT COUNT(*) FROM outbox WHERE message_id = ?", message_id) == 1


async def test_a_replayed_inbound_message_is_not_handed_to_the_bot_again(world, monkeypatch):
    """The bot runs after a new inbound message's 200; the replay of that request is the same message,
    so the bot is not run again (also when the key's replay arrives while the first is answered)."""
    calls = []

    async def record(services, message, context):
        calls.append(message["id"])
    monkeypatch.setattr(bot_module, "on_inbound_message", record)
    await accounts.update_settings(world.services.db, world.account["account_id"], {"bot": {"active": True}},
                                   box=world.services.box)
    first = await world.api.post(INBOUND, _inbound("bot-once"), key=world.key, headers={KEY: "b1"})
    await _until(lambda: calls)  # the bot runs as a task spawned before the answer is sent
    again = await world.api.post(INBOUND, _inbound("bot-once"), key=world.key, headers={KEY: "b1"})
    assert first.json == again.json and again.headers["Idempotent-Replayed"] == "true"
    # A task the replay spawned would start before the next message's (the bot takes them in order).
    sentinel = await world.api.post(INBOUND, _inbound("bot-after"), key=world.key)
    await world.services.bot.idle()
    assert calls == [first.json["messageId"], sentinel.json["messageId"]]


async def _until(predicate, timeout=10):
    """Wait until predicate() is true; a deadline against hanging, not a timing assertion."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def test_a_key_is_remembered_for_24_hours(world):
    """docs/design.md#api-decisions: "first answer replayed for 24 h"; after that the key is new again (an injected clock)."""
    from common.ids import utcnow
    from datetime import timedelta
    from services import lists

    async def create_at(when, name="Timed"):
        async def fingerprint():
            return idempotency.fingerprint({"name": name})
        with idempotency.claim(world.account["account_id"], "timed", fingerprint, now=when) as claim:
            created = await lists.create_list(world.services.db, world.account["account_id"], name)
        return created, claim.replayed

    now = utcnow()
    first, replayed = await create_at(now)
    assert not replayed
    assert await create_at(now + timedelta(hours=23, minutes=59)) == (first, True)
    with pytest.raises(Conflict):  # a new attempt, not a replay: the name is taken (by the first)
        await create_at(now + timedelta(hours=24, minutes=1))


@pytest.mark.sqlite_only("EXPLAIN QUERY PLAN is SQLite's planner")
def test_keys_are_looked_up_by_their_primary_key(services, account):
    """The key's check in the write is one primary-key search, never a scan (EXPLAIN QUERY PLAN)."""
    cx = services.db.connect_sync()
    try:
        plan = [row[3] for row in cx.execute(
            "EXPLAIN QUERY PLAN SELECT request_hash, result, created_at FROM idempotency_keys"
            " WHERE account_id = ? AND key = ? AND created_at >= ?", ("a", "k", "t"))]
    finally:
        cx.close()
    assert plan and all("USING INDEX sqlite_autoindex_idempotency_keys_1" in step for step in plan), plan


# ---- the writer dies after COMMIT, before its answer (issue 9) ----------------------------------

@pytest.fixture
def writer_fault(request, monkeypatch):
    """PARLEY_WRITER_FAULT for the writer the services fixture starts (request this fixture first)."""
    monkeypatch.setenv("PARLEY_WRITER_FAULT", "kill-after-commit:" + request.param)
    return request.param


@pytest.mark.parametrize("writer_fault", ["storage.idempotency.run_claimed"], indirect=True)
async def test_a_keyed_write_whose_writer_died_after_commit_is_answered_and_never_doubled(writer_fault, api,
                                                                                         account, services):
    """The writer dies after every keyed write's COMMIT, before answering. The client still gets the
    real first answer (the key's row, committed with the write, holds it), and its retry with the same
    key gets it again, with nothing created twice."""
    key = account["api_key"]
    first = await api.post("/v1/lists", {"name": "Survives"}, key=key, headers={KEY: "k-crash"})
    assert first.code == 201, first.body
    again = await api.post("/v1/lists", {"name": "Survives"}, key=key, headers={KEY: "k-crash"})
    assert (again.code, again.json) == (201, first.json) and again.headers["Idempotent-Replayed"] == "true"
    assert await _count(services.db, "SELECT COUNT(*) FROM lists WHERE name = 'Survives'") == 1


@pytest.mark.sqlite_only("the SQLite writer process dies after its COMMIT")
@pytest.mark.parametrize("writer_fault", ["storage.lists.insert_list"], indirect=True)
async def test_a_write_without_a_key_whose_writer_died_after_commit_says_it_is_stored(writer_fault, api,
                                                                                      account, services):
    """Without a key (and nothing to re-read the answer from) the 503 says the write IS stored, so the
    client does not repeat it blindly."""
    r = await api.post("/v1/lists", {"name": "Stored"}, key=account["api_key"])
    assert r.code == 503 and r.json["error"]["code"] == "UNAVAILABLE"
    assert "stored" in r.json["error"]["message"] and "nothing was written" not in r.json["error"]["message"]
    assert await _count(services.db, "SELECT COUNT(*) FROM lists WHERE name = 'Stored'") == 1


@pytest.mark.parametrize("writer_fault", ["storage.inbound.record_inbound"], indirect=True)
async def test_an_inbound_message_whose_writer_died_after_commit_is_answered_from_the_stored_message(
        writer_fault, api, account, services, monkeypatch):
    """The inbound endpoint re-reads its answer by messageSid: a 200 with the stored messageId, and the
    bot is handed the new message once."""
    calls = []

    async def record(services, message, context):
        calls.append(message["id"])
    monkeypatch.setattr(bot_module, "on_inbound_message", record)
    await accounts.update_settings(services.db, account["account_id"], {"bot": {"active": True}}, box=services.box)
    r = await api.post(INBOUND, _inbound("crash-1"), key=account["api_key"])
    assert r.code == 200, r.body
    assert await _count(services.db, "SELECT COUNT(*) FROM messages WHERE id = ?", r.json["messageId"]) == 1
    await _until(lambda: calls)
    assert calls == [r.json["messageId"]]


@pytest.mark.parametrize("writer_fault", ["storage.accounts.replace_api_key"], indirect=True)
async def test_a_key_rotation_whose_writer_died_after_commit_still_shows_the_new_key(writer_fault, services,
                                                                                     account):
    """The UI's Generate (and rotate-key): the old key is dead from the commit, so the new one must be
    shown even though the writer died before answering."""
    new_key = await accounts.rotate_key(services.db, services.keys, account["account_id"])
    from services.keys import hash_api_key
    assert (await services.keys.principal_for(hash_api_key(new_key))).account_id == account["account_id"]

