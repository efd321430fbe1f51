"""Bad input answers 400 naming the field, never 500 (issue 9): deeply nested JSON, duplicate JSON keys,
webhook hosts IDNA refuses (API and UI), a sign-in `next` with a control character, a garbage cursor.
Spec §7: "400 Bad Request – missing or invalid parameter"; DESIGN §3: a 500 is a bug."""
import json

import pytest

from tests.test_ui import browser, signed_in, ui_account  # noqa: F401 (fixtures)

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
