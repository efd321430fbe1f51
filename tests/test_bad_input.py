"""Bad input answers 400 naming the field, never 500 (issue 9): deeply nested JSON, duplicate JSON keys,
webhook hosts IDNA refuses (API and UI), a sign-in `next` with a control character, a garbage cursor.
Spec §7: "400 Bad Request – missing or invalid parameter"; docs/design.md#api-decisions: a 500 is a bug."""
import copy
import json
import re

import pytest

from handlers import routes
from handlers.openapi import build_document
from tests.baseline_helpers import (call_args, operations_with_a_body, snapshot, string_fields,
                                    world)  # noqa: F401 (world: a fixture)

INBOUND = "/v1/incoming_custom_channel_message"


def nested(depth):
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("body", [
    '{"firstName": ' + nested(10_000) + ', "phone": "+14155552671"}',
    '{"a": ' + '{"a": ' * 10_000 + "1" + "}" * 10_000 + "}",
])
async def test_deeply_nested_json_is_400_not_500(api, account, body):
    r = await api.post("/v1/contacts", raw=body, key=account["api_key"],
                       headers={"Content-Type": "application/json"})
    assert r.code == 400, r.body
    assert r.json["error"] == {"code": "VALIDATION_ERROR", "message": "request body is nested too deeply"}


async def test_deeply_nested_json_on_the_custom_channel_is_400_in_its_shape(api, account):
    body = '{"customData": {"messageSid": "deep", "fromId": "u", "toId": "t", "body": ' + nested(10_000) + "}}"
    r = await api.post(INBOUND, raw=body, key=account["api_key"], headers={"Content-Type": "application/json"})
    assert r.code == 400 and r.json == {"error": "request body is nested too deeply"}


async def test_a_duplicate_json_key_is_400_naming_it_and_changes_nothing(api, account):
    """Which of two values is meant cannot be known: refuse rather than silently take the last one."""
    body = '{"firstName": "Ada", "phone": "+14155552671", "phone": "+14155550000"}'
    r = await api.post("/v1/contacts", raw=body, key=account["api_key"], headers={"Content-Type": "application/json"})
    assert r.code == 400
    assert r.json["error"]["message"] == "request body has the key 'phone' more than once"
    for phone in ("%2B14155552671", "%2B14155550000"):
        assert (await api.get(f"/v1/contacts?phoneNumber={phone}", key=account["api_key"])).code == 404


async def test_a_duplicate_key_inside_custom_data_is_400_in_the_custom_channel_shape(api, account):
    body = '{"customData": {"messageSid": "dup", "fromId": "u", "toId": "t", "body": "a", "body": "b"}}'
    r = await api.post(INBOUND, raw=body, key=account["api_key"], headers={"Content-Type": "application/json"})
    assert r.code == 400 and r.json == {"error": "request body has the key 'body' more than once"}


async def test_a_garbage_cursor_on_contact_messages_is_400_like_the_list_endpoints(api, account):
    """It was taken as the first page. Spec §7: 400 for an invalid parameter."""
    key = account["api_key"]
    r = await api.post(INBOUND, {"customData": {"messageSid": "c1", "fromId": "u", "toId": "t", "body": "hi"}},
                       key=key)
    contact_id = (await api.get(f"/v1/messages/{r.json['messageId']}", key=key)).json["contactId"]
    for cursor in ("garbage", "msg_00000000", "%2B%2B", "AAAA"):
        r = await api.get(f"/v1/contacts/{contact_id}/messages?cursor={cursor}", key=key)
        assert r.code == 400, (cursor, r.body)
        listed = await api.get(f"/v1/lists?cursor={cursor}", key=key)
        assert r.json == listed.json  # the same message as the list endpoints
        assert "cursor" in r.json["error"]["message"]
    r = await api.get(f"/v1/contacts/{contact_id}/messages?cursor=", key=key)
    assert r.code == 200 and len(r.json["data"]) == 1  # an empty cursor is the first page


@pytest.mark.parametrize("url", ["https://a..b/hook", "https://" + "x" * 64 + ".example/hook",
                                 "https://1.1.1.1/a b", "https://1.1.1.1:0/"])
async def test_the_ui_webhook_form_answers_400_with_the_reason_not_something_went_wrong(signed_in, api,
                                                                                        ui_account, url):
    r = await signed_in.post("/settings/webhook", {"customChannelWebhookUrl": url})
    assert r.code == 400, r.text
    assert "Something went wrong" not in r.text
    api_r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": url}, key=ui_account["api_key"])
    assert api_r.code == 400
    assert json.dumps(api_r.json["error"]["message"])[1:-1].replace("&", "&amp;").replace("'", "&#39;") in r.text


@pytest.mark.parametrize("next_url", ["%2F%0B%2Fevil", "%2F%09%2Fevil", "%2F%5C%2Fevil", "%2Fa%0D%0AX:1"])
async def test_a_next_with_control_characters_while_signed_in_goes_home(signed_in, next_url):
    r = await signed_in.get(f"/login?next={next_url}")
    assert (r.code, r.headers["Location"]) == (302, "/inbox")


# --- issue 18 item 7: still 500s -------------------------------------------------------------------------

BAD_URLS = ["https://[::1/", "https://[zz]/", "https://[::1]:99999/"]


