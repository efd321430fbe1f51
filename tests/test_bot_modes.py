"""The bot's answer modes (issue 22): a real local HTTP server plays each behaviour of small models and of
servers seen in the wild (a parroted placeholder, an empty answer, fenced JSON, chat-template debris, a
server that refuses json_schema), and the bot answers usefully without losing the structured handoff; every
request bounds the answer's length (max_tokens)."""
import json

import pytest

from handlers.message_schemas import OutboundCustomData
from services import bot_answer, bot_provider
from tests.bot_helpers import account_form, bot_replies, configure, say, stored_bot
from tests.bot_helpers import BOT_SETTINGS

pytestmark = pytest.mark.settings(**BOT_SETTINGS)  # as tests/test_bot.py

OLD_PLACEHOLDER = '{"reply": "<your message to the customer>", "handoff": false}'


async def _bot(api, key, provider, **extra):
    await configure(api, key, {"active": True, "fallback": "A person will answer soon.", "provider": {
        "baseUrl": provider.base_url, "model": "tiny", "timeoutSeconds": 5, **extra}})


def _formats(provider):
    return [(r["body"].get("response_format") or {}).get("type", "plain") for r in provider.requests]


async def test_a_parroted_placeholder_is_asked_again_once_as_plain_text(api, account, services, provider):
    key, account_id = account["api_key"], account["account_id"]
    await _bot(api, key, provider)
    provider.script = [("content", OLD_PLACEHOLDER), ("content", "We open at 10 on Saturday.<end_of_turn>")]
    outcome = (await say(api, services, key, "When do you open on Saturday?"))["bot"]
    assert outcome["outcome"] == "provider" and outcome["detail"].startswith("unstructured answer"), outcome
    assert "copied" in outcome["detail"]
    assert bot_replies(services, account_id)[-1]["body"] == "We open at 10 on Saturday."
    assert _formats(provider) == ["json_schema", "plain"]
    plain = provider.requests[-1]["body"]
    assert "response_format" not in plain and bot_answer.PLAIN_INSTRUCTION in plain["messages"][0]["content"]
    # The format instruction has no example value a model could copy.
    system = provider.requests[0]["body"]["messages"][0]["content"]
    assert "<" not in system and "your message" not in system


@pytest.mark.parametrize("content", ['{"reply": "", "handoff": false}', "", "   ", '{"reply": "...", "handoff": false}',
                                     '{"reply": "string", "handoff": false}'])
async def test_an_empty_structured_answer_is_asked_again_as_plain_text(api, account, services, provider, content):
    key = account["api_key"]
    await _bot(api, key, provider)
    provider.script = [("content", content), ("content", "Hello! How can I help?")]
    outcome = (await say(api, services, key, "hi"))["bot"]
    assert (outcome["outcome"], outcome["detail"][:19]) == ("provider", "unstructured answer")
    assert _formats(provider) == ["json_schema", "plain"]


@pytest.mark.parametrize("content, reply", [
    ('```json\n{"reply": "We open at 10.", "handoff": false}\n```', "We open at 10."),
    ('<start_of_turn>model\n{"reply": "We open at 10.", "handoff": false}<end_of_turn>\n<start_of_turn>user\nok',
     "We open at 10."),
    ('{"reply": "We open at 10.<end_of_turn>", "handoff": false}<|im_end|>', "We open at 10."),
])
async def test_fences_and_template_debris_are_stripped_from_a_structured_answer(api, account, services, provider,
                                                                               content, reply):
    key, account_id = account["api_key"], account["account_id"]
    await _bot(api, key, provider)
    provider.script = [("content", content)]
    outcome = (await say(api, services, key, "When do you open?"))["bot"]
    assert (outcome["outcome"], outcome["detail"]) == ("provider", "model tiny (json_schema)")
    assert bot_replies(services, account_id)[-1]["body"] == reply
    assert len(provider.requests) == 1


