"""The Bot settings page (/bot): the account's bot and each campaign's override, the write-only provider
key, "Try it" (the dry run). Fast tests drive the in-process app with a cookie-keeping form client; the
end-to-end test drives the real server.py over HTTPS with headless Chromium (Playwright)."""
import re

import pytest

from services import bot_settings
from tests.bot_helpers import account_form, stored_bot
from tests.ui_helpers import FormClient, open_page, sign_in


async def test_the_page_needs_a_session_and_every_form_an_xsrf_token(browser_client, signed_in):
    r = await browser_client.get("/bot")
    assert (r.code, r.headers["Location"]) == (302, "/login?next=%2Fbot")
    page = await signed_in.get("/bot")
    assert page.code == 200 and '<a href="/bot" aria-current="page">Bot</a>' in page.text
    assert page.text.count('name="_xsrf"') == page.text.count("<form")
    r = await signed_in.post("/bot/account", account_form(), xsrf=False)
    assert r.code == 403


@pytest.fixture
def browser_client(http_server_client):
    return FormClient(http_server_client)


async def test_the_account_form_saves_the_bot_like_the_api(signed_in, api, ui_account):
    r = await signed_in.post("/bot/account", account_form(**{
        "provider-baseUrl": "http://127.0.0.1:9/v1", "provider-model": "tiny", "provider-apiKey": "sk-ui-secret"}))
    assert (r.code, r.headers["Location"]) == (303, "/bot#account-bot")
    bot = await stored_bot(api, ui_account)
    assert bot == {"active": True, "rules": [{"keywords": ["price", "cost"], "answer": "Plans start at $10."}],
                   "handoffKeywords": ["human", "agent"], "pauseMinutesAfterHumanReply": 30,
                   "provider": {"baseUrl": "http://127.0.0.1:9/v1", "model": "tiny", "apiKeySet": True}}
    page = await signed_in.get("/bot")
    assert "Bot settings saved." in page.text and "sk-ui-secret" not in page.text
    assert "The key is set; it is never shown." in page.text
    # Saved again without typing the key: it stays. "Remove the stored key" removes it.
    await signed_in.post("/bot/account", account_form(**{"provider-baseUrl": "http://127.0.0.1:9/v1",
                                                         "provider-model": "bigger"}))
    assert (await stored_bot(api, ui_account))["provider"] == {"baseUrl": "http://127.0.0.1:9/v1", "model": "bigger",
                                                               "apiKeySet": True}
    await signed_in.post("/bot/account", account_form(**{"provider-baseUrl": "http://127.0.0.1:9/v1",
                                                         "provider-model": "bigger", "provider-clearKey": "on"}))
    assert (await stored_bot(api, ui_account))["provider"]["apiKeySet"] is False


async def test_the_handoff_message_is_set_on_the_page_shown_with_its_default_and_emptied_to_send_nothing(
        signed_in, api, ui_account):
    """Issue 25 §3: bot.handoffMessage in the UI too. Unset, the field shows the default that is sent; saved
    empty, nothing is sent on a handoff; a form without the field (a campaign's) leaves it as it is."""
    page = await signed_in.get("/bot")
    assert "Thanks! A person will answer here soon.</textarea>" in page.text
    await signed_in.post("/bot/account", account_form(handoffMessage="  Someone will call you back.  "))
    assert (await stored_bot(api, ui_account))["handoffMessage"] == "Someone will call you back."
    await signed_in.post("/bot/account", account_form())  # no such field: kept
    assert (await stored_bot(api, ui_account))["handoffMessage"] == "Someone will call you back."
    await signed_in.post("/bot/account", account_form(handoffMessage=""))
    assert (await stored_bot(api, ui_account))["handoffMessage"] == ""
    assert "></textarea>" in (await signed_in.get("/bot")).text.split('name="handoffMessage"', 1)[1][:40]


async def test_a_bad_form_is_400_naming_the_field_and_keeps_what_was_typed(signed_in, api, ui_account):
    r = await signed_in.post("/bot/account", account_form(**{"rules-1-keywords": "hours", "rules-1-answer": " ",
                                                              "greeting": "Hello <b>there</b>"}))
    assert r.code == 400
    assert "Rule 2 answer: must not be empty or whitespace-only" in r.text  # as the form numbers it
    assert "Hello &lt;b&gt;there&lt;/b&gt;" in r.text and 'value="hours"' in r.text
    assert await stored_bot(api, ui_account) is None
    r = await signed_in.post("/bot/account", account_form(pauseMinutesAfterHumanReply="soon"))
    assert r.code == 400 and "bot.pauseMinutesAfterHumanReply" in r.text


