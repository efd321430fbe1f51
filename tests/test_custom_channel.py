"""Custom-channel endpoints: inbound messages (docs/api.md#custom-channel), the fromId -> contact mapping (docs/api.md#custom-channel
rule 3, docs/design.md#api-decisions) and outbound messages queued for delivery (docs/api.md#custom-channel, docs/design.md#api-decisions)."""
import asyncio
import json

import pytest
import tornado.simple_httpclient

from services import accounts, messaging
from services import bot as bot_module
from common.errors import Invalid, NotFound
from storage import contacts as contact_store
from storage import messages as message_store
from storage import outbox as outbox_store
from storage.db import reads
from tests.api_helpers import get_message, inbound_body, post_inbound

INBOUND = "/v1/incoming_custom_channel_message"
INBOUND_ALIAS = "/incomingCustomChannelMessage"
SEND = "/v1/send_custom_channel_message"
SEND_ALIAS = "/v1/sendCustomChannelMessage"


@pytest.fixture
def other_account(make_account):
    return make_account()


@reads
def _count(cx, table, account_id):
    return cx.execute(f"SELECT COUNT(*) FROM {table} WHERE account_id = ?", (account_id,)).fetchone()[0]


async def set_webhook(api, key, url="http://127.0.0.1:9/replies"):
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": url}, key=key)
    assert r.code == 200, r.body


# ---- inbound: success ------------------------------------------------------------------------

async def test_inbound_stores_message_with_defaults(api, account, services):
    """Spec §4.4: "Response body on success: success (boolean, true) and messageId (string)";
    customData.status "Defaults to "received""; messageType "Omit for text"."""
    key = account["api_key"]
    r = await post_inbound(api, key, channel="webchat", campaignId="spring")
    assert r.code == 200, r.body
    assert r.json["success"] is True and r.json["messageId"].startswith("msg_")
    m = await get_message(api, key, r.json["messageId"])
    assert (m["direction"], m["status"], m["body"], m["channel"], m["messageType"], m["campaignId"]) == \
        ("inbound", "received", "Hello", "webchat", "text", "spring")
    assert (m["fromId"], m["toId"], m["media"], m["error"], m["attempts"]) == ("user-1", "business-1", None, None, [])


async def test_inbound_keeps_given_status_and_reaction_type(api, account):
    """Spec §4.4: customData.status is stored when given; messageType "reaction" marks an emoji reaction."""
    key = account["api_key"]
    r = await post_inbound(api, key, message_type="reaction", body="👍", status="delivered")
    assert r.code == 200, r.body
    m = await get_message(api, key, r.json["messageId"])
    assert (m["messageType"], m["status"], m["body"]) == ("reaction", "delivered", "👍")
    r = await post_inbound(api, key, message_type="text")
    assert (await get_message(api, key, r.json["messageId"]))["messageType"] == "text"


async def test_function_style_alias_is_the_same_operation(api, account):
    """Spec §4.4: "also reachable as a function-style address {functions_url}/incomingCustomChannelMessage";
    §9: that form "carries no version segment"."""
    key = account["api_key"]
    r = await post_inbound(api, key, path=INBOUND_ALIAS, messageSid="alias-1")
    assert r.code == 200, r.body
    again = await post_inbound(api, key, messageSid="alias-1")
    assert again.json["messageId"] == r.json["messageId"]


async def test_custom_data_id_accepted_for_message_sid(api, account):
    """Spec §4.4: "customData.messageSid (alternatively customData.id)"."""
    key = account["api_key"]
    first = await post_inbound(api, key, messageSid=..., id="ext-77")
    assert first.code == 200, first.body
    repeat = await post_inbound(api, key, messageSid=..., id="ext-77")
    assert repeat.json["messageId"] == first.json["messageId"]


async def test_unknown_fields_are_ignored_and_numeric_ids_accepted(api, account):
    key = account["api_key"]
    body = inbound_body(extra={"nested": True}, fromId=12345, messageSid=987)
    body["somethingElse"] = 1
    r = await api.post(INBOUND, body, key=key)
    assert r.code == 200, r.body
    m = await get_message(api, key, r.json["messageId"])
    assert m["fromId"] == "12345"


# ---- inbound: errors (docs/api.md#errors) ---------------------------------------------------------------