async def test_a_server_that_refuses_json_schema_is_asked_in_json_mode_and_can_still_hand_off(api, account,
                                                                                               services, provider):
    """llama-cpp-python's server answers 422 to response_format json_schema; its JSON mode reads a schema."""
    key = account["api_key"]
    await _bot(api, key, provider)
    provider.script = [("status", 422), ("answer", "", True)]
    outcome = (await say(api, services, key, "I want to talk to a person"))["bot"]
    assert outcome["outcome"] == "handoff" and "(json_object)" in outcome["detail"], outcome
    assert _formats(provider) == ["json_schema", "json_object"]
    assert provider.requests[1]["body"]["response_format"] == {"type": "json_object", "schema": bot_answer.SCHEMA}


@pytest.mark.parametrize("status, error, asked_in, token_limits", [
    # llama-cpp-python's server (0.3.36) answers json_schema with a 500 carrying the validation error: a refusal.
    (500, "1 validation error: ('body', 'response_format', 'type') Input should be 'text' or 'json_object'",
     "json_object", ["max_tokens", "max_tokens"]),
    # OpenAI's reasoning models refuse max_tokens with a 400 naming max_completion_tokens: not a refused format.
    (400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
     "json_schema", ["max_tokens", "max_completion_tokens"]),
])
async def test_an_error_that_names_what_to_change_is_asked_again_with_it(api, account, services, provider, status,
                                                                          error, asked_in, token_limits):
    key = account["api_key"]
    await _bot(api, key, provider)
    provider.script = [("status", status, error), ("answer", "We open at 10.", False)]
    outcome = (await say(api, services, key, "When do you open?"))["bot"]
    assert (outcome["outcome"], outcome["detail"]) == ("provider", f"model tiny ({asked_in})")
    assert _formats(provider) == ["json_schema", asked_in]
    assert [next(k for k in r["body"] if k.startswith("max_")) for r in provider.requests] == token_limits
    assert provider.requests[1]["body"][token_limits[1]] == bot_provider.MAX_TOKENS


async def test_a_refusal_in_an_explicit_mode_is_a_failure_not_a_guess(api, account, services, provider):
    key = account["api_key"]
    await _bot(api, key, provider, mode="json_schema")
    provider.script = [("status", 400)]
    outcome = (await say(api, services, key, "hello"))["bot"]
    assert outcome["outcome"] == "provider_failed" and outcome["detail"].startswith("HTTP 400"), outcome
    assert "(response format json_schema)" in outcome["detail"] and _formats(provider) == ["json_schema"]


@pytest.mark.parametrize("mode, first", [("json_object", "json_object"), ("json_schema", "json_schema"),
                                         ("plain", "plain")])
async def test_each_mode_asks_in_its_format(api, account, services, provider, mode, first):
    key, account_id = account["api_key"], account["account_id"]
    await _bot(api, key, provider, mode=mode)
    provider.script = [("content", "We open at 10." if mode == "plain" else
                        '{"reply": "We open at 10.", "handoff": false}')]
    outcome = (await say(api, services, key, "When do you open?"))["bot"]
    assert outcome["outcome"] == "provider" and _formats(provider) == [first]
    assert outcome["detail"] == f"model tiny ({first})"
    assert bot_replies(services, account_id)[-1]["body"] == "We open at 10."


# The characters a message body may hold (65,536): the limit on a message sent through the API.
BODY_LIMIT = OutboundCustomData.model_json_schema()["properties"]["body"]["maxLength"]


