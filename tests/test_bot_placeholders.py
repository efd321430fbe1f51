"""Bot answers fill placeholders (issue 43 item 1): the greeting, rule answers, the fallback and the handoff
message fill {{firstName}}, {{lastName}}, {{email}}, {{phone}} for the contact as campaigns do (one parser,
common/placeholders.py); an unknown placeholder is 400 at save naming the field and the placeholder, and
the dry run fills them for its contactId. And notificationUrls is a merge patch (item 5): null removes one."""
import pytest

from tests.bot_helpers import BOT_SETTINGS, SETTINGS, account_form, bot_replies, configure, say

pytestmark = pytest.mark.settings(**BOT_SETTINGS)  # as tests/test_bot.py


@pytest.mark.parametrize("bot, field, placeholder", [
    ({"greeting": "Hi {{firstname}}!"}, "bot.greeting", "{{firstname}}"),
    ({"fallback": "Sorry {{ name }}"}, "bot.fallback", "{{name}}"),
    ({"handoffMessage": "One moment {{first_name}}"}, "bot.handoffMessage", "{{first_name}}"),
    ({"rules": [{"keywords": ["a"], "answer": "ok"}, {"keywords": ["open"], "answer": "Hi {{FirstName}}! 8am"}]},
     "bot.rules[1].answer", "{{FirstName}}"),
    ({"campaigns": {"spring": {"greeting": "Hi {{nom}}"}}}, "bot.campaigns.spring.greeting", "{{nom}}"),
])
async def test_an_unknown_placeholder_is_400_at_save_naming_the_field_and_changes_nothing(api, account, bot, field,
                                                                                         placeholder):
    key = account["api_key"]
    await configure(api, key, {"greeting": "Hello {{firstName}}"})
    r = await api.patch(SETTINGS, {"bot": bot}, key=key)
    assert r.code == 400, r.body
    message = r.json["error"]["message"]
    assert message.startswith(f"{field} has an unknown placeholder {placeholder}"), message
    assert "{{firstName}}, {{lastName}}, {{email}}, {{phone}}" in message
    assert (await api.get("/v1/account", key=key)).json["settings"]["bot"] == {"greeting": "Hello {{firstName}}"}


async def test_answers_are_filled_for_the_contact_that_gets_them(api, account, services):
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {
        "active": True, "greeting": "Hi {{firstName}}!", "fallback": "{{ firstName }}, a person will answer.",
        "rules": [{"keywords": ["open"], "answer": "Hi {{firstName}} {{lastName}}! We open at 8 ({{phone}})."}],
        "handoffKeywords": ["human"], "handoffMessage": "One moment, {{firstName}}."})
    first = await say(api, services, key, "hello", fromId="+14155550101")
    r = await api.patch(f"/v1/contacts/{first['contactId']}", {"firstName": "Anna", "lastName": "Berg"}, key=key)
    assert r.code == 200, r.body
    await say(api, services, key, "when do you open?", fromId="+14155550101")
    await say(api, services, key, "do you ship to Mars", fromId="+14155550101")
    await say(api, services, key, "a human please", fromId="+14155550101")
    sent = [row["body"] for row in bot_replies(services, account_id)]
    # The greeting went out before the name was known: a missing value is empty, as in campaigns.
    assert sent == ["Hi !", "Hi Anna Berg! We open at 8 (+14155550101).", "Anna, a person will answer.",
                    "One moment, Anna."]


async def test_the_dry_run_fills_the_answer_for_its_contact(api, account, services):
    key = account["api_key"]
    await configure(api, key, {"rules": [{"keywords": ["open"], "answer": "Hi {{firstName}}! We open at 8."}]})
    contact = (await api.post("/v1/contacts", {"phone": "+14155550102", "firstName": "Cleo"}, key=key)).json
    r = await api.post("/v1/bot/test", {"body": "open?", "contactId": contact["id"]}, key=key)
    assert (r.code, r.json["reply"]) == (200, "Hi Cleo! We open at 8.")
    r = await api.post("/v1/bot/test", {"body": "open?"}, key=key)  # no contact: as written
    assert r.json["reply"] == "Hi {{firstName}}! We open at 8."


async def test_the_bot_page_refuses_an_unknown_placeholder_naming_the_field(api, signed_in, ui_account):
    r = await signed_in.post("/bot/account", account_form(**{"rules-0-answer": "Hi {{first}}"}))
    assert r.code == 400, r.text
    assert "Rule 1 answer has an unknown placeholder {{first}}" in r.text  # the page names fields in words
    assert "Hi {{first}}</textarea>" in r.text or 'value="Hi {{first}}"' in r.text  # kept as typed
    assert (await api.get("/v1/account", key=ui_account["api_key"])).json["settings"].get("bot") is None


# ---- notificationUrls: a merge patch (item 5) ---------------------------------------------------

async def test_null_removes_one_notification_url_and_keeps_the_others(api, account):
    key = account["api_key"]
    urls = {"contact.created": "http://127.0.0.1:9/created", "conversation.handoff": "http://127.0.0.1:9/handoff"}
    r = await api.patch(SETTINGS, {"notificationUrls": urls}, key=key)
    assert r.code == 200, r.body
    r = await api.patch(SETTINGS, {"notificationUrls": {"contact.created": None}}, key=key)
    assert r.code == 200, r.body
    assert r.json["notificationUrls"] == {"conversation.handoff": "http://127.0.0.1:9/handoff"}
    r = await api.patch(SETTINGS, {"notificationUrls": {"contact.tagged": "http://127.0.0.1:9/tagged"}}, key=key)
    assert r.json["notificationUrls"] == {"conversation.handoff": "http://127.0.0.1:9/handoff",
                                          "contact.tagged": "http://127.0.0.1:9/tagged"}
    r = await api.patch(SETTINGS, {"notificationUrls": {"conversation.handoff": None, "contact.tagged": None}}, key=key)
    assert "notificationUrls" not in r.json  # the last one removed: no empty object left
    r = await api.patch(SETTINGS, {"notificationUrls": {"contact.nope": None}}, key=key)
    assert r.code == 400 and "notificationUrls" in r.json["error"]["message"]