@pytest.mark.parametrize("empty", ["", "   ", "\n\t  "])
async def test_empty_or_whitespace_body_is_400_saying_it_cannot_be_empty(api, account, empty):
    """Spec §7 rule 1: "When customData.body is empty, the response is 400 with an error message stating
    that the body cannot be empty." §4.4: body "Must not be empty or whitespace-only"."""
    r = await post_inbound(api, account["api_key"], body=empty)
    assert r.code == 400
    assert r.json == {"error": "customData.body cannot be empty"}


@pytest.mark.parametrize("field", ["messageSid", "fromId", "toId", "body"])
async def test_each_missing_required_field_is_400_naming_it(api, account, field):
    """Spec §7 rule 2: "When a required field is missing, the response is 400." The custom-channel shape is
    {"error": "<message text>"}."""
    r = await post_inbound(api, account["api_key"], **{field: ...})
    assert r.code == 400
    assert isinstance(r.json["error"], str)
    assert f"customData.{field} is required" in r.json["error"]


async def test_null_required_field_counts_as_missing(api, account):
    r = await post_inbound(api, account["api_key"], toId=None)
    assert (r.code, r.json) == (400, {"error": "customData.toId is required"})


async def test_missing_custom_data_and_bad_bodies_are_400(api, account):
    key = account["api_key"]
    r = await api.post(INBOUND, {"messageType": "text"}, key=key)
    assert (r.code, r.json) == (400, {"error": "customData is required"})
    r = await api.post(INBOUND, raw="{not json", key=key, headers={"Content-Type": "application/json"})
    assert r.code == 400 and isinstance(r.json["error"], str)
    r = await api.post(INBOUND, raw=json.dumps([1, 2]), key=key, headers={"Content-Type": "application/json"})
    assert r.code == 400 and isinstance(r.json["error"], str)


async def test_unknown_message_type_is_400(api, account):
    """Spec §4.4: messageType: "text" is accepted, "reaction" marks an emoji reaction; nothing else is shown."""
    r = await post_inbound(api, account["api_key"], message_type="sticker")
    assert r.code == 400
    assert r.json["error"].startswith("messageType")


async def test_invalid_email_is_400_naming_the_field(api, account):
    r = await post_inbound(api, account["api_key"], email="not-an-email")
    assert r.code == 400
    assert r.json["error"].startswith("customData.email")


@pytest.mark.parametrize("path", [INBOUND, INBOUND_ALIAS, SEND, SEND_ALIAS])
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
async def test_other_methods_are_405_with_allow_post(api, account, path, method):
    """Spec §7 rule 3: "A request to an inbound custom-channel endpoint with a method other than POST
    yields 405." (docs/design.md#api-decisions gives the send endpoint the same treatment.)"""
    body = inbound_body() if method in ("PUT", "PATCH") else None
    r = await api.call(method, path, body, key=account["api_key"])
    assert r.code == 405
    assert r.headers["Allow"] == "POST"
    assert isinstance(r.json["error"], str)
    # Refused before authentication: no key needed to learn the method is wrong.
    assert (await api.call(method, path, body)).code == 405