@pytest.mark.parametrize("url", BAD_URLS)
async def test_a_url_that_does_not_parse_is_400_naming_the_field_in_every_url_field(api, account, url):
    key = account["api_key"]
    for body, field in (({"customChannelWebhookUrl": url}, "customChannelWebhookUrl"),
                        ({"notificationUrls": {"contact.created": url}}, "notificationUrls.contact.created"),
                        ({"bot": {"provider": {"baseUrl": url, "model": "m"}}}, "bot.provider.baseUrl"),
                        ({"bot": {"campaigns": {"spring": {"provider": {"baseUrl": url, "model": "m"}}}}},
                         "bot.campaigns.spring.provider.baseUrl")):
        r = await api.patch("/v1/account/settings", body, key=key)
        assert r.code == 400, (field, r.body)
        assert r.json["error"]["message"].startswith(field), r.json
    assert (await api.get("/v1/account", key=key)).json["settings"].get("bot") is None
    r = await api.post(INBOUND, {"customData": {"messageSid": "u1", "fromId": "u", "toId": "t", "body": "hi",
                                                "mediaUrl": url, "mediaContentType": "image/png"}}, key=key)
    assert r.code == 400 and "customData.mediaUrl" in r.json["error"], r.body


@pytest.mark.parametrize("url", BAD_URLS)
async def test_a_url_that_does_not_parse_is_400_in_the_ui_forms(signed_in, url):
    for action, form, field in (("/settings/webhook", {"customChannelWebhookUrl": url}, "customChannelWebhookUrl"),
                                ("/settings/notifications", {"contact.created": url}, "contact.created"),
                                ("/bot/account", {"provider-baseUrl": url, "provider-model": "m"}, "baseUrl")):
        r = await signed_in.post(action, form)
        assert r.code == 400, (action, r.code)
        assert field in r.text and "Something went wrong" not in r.text


@pytest.mark.parametrize("start_at", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
async def test_a_start_at_outside_utcs_years_is_400_naming_start_at(api, account, signed_in, ui_account, start_at):
    """Valid in their own zone, but out of datetime's range once converted to UTC, where they are stored."""
    for key in (account["api_key"], ui_account["api_key"]):
        lst = await api.post("/v1/lists", {"name": "L"}, key=key)
        r = await api.post("/v1/campaigns", {"name": "C", "listId": lst.json["id"], "body": "b", "startAt": start_at},
                           key=key)
        assert r.code == 400 and r.json["error"]["message"].startswith("startAt"), r.body
    assert (await api.get("/v1/campaigns", key=ui_account["api_key"])).json["data"] == []
    # The UI schedules on a draft's page (issue 43 §7): the start form refuses it, naming startAt, and the
    # campaign stays a draft.
    assert (await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "https://example.com/hook"},
                            key=ui_account["api_key"])).code == 200
    draft = await api.post("/v1/campaigns", {"name": "C", "listId": lst.json["id"], "body": "b", "draft": True},
                           key=ui_account["api_key"])
    assert draft.code == 201, draft.body
    r = await signed_in.post(f"/campaigns/{draft.json['id']}/start", {"startAt": "", "startAtUtc": start_at})
    assert r.code == 303, r.code
    assert "startAt" in (await signed_in.get(f"/campaigns/{draft.json['id']}")).text
    assert (await api.get(f"/v1/campaigns/{draft.json['id']}", key=ui_account["api_key"])).json["status"] == "draft"


async def test_a_lone_surrogate_anywhere_in_any_json_body_is_400_naming_the_field(api, services, world, account,
                                                                                 agency, sub):
    """"\\ud800" is valid JSON but no Unicode text: it failed on the way into SQLite (500). Every string and
    every key of every operation's body, in turn."""
    before = snapshot(services)
    checked = 0
    for method, path in operations_with_a_body():
        url, key, body = call_args(method, path, world, account, agency, sub)
        if body is None:
            body = {"autoRecharge": {"threshold": 1, "amount": 2}}
        for field, kind in [*string_fields(body), *((f, "key") for f in dict_keys(body))]:
            r = await api.call(method, url, with_surrogate(body, field, kind), key=key, query_key=False)
            assert r.code == 400, (method, path, field, r.code, r.body)
            message = r.json["error"] if isinstance(r.json["error"], str) else r.json["error"]["message"]
            assert "lone surrogate" in message and (kind == "key" or str(field[-1]) in message), (field, message)
            checked += 1
    assert snapshot(services) == before
    assert checked > 60


def dict_keys(value, path=()):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield path + (key,)
            yield from dict_keys(inner, path + (key,))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from dict_keys(inner, path + (index,))


def with_surrogate(body, path, kind):
    body = copy.deepcopy(body)
    *parents, last = path
    target = body
    for part in parents:
        target = target[part]
    if kind == "key":
        target[last + "\ud800"] = target.pop(last)
    else:
        target[last] = "\ud800" if kind == "value" else target[last]
    return body


async def test_a_lone_surrogate_in_a_path_or_query_id_is_not_a_500(api, account):
    """Percent-encoded, a surrogate is not UTF-8: every path and query parameter of the API, in turn."""
    document = build_document(routes())
    for path, item in document["paths"].items():
        for method, op in item.items():
            url = re.sub(r"\{[^}]+\}", "%ED%A0%80", path)
            queries = [p["name"] for p in op.get("parameters", []) if p["in"] == "query"]
            for target in [url] + [f"{url}?{name}=%ED%A0%80" for name in queries]:
                r = await api.call(method.upper(), target, key=account["api_key"], query_key=False,
                                   raw=b"{}" if method in ("post", "patch") else None,
                                   headers={"Content-Type": "application/json"})
                assert r.code < 500, (method, target, r.code, r.body)


@pytest.mark.parametrize("header", [{"Origin": "https://[::1"}, {"Origin": "https://[zz]/"}, {"Host": "[::1"}])
async def test_a_live_events_origin_or_host_that_does_not_parse_is_refused_not_a_500(signed_in, header):
    r = await signed_in.get("/ws", headers={"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                                            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                            "Origin": "http://localhost", **header})
    assert 400 <= r.code < 500, (header, r.code)