@pytest.mark.parametrize("script", [
    [("answer", "x" * (BODY_LIMIT + 1000), False)],
    # Cut short by max_tokens in the middle of the JSON, then the plain-text request, as long again.
    [("content", '{"reply": "' + "y" * 3000), ("content", "z" * (BODY_LIMIT + 1000))],
])
async def test_every_request_bounds_the_answer_and_a_longer_reply_is_cut(api, account, services, provider, script):
    """A provider is never left to write (and bill) an answer of any length: each request, structured or plain,
    carries max_tokens; an answer longer than a message body may be is sent cut at MAX_REPLY_CHARS."""
    key, account_id = account["api_key"], account["account_id"]
    await _bot(api, key, provider)
    provider.script = list(script)
    outcome = (await say(api, services, key, "Tell me everything"))["bot"]
    assert outcome["outcome"] == "provider", outcome
    assert [r["body"]["max_tokens"] for r in provider.requests] == [bot_provider.MAX_TOKENS] * len(script)
    assert bot_answer.MAX_REPLY_CHARS <= bot_provider.MAX_TOKENS < BODY_LIMIT
    reply = bot_replies(services, account_id)[-1]
    assert len(reply["body"]) == bot_answer.MAX_REPLY_CHARS < BODY_LIMIT
    assert json.loads(reply["payload"])["body"] == reply["body"]  # what is delivered


async def test_a_plain_answer_with_nothing_in_it_sends_the_fallback(api, account, services, provider):
    key, account_id = account["api_key"], account["account_id"]
    await _bot(api, key, provider, mode="plain")
    provider.script = [("content", "<end_of_turn>")]
    outcome = (await say(api, services, key, "hello"))["bot"]
    assert outcome["outcome"] == "provider_failed" and "plain-text answer had nothing usable" in outcome["detail"]
    assert bot_replies(services, account_id)[-1]["body"] == "A person will answer soon."


async def test_the_mode_is_saved_validated_and_shown_by_the_dry_run(api, account, services, provider):
    key = account["api_key"]
    await _bot(api, key, provider, mode="json_object")
    r = await api.get("/v1/account", key=key)
    assert r.json["settings"]["bot"]["provider"]["mode"] == "json_object"
    r = await api.patch("/v1/account/settings", {"bot": {"provider": {"mode": "xml"}}}, key=key)
    assert r.code == 400 and r.json["error"]["message"].startswith("bot.provider.mode"), r.body
    assert (await api.get("/v1/account", key=key)).json["settings"]["bot"]["provider"]["mode"] == "json_object"
    provider.script = [("content", OLD_PLACEHOLDER), ("content", "Hi!")]
    r = await api.post("/v1/bot/test", {"body": "hello"}, key=key)
    assert (r.json["reason"], r.json["providerMode"], r.json["reply"]) == ("provider", "plain", "Hi!")


@pytest.mark.parametrize("text, cleaned", [
    ("<start_of_turn>model\nHello<end_of_turn>", "Hello"),
    ("<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nmore", "Hello"),
    ("Hello</s>", "Hello"),
    ("```\nHello\n```", "Hello"),
    ("We are open 9-5.", "We are open 9-5."),
])
def test_clean(text, cleaned):
    assert bot_answer.clean(text) == cleaned


@pytest.mark.parametrize("reply, copied", [("<your message to the customer>", True), ("[your reply]", True),
                                           ("Your reply", True), ("We open at 10.", False),
                                           ("Sure, see you Saturday!", False)])
def test_parroted(reply, copied):
    assert bot_answer.parroted(reply) is copied


async def test_the_bot_page_saves_the_mode_refuses_an_unknown_one_and_try_it_shows_the_format(
        signed_in, api, ui_account, provider):
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "http://127.0.0.1:9/replies"},
                        key=ui_account["api_key"])
    assert r.code == 200
    form = account_form(**{"provider-baseUrl": provider.base_url, "provider-model": "tiny", "provider-mode": "plain"})
    r = await signed_in.post("/bot/account", form)
    assert r.code == 303, r.text
    assert (await stored_bot(api, ui_account))["provider"]["mode"] == "plain"
    page = await signed_in.get("/bot")
    assert '<option value="plain" selected>plain</option>' in page.text
    r = await signed_in.post("/bot/account", {**form, "provider-mode": "xml"})
    assert r.code == 400 and "bot.provider.mode" in r.text
    assert (await stored_bot(api, ui_account))["provider"]["mode"] == "plain"
    provider.script = [("content", "We open at 10.")]
    r = await signed_in.post("/bot/test", {"body": "when do you open?"})
    assert r.code == 200 and 'answer format <code class="provider-mode">plain</code>' in r.text