async def test_auth_and_content_type_errors_use_the_custom_channel_shape(api, account):
    """Spec §7: {"error": "<message text>"} on the custom-channel endpoints; §5 rule 6: 401 without a key."""
    r = await api.post(INBOUND, inbound_body())
    assert r.code == 401 and isinstance(r.json["error"], str)
    r = await api.post(INBOUND, inbound_body(), key="pk_wrong")
    assert r.code == 401 and isinstance(r.json["error"], str)
    r = await api.post(INBOUND, raw="a=b", key=account["api_key"],
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.code == 415 and isinstance(r.json["error"], str)


# ---- exactly once ----------------------------------------------------------------------------

async def test_repeated_message_sid_answers_first_id_and_changes_nothing(api, account, services):
    """Spec §4.4: messageSid is "Used to prevent a message being processed twice": the same message sent
    again (a retry) answers 200 with the first id."""
    key, account_id = account["api_key"], account["account_id"]
    first = await post_inbound(api, key, messageSid="dup-1", body="first", firstName="Ann", channel="webchat")
    repeat = await post_inbound(api, key, messageSid="dup-1", body="first", firstName="Annie", channel="webchat")
    assert repeat.code == 200
    assert repeat.json == {"success": True, "messageId": first.json["messageId"]}
    assert (await get_message(api, key, first.json["messageId"]))["body"] == "first"
    assert await _count(services.db, "messages", account_id) == 1
    assert await _count(services.db, "contacts", account_id) == 1


@pytest.mark.parametrize("change, differs", [
    ({"body": "edited"}, "another body"),
    ({"channel": "telegram"}, "another channel"),
    ({"fromId": "someone-else"}, "another fromId"),
    ({"body": "edited", "channel": "telegram"}, "another body and channel"),
])
async def test_repeated_message_sid_of_another_message_is_409_naming_the_stored_one(api, account, services, change,
                                                                                 differs):
    """#44 §3: a WhatsApp and a Telegram message with the same id, or an edited message, was answered 200 and
    never stored: it is a conflict that names the stored message, and nothing changes."""
    key, account_id = account["api_key"], account["account_id"]
    first = await post_inbound(api, key, messageSid="dup-2", body="first", channel="whatsapp")
    other = await post_inbound(api, key, messageSid="dup-2", **{"body": "first", "channel": "whatsapp", **change})
    assert other.code == 409, other.body
    message_id = first.json["messageId"]
    assert other.json["error"].startswith(f"customData.messageSid 'dup-2' is already stored as message {message_id} "
                                          f"with {differs}")
    assert await _count(services.db, "messages", account_id) == 1
    assert await _count(services.db, "contacts", account_id) == 1  # "someone-else" made no contact
    stored = await get_message(api, key, message_id)
    assert (stored["body"], stored["channel"]) == ("first", "whatsapp")


async def test_20_concurrent_posts_of_one_message_sid_store_one_message(api, account, services, http_server_client,
                                                                       monkeypatch):
    """Spec §4.4 messageSid "Used to prevent a message being processed twice", also when the repeats
    arrive at the same time: 20 answers, one message id, one stored message, one contact, one bot call
    (docs/design.md#api-decisions: a repeat "does nothing else (no second bot reply)")."""
    key, account_id = account["api_key"], account["account_id"]
    bot_calls = []
    sentinel_seen = asyncio.Event()
    assert (await api.patch("/v1/account/settings", {"bot": {"active": True}}, key=key)).code == 200

    async def record(svc, message, context):
        bot_calls.append(message["external_id"])
        if message["external_id"] == "after-burst":
            sentinel_seen.set()

    monkeypatch.setattr(bot_module, "on_inbound_message", record)
    body = json.dumps(inbound_body(messageSid="burst-1", fromId="burst-user"))
    client = tornado.simple_httpclient.SimpleAsyncHTTPClient(force_instance=True, max_clients=64)
    try:
        url = http_server_client.get_url(f"{INBOUND}?apiKey={key}")
        responses = await asyncio.gather(*(
            client.fetch(url, method="POST", body=body, headers={"Content-Type": "application/json"},
                         raise_error=False) for _ in range(20)))
    finally:
        client.close()
    assert [r.code for r in responses] == [200] * 20
    ids = {json.loads(r.body)["messageId"] for r in responses}
    assert len(ids) == 1
    assert await _count(services.db, "messages", account_id) == 1
    assert await _count(services.db, "contacts", account_id) == 1
    assert await _count(services.db, "channel_identities", account_id) == 1
    # Bot calls run in order after their responses: once the next message's call arrived, every call
    # the burst caused has run.
    await post_inbound(api, key, messageSid="after-burst")
    await asyncio.wait_for(sentinel_seen.wait(), 10)
    assert bot_calls == ["burst-1", "after-burst"]


async def test_same_message_sid_in_two_accounts_gives_two_messages(api, account, other_account):
    """docs/design.md#api-decisions: messageSid is unique per account; §4: another account's key sees nothing."""
    a, b = account, other_account
    ra = await post_inbound(api, a["api_key"], messageSid="shared-sid", fromId="same-user")
    rb = await post_inbound(api, b["api_key"], messageSid="shared-sid", fromId="same-user")
    assert ra.code == rb.code == 200
    assert ra.json["messageId"] != rb.json["messageId"]
    ma = await get_message(api, a["api_key"], ra.json["messageId"])
    mb = await get_message(api, b["api_key"], rb.json["messageId"])
    assert ma["contactId"] != mb["contactId"]
    assert (await api.get(f"/v1/messages/{ra.json['messageId']}", key=b["api_key"])).code == 404


# ---- fromId -> contact (docs/api.md#custom-channel, docs/design.md#api-decisions) -------------------------------------------

async def test_same_from_id_maps_to_one_contact_and_new_from_id_to_a_new_one(api, account, services):
    """Spec §2 rule 3: "The same fromId always maps to the same contact. A changed fromId produces a new
    contact.\""""
    key, account_id = account["api_key"], account["account_id"]
    one = await get_message(api, key, (await post_inbound(api, key, fromId="chat-42")).json["messageId"])
    two = await get_message(api, key, (await post_inbound(api, key, fromId="chat-42")).json["messageId"])
    other = await get_message(api, key, (await post_inbound(api, key, fromId="chat-43")).json["messageId"])
    assert one["contactId"] == two["contactId"]
    assert other["contactId"] != one["contactId"]
    assert await _count(services.db, "contacts", account_id) == 2


async def test_phone_from_id_links_to_existing_contact_by_e164(api, account, services):
    """docs/design.md#api-decisions: "on first sight, a fromId that is an E.164 phone ... of an existing contact links to it"."""
    key, account_id = account["api_key"], account["account_id"]
    existing, _ = await contact_store.find_or_create(services.db, {
        "id": "ct_existing_phone", "account_id": account_id, "phone": "+14155552671", "created_at": "2024-01-01"})
    r = await post_inbound(api, key, fromId="+1 415 555 2671", firstName="Pat")
    m = await get_message(api, key, r.json["messageId"])
    assert m["contactId"] == existing["id"]
    contact = await contact_store.get_contact(services.db, account_id, existing["id"])
    assert contact["first_name"] == "Pat"  # a blank filled
    assert await _count(services.db, "contacts", account_id) == 1


async def test_email_from_id_links_to_existing_contact_case_insensitively(api, account, services):
    key, account_id = account["api_key"], account["account_id"]
    existing, _ = await contact_store.find_or_create(services.db, {
        "id": "ct_existing_mail", "account_id": account_id, "email": "lee@example.com", "created_at": "2024-01-01"})
    r = await post_inbound(api, key, fromId="Lee@Example.com")
    assert (await get_message(api, key, r.json["messageId"]))["contactId"] == existing["id"]


async def test_new_contact_takes_names_and_email_and_later_messages_fill_blanks_only(api, account, services):
    """Spec §4.4: firstName/lastName/email are "Used when a new contact is created"; docs/design.md#api-decisions: "later
    messages fill blanks only"."""
    key, account_id = account["api_key"], account["account_id"]
    r = await post_inbound(api, key, fromId="+442071838750", firstName="Ada")
    contact_id = (await get_message(api, key, r.json["messageId"]))["contactId"]
    contact = await contact_store.get_contact(services.db, account_id, contact_id)
    assert (contact["phone"], contact["first_name"], contact["last_name"], contact["email"]) == \
        ("+442071838750", "Ada", None, None)
    await post_inbound(api, key, fromId="+442071838750", firstName="Changed", lastName="Lovelace",
                       email="ADA@example.com")
    contact = await contact_store.get_contact(services.db, account_id, contact_id)
    assert (contact["first_name"], contact["last_name"], contact["email"]) == ("Ada", "Lovelace", "ada@example.com")


async def test_custom_data_email_alone_does_not_link_a_new_from_id(api, account, services):
    """Spec §2 rule 3: "A changed fromId produces a new contact" — even when it brings a known email, which
    stays the known contact's (issue 44 §6: an email names one contact, as PATCH and create hold)."""
    key, account_id = account["api_key"], account["account_id"]
    await contact_store.find_or_create(services.db, {
        "id": "ct_known", "account_id": account_id, "email": "kim@example.com", "created_at": "2024-01-01"})
    r = await post_inbound(api, key, fromId="widget-visitor-9", email="kim@example.com")
    m = await get_message(api, key, r.json["messageId"])
    assert m["contactId"] != "ct_known"
    contact = await contact_store.get_contact(services.db, account_id, m["contactId"])
    assert contact["email"] is None


async def test_contact_created_from_inbound_queues_contact_created(api, account, services):
    """Spec §6: "notifications for contact creation"; a contact made by the custom channel is one."""
    key, account_id = account["api_key"], account["account_id"]
    r = await api.patch("/v1/account/settings",
                        {"notificationUrls": {"contact.created": "http://127.0.0.1:9/created"}}, key=key)
    assert r.code == 200, r.body
    m = await get_message(api, key, (await post_inbound(api, key, fromId="n-1")).json["messageId"])
    await post_inbound(api, key, fromId="n-1")  # same contact: no second notification
    rows = await outbox_store.list_outbox(services.db, account_id, kind="notification")
    assert [json.loads(row["payload"])["data"]["id"] for row in rows] == [m["contactId"]]


# ---- bot hook --------------------------------------------------------------------------------

async def test_bot_hook_runs_after_commit_once_per_new_text_message(api, account, services, monkeypatch):
    """Spec §4.4: the service "has the bot answer when it is active"; docs/design.md#api-decisions: "bot work happens after the
    response", "no second bot reply" for a repeat, and a reaction is "never answered by the bot".
    (tests/test_bot.py checks the answers themselves.)"""
    seen = []
    arrived = asyncio.Event()
    assert (await api.patch("/v1/account/settings", {"bot": {"active": True}}, key=account["api_key"])).code == 200

    async def record(svc, message, context):
        stored = await message_store.get_message(svc.db, message["account_id"], message["id"])
        seen.append((message["id"], stored is not None))
        arrived.set()

    monkeypatch.setattr(bot_module, "on_inbound_message", record)
    key = account["api_key"]
    first = await post_inbound(api, key, messageSid="bot-1")
    await asyncio.wait_for(arrived.wait(), 10)
    await post_inbound(api, key, messageSid="bot-1")  # repeat
    await post_inbound(api, key, message_type="reaction", body="❤️")
    arrived.clear()
    last = await post_inbound(api, key, messageSid="bot-2")
    await asyncio.wait_for(arrived.wait(), 10)
    assert seen == [(first.json["messageId"], True), (last.json["messageId"], True)]


# ---- outbound (docs/api.md#custom-channel) --------------------------------------------------------------------

def send_body(**custom):
    data = {"fromId": "user-1", "customChannel": "webchat", "body": "Hi from us"}
    data.update(custom)
    return {"customData": {k: v for k, v in data.items() if v is not ...}}


async def test_send_without_webhook_url_is_400(api, account):
    """docs/design.md#api-decisions: "400 when no Custom Channel Webhook URL is configured"."""
    r = await api.post(SEND, send_body(), key=account["api_key"])
    assert r.code == 400
    assert "Custom Channel Webhook URL" in r.json["error"]


async def test_send_stores_pending_message_and_queues_its_delivery(api, account, services):
    """Spec §4.5: "Response body: success (boolean), messageId (string), contactId (string), message";
    §6 payload {contactId, messageId, userId, body, toId, channel}, toId "equals the fromId"; docs/design.md#api-decisions
    "Reply payload, extended": plus campaignId (when set) and contact {firstName, lastName, phone, email}."""
    key, account_id = account["api_key"], account["account_id"]
    await set_webhook(api, key)
    inbound = await get_message(api, key, (await post_inbound(api, key, fromId="user-1")).json["messageId"])
    r = await api.post(SEND, send_body(campaignId="c1"), key=key)
    assert r.code == 200, r.body
    assert r.json == {"success": True, "messageId": r.json["messageId"], "contactId": inbound["contactId"],
                      "message": "Message queued for delivery"}
    m = await get_message(api, key, r.json["messageId"])
    assert (m["direction"], m["status"], m["channel"], m["toId"], m["body"], m["campaignId"]) == \
        ("outbound", "Pending", "webchat", "user-1", "Hi from us", "c1")
    [row] = await outbox_store.list_outbox(services.db, account_id, kind="reply")
    assert row["message_id"] == m["id"]
    assert json.loads(row["payload"]) == {
        "contactId": inbound["contactId"], "messageId": m["id"], "userId": account_id,  # no user: the account
        "body": "Hi from us", "toId": "user-1", "channel": "webchat", "campaignId": "c1",
        "contact": {"firstName": None, "lastName": None, "phone": None, "email": None},
        # issue 44 §2, §5: the order and the author of a reply
        "accountId": account_id, "author": "api", "createdAt": m["createdAt"], "sequence": 1}


async def test_send_alias_and_new_contact_from_from_id(api, account, services):
    """Spec §4.5: "The optional fields behave as in 4.4 and help create or update the contact"."""
    key, account_id = account["api_key"], account["account_id"]
    await set_webhook(api, key)
    r = await api.post(SEND_ALIAS, send_body(fromId="new-person", firstName="Noor",
                                             email="noor@example.com"), key=key)
    assert r.code == 200, r.body
    contact = await contact_store.get_contact(services.db, account_id, r.json["contactId"])
    assert (contact["first_name"], contact["email"]) == ("Noor", "noor@example.com")
    # Later inbound from the same fromId lands on that contact.
    m = await get_message(api, key, (await post_inbound(api, key, fromId="new-person")).json["messageId"])
    assert m["contactId"] == r.json["contactId"]


async def test_send_payload_user_id_is_the_account_owner(api, services):
    """Spec §6: userId is "The account owner's user id"."""
    created = await accounts.create_account(services.db, services.box, services.keys, name="Owned",
                                            email="owner-with-user@example.com", password="pw-123456789")
    key, account_id = created["api_key"], created["account_id"]
    await set_webhook(api, key)
    r = await api.post(SEND, send_body(), key=key)
    assert r.code == 200, r.body
    [row] = await outbox_store.list_outbox(services.db, account_id, kind="reply")
    user = await services.db.read(lambda cx: cx.execute(
        "SELECT id FROM users WHERE account_id = ?", (account_id,)).fetchone()[0])
    assert json.loads(row["payload"])["userId"] == user and user.startswith("usr_")


@pytest.mark.parametrize("field", ["fromId", "customChannel", "body"])
async def test_send_missing_required_field_is_400_naming_it(api, account, field):
    """Spec §4.5: fromId, customChannel and body are required; §7 rule 2."""
    await set_webhook(api, account["api_key"])
    r = await api.post(SEND, send_body(**{field: ...}), key=account["api_key"])
    assert (r.code, r.json) == (400, {"error": f"customData.{field} is required"})


async def test_send_empty_body_is_400(api, account, services):
    key = account["api_key"]
    await set_webhook(api, key)
    r = await api.post(SEND, send_body(body="  "), key=key)
    assert (r.code, r.json) == (400, {"error": "customData.body cannot be empty"})
    assert await _count(services.db, "messages", account["account_id"]) == 0


async def test_send_reply_service_replies_where_the_contact_last_wrote(api, account, other_account, services):
    """docs/design.md#api-decisions: bot reply, inbox reply and API send all store an outbound message and queue it in the same
    transaction; the reply goes to the contact's fromId on its channel (docs/api.md#webhook-delivery toId)."""
    key, account_id = account["api_key"], account["account_id"]
    await set_webhook(api, key)
    m = await get_message(api, key, (await post_inbound(api, key, fromId="tg-7", channel="telegram")).json["messageId"])
    sent = await messaging.send_reply(services, account_id, m["contactId"], "Thanks!", author="bot")
    out = await get_message(api, key, sent["messageId"])
    assert (out["direction"], out["status"], out["toId"], out["channel"], out["contactId"], out["author"]) == \
        ("outbound", "Pending", "tg-7", "telegram", m["contactId"], "bot")
    assert m["author"] == "contact"
    [row] = await outbox_store.list_outbox(services.db, account_id, kind="reply")
    assert json.loads(row["payload"])["toId"] == "tg-7" and row["message_id"] == sent["messageId"]

    with pytest.raises(NotFound):  # another account's contact
        await set_webhook(api, other_account["api_key"])
        await messaging.send_reply(services, other_account["account_id"], m["contactId"], "nope", author="bot")
    lonely, _ = await contact_store.find_or_create(services.db, {
        "id": "ct_no_channel", "account_id": account_id, "phone": "+14155550123", "created_at": "2024-01-01"})
    with pytest.raises(Invalid):  # never wrote on a custom channel: no fromId to reply to
        await messaging.send_reply(services, account_id, lonely["id"], "hello?", author="user")
    with pytest.raises(Invalid):
        await messaging.send_reply(services, account_id, m["contactId"], "   ", author="user")
