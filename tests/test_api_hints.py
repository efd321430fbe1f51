"""Error messages that point a first-time API user at the fix (issue 26 item 4), in the spec's error shapes
(§7): an outbound message carrying the inbound payload's names for the contact, and ?apiKey= on the one
endpoint that takes the key only in the x-api-key header (docs/api.md#sub-account-credits-agency-accounts)."""
import pytest

SEND = "/v1/send_custom_channel_message"
FROM_ID_HINT = ("customData.fromId is required (the contact's id on your platform; "
                "the inbound message's fromId)")


@pytest.mark.parametrize("guessed", [{"toId": "+14155552671"}, {"channel": "web chat"}])
async def test_outbound_with_the_inbound_payloads_names_says_which_field_it_takes(api, account, guessed):
    body = {"customData": {"customChannel": "web chat", "body": "Hi", **guessed}}
    r = await api.post(SEND, body, key=account["api_key"])
    assert r.code == 400 and r.json == {"error": FROM_ID_HINT}


async def test_outbound_without_from_id_and_no_guess_keeps_the_plain_message(api, account):
    r = await api.post(SEND, {"customData": {"customChannel": "web chat", "body": "Hi"}}, key=account["api_key"])
    assert r.code == 400 and r.json == {"error": "customData.fromId is required"}


async def test_credits_with_the_query_parameter_says_it_takes_only_the_header(api, agency):
    r = await api.post("/v1/subaccounts/credits", {"email": "a@b.example", "amount": 1}, key=agency["api_key"])
    assert r.code == 401
    assert "x-api-key header" in r.json["error"]["message"] and "?apiKey=" in r.json["error"]["message"]
    assert "§" not in r.json["error"]["message"]  # it names the header; it cites no document a user lacks
    assert set(r.json) == {"error"} and set(r.json["error"]) >= {"code", "message"}


async def test_credits_without_any_key_keeps_the_plain_message(api, agency):
    r = await api.post("/v1/subaccounts/credits", {"email": "a@b.example", "amount": 1})
    assert r.code == 401 and r.json["error"]["message"] == ("missing API key: pass it in the x-api-key header or as "
                                                       "Authorization: Bearer")