async def test_campaign_overrides_are_added_saved_and_removed(signed_in, api, ui_account):
    await signed_in.post("/bot/account", account_form(**{"greeting": "Welcome!", "provider-model": "tiny",
                                                         "provider-baseUrl": "http://127.0.0.1:9/v1"}))
    r = await signed_in.post("/bot/campaign", {"campaignId": "spring <sale>", "action": "add"})
    assert r.code == 303
    page = await signed_in.get("/bot")
    assert "Campaign spring &lt;sale&gt; added" in page.text
    form = account_form(**{"campaignId": "spring <sale>", "active": "on", "override-greeting": "on", "greeting": "",
                           "override-rules": "on", "rules-0-keywords": "price", "rules-0-answer": "Spring: $5.",
                           "override-provider": "on", "provider-systemPrompt": "Spring tone."})
    r = await signed_in.post("/bot/campaign", form)
    assert r.code == 303, r.text
    bot = await stored_bot(api, ui_account)
    assert bot["campaigns"] == {"spring <sale>": {
        "active": True, "greeting": "", "rules": [{"keywords": ["price"], "answer": "Spring: $5."}],
        "provider": {"systemPrompt": "Spring tone.", "apiKeySet": False}}}
    assert bot_settings.effective(bot, "spring <sale>")["greeting"] == ""  # overridden with nothing
    # Saved again without the override boxes: back to the account's.
    r = await signed_in.post("/bot/campaign", {"campaignId": "spring <sale>", "active": "", "rule_rows": "0"})
    assert (await stored_bot(api, ui_account))["campaigns"] == {"spring <sale>": {}}
    await signed_in.post("/bot/campaign", {"campaignId": "spring <sale>", "action": "remove"})
    assert "campaigns" not in await stored_bot(api, ui_account)


async def test_try_it_shows_what_the_bot_would_send_and_why(signed_in, api, ui_account):
    await signed_in.post("/bot/account", account_form(active=""))
    r = await signed_in.post("/bot/test", {"body": "What does it COST?"})
    assert "<code>not_sent</code>" in r.text and "no Custom Channel Webhook URL" in r.text
    await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "http://127.0.0.1:9/r"},
                    key=ui_account["api_key"])
    r = await signed_in.post("/bot/test", {"body": "What does it COST?", "campaignId": "", "contactId": ""})
    assert r.code == 200
    assert re.search(r"Would send</dt><dd><q class=\"reply\">Plans start at \$10\.</q>", r.text)
    assert "<code>rule</code>" in r.text and "keyword &#34;cost&#34; of rule 1" in r.text
    assert "The bot is off for this message" in r.text
    assert "What does it COST?</textarea>" in r.text
    r = await signed_in.post("/bot/test", {"body": "hi", "contactId": "ct_nope"})
    assert r.code == 404 and "no contact with id ct_nope" in r.text


# ---- end to end: the real server over HTTPS, driven by headless Chromium ----------------------

@pytest.fixture
def page(chromium):
    context, page = open_page(chromium, viewport={"width": 390, "height": 844})  # a phone
    yield page
    context.close()


def test_browser_configures_the_bot_and_tries_it_on_a_phone(page, parley, tmp_path):
    """The page at phone width: rules and handoff keywords edited, the provider key write-only (shows "set",
    can be cleared), a campaign added, "Try it" answered; no CSP violation."""
    with parley.client() as api:  # somewhere to send replies, or Try it says it could not send one
        assert api.patch("/v1/account/settings", params={"apiKey": parley.first_run["api_key"]},
                         json={"customChannelWebhookUrl": "http://127.0.0.1:9/replies"}).status_code == 200
    sign_in(page, parley)
    page.click("nav >> text=Bot")
    assert page.url == parley.base + "/bot"
    page.check("#acct-active")
    page.fill("#acct-rule-0-keywords", "price, cost")
    page.fill("#acct-rule-0-answer", "Plans start at $10.")
    page.fill("#acct-handoff", "human")
    page.fill("#acct-baseUrl", "http://127.0.0.1:9/v1")
    page.fill("#acct-model", "tiny")
    page.fill("#acct-apiKey", "sk-browser-secret")
    page.click("button:has-text('Save bot settings')")
    assert page.inner_text(".flash-success") == "Bot settings saved."
    assert page.input_value("#acct-apiKey") == "" and "sk-browser-secret" not in page.content()
    assert page.inner_text("#acct-apiKey-state") == "The key is set; it is never shown."
    assert page.input_value("#acct-rule-0-keywords") == "price, cost"

    page.fill("#new-campaign", "spring")
    page.click("button:has-text('Add campaign')")
    page.check("#c1-override-rules")
    page.fill("#c1-rule-0-keywords", "price")
    page.fill("#c1-rule-0-answer", "Spring price: $5.")
    page.click("button:has-text('Save campaign spring')")
    assert page.inner_text(".flash-success") == "Campaign spring saved."

    page.fill("#try-body", "what is the PRICE?")
    page.fill("#try-campaign", "spring")
    page.click("button:has-text('Try it')")
    assert page.inner_text("#try-result q.reply") == "Spring price: $5."
    assert "rule" in page.inner_text("#try-result")
    # Labelled controls and nothing wider than the phone.
    for control in page.query_selector_all("main input:not([type=hidden]), main textarea, main select"):
        control_id = control.get_attribute("id")
        assert control_id and page.query_selector(f"label[for='{control_id}']"), control_id
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(tmp_path / "bot-phone.png"), full_page=True)
    assert page.console_errors == []

    page.goto(parley.base + "/bot")
    page.check("#acct-clearKey")
    page.click("button:has-text('Save bot settings')")
    assert page.inner_text("#acct-apiKey-state") == "The key is not set; it is never shown."
    assert page.console_errors == []
