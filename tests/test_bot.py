"""The bot (docs/design.md#api-decisions "Bot") in the in-process app on a real SQLite file, with a real local HTTP server
speaking chat-completions as its AI provider: the decision order, outcomes, pauses, credits, the
provider protocol and its failures, bounded concurrency, and the dry run (POST /v1/bot/test).
Delivery to a real receiver over HTTPS, verified with standardwebhooks, is in tests/test_bot_e2e.py."""
import asyncio
import json

import pytest
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from services import accounts, bot, bot_match, bot_provider, bot_runner, messaging
from services.netguard import CheckedResolver
from storage import bot_state
from storage.db import writes
from tests.api_helpers import get_message, post_inbound
from tests.bot_helpers import BOT_SETTINGS, RULES, bot_replies, configure, say
from tests.db_direct import rows
from tests.recharge import grant

pytestmark = pytest.mark.settings(**BOT_SETTINGS)


@writes
def _opt_out(cx, account_id, contact_id):
    cx.execute("UPDATE contacts SET opted_out = 1 WHERE account_id = ? AND id = ?", (account_id, contact_id))


# ---- keywords ---------------------------------------------------------------------------------

def first_keyword(keywords, text):
    found = bot_match.Matcher(keywords, []).first(text)
    return found and found[1]


@pytest.mark.parametrize("text, found", [
    ("What is the PRICE?", "price"), ("price.", "price"), ("Cost/benefit", "cost"),
    ("How much does it cost", "cost"), ("ＰＲＩＣＥ please", "price"),  # full-width letters (NFKC)
    ("prices?", None), ("priceless", None), ("overcost", None), ("cost_of_it", None),
    ("We open at 9", "open"), ("What are your OPENING\n  hours", "opening hours"), ("opening?", None),
])
def test_a_keyword_matches_as_a_whole_word_case_insensitively(text, found):
    """docs/design.md#api-decisions: "A rule answers when one of its keywords occurs in the message as a word,
    case-insensitively"; word boundaries are Unicode's (\\w), so "prices" is not "price"."""
    keywords = ["price", "cost", "opening hours", "open"]
    assert first_keyword(keywords, text) == found


def test_the_first_rule_wins_wherever_its_keyword_is_and_overlapping_keywords_are_all_seen():
    """One automaton for all the keywords keeps the bot's order: handoff keywords, then rules in order, then a
    rule's keywords in order; keywords that overlap or share a start are each found."""
    rules = [{"keywords": ["cd"]}, {"keywords": ["ab cd", "ab"]}, {"keywords": ["b"]}]
    matcher = bot_match.Matcher(["agent"], rules)
    assert matcher.first("ab cd") == (0, "cd")        # rule 0's keyword inside rule 1's longer one
    assert matcher.first("ab cdx") == (1, "ab")       # "ab cd" fails its boundary; "ab" is rule 1's second
    assert matcher.first("ab, cd? AGENT") == (bot_match.HANDOFF, "agent")
    assert matcher.first("xyz") is None
    long = "x " * bot_match.MAX_MATCHED_CHARS + "cd"  # past the matched part of the message
    assert matcher.first(long) is None


def test_keywords_in_other_scripts():
    assert first_keyword(["straße"], "STRASSE 5") == "straße"  # full case folding
    assert first_keyword(["цена"], "Какая ЦЕНА?") == "цена"
    assert first_keyword(["цена"], "ценами") is None
    assert first_keyword(["价格"], "请问价格是多少") == "价格"  # no spaces between words in Chinese
    assert first_keyword(["café"], "un CAFÉ!") == "café"


# ---- answering ------------------------------------------------------------------------------

async def test_a_rule_answers_with_a_bot_reply_under_the_messages_campaign(api, account, services):
    """Spec §4.4: the service "has the bot answer when it is active"; §6: replies "written by the bot" go to
    the Custom Channel Webhook; docs/design.md#api-decisions: the reply payload carries the campaignId it was answered under."""
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "rules": RULES})
    inbound = await say(api, services, key, "How much does it COST?", channel="webchat", campaignId="c-9")
    [reply] = bot_replies(services, account_id)
    assert inbound["bot"] == {"outcome": "rule", "detail": 'keyword "cost" of rules[0]', "replyId": reply["id"]}
    assert (reply["body"], reply["campaign_id"], reply["to_id"], reply["channel"]) == \
        ("Plans start at $10.", "c-9", "user-1", "webchat")
    payload = json.loads(reply["payload"])
    assert payload["campaignId"] == "c-9" and payload["body"] == "Plans start at $10."
    shown = await get_message(api, key, reply["id"])
    assert (shown["author"], shown["status"], shown["bot"]) == ("bot", "Pending", None)
    page = (await api.get(f"/v1/contacts/{inbound['contactId']}/messages", key=key)).json["data"]
    assert [m["bot"] and m["bot"]["outcome"] for m in page] == ["rule", None]


async def test_the_order_handoff_greeting_rule_fallback(api, account, services):
    """Brief: "greeting on a contact's first message (when set); else the first rule ...; else the AI
    provider when configured; else the fallback when set"; a handoff keyword comes first."""
    key = account["api_key"]
    await configure(api, key, {"active": True, "greeting": "Welcome!", "rules": RULES,
                               "fallback": "A person will answer soon."})
    first = await say(api, services, key, "what is the price", fromId="a")
    assert first["bot"]["outcome"] == "greeting" and first["bot"]["detail"] == "the contact's first message"
    assert (await say(api, services, key, "and the price?", fromId="a"))["bot"]["outcome"] == "rule"
    assert (await say(api, services, key, "when are you open?", fromId="a"))["bot"]["detail"] == \
        'keyword "open" of rules[1]'
    fallback = await say(api, services, key, "do you ship to Mars", fromId="a")
    assert (fallback["bot"]["outcome"], fallback["bot"]["replyId"] is not None) == ("fallback", True)
    await configure(api, key, {"fallback": None, "handoffKeywords": ["human"]})
    assert (await say(api, services, key, "do you ship to Mars", fromId="a"))["bot"] == {
        "outcome": "no_answer", "detail": "no rule matched, and neither an AI provider nor a fallback is set",
        "replyId": None}
    handoff = await say(api, services, key, "HUMAN please, the price is wrong", fromId="b")  # first message too
    assert handoff["bot"]["outcome"] == "handoff"  # its reply, the handoffMessage: tests/test_handoff.py


async def test_an_inactive_bot_and_a_reaction_record_nothing(api, account, services):
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": False, "rules": RULES, "campaigns": {"on": {"active": True}}})
    assert (await say(api, services, key, "price?"))["bot"] is None
    assert (await say(api, services, key, "price?", campaignId="on"))["bot"]["outcome"] == "rule"
    r = await api.post("/v1/incoming_custom_channel_message", {"messageType": "reaction", "customData": {
        "messageSid": "r-1", "fromId": "user-1", "toId": "shop", "body": "price", "campaignId": "on"}}, key=key)
    await services.bot.idle()
    assert (await get_message(api, key, r.json["messageId"]))["bot"] is None
    assert len(bot_replies(services, account_id)) == 1


async def test_a_campaign_uses_its_own_rules(api, account, services):
    """Spec §4.4: campaignId "Routes the message to a specific bot configuration"."""
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "rules": RULES, "campaigns": {
        "spring": {"rules": [{"keywords": ["price"], "answer": "Spring price: $5."}]}}})
    await say(api, services, key, "price?", campaignId="spring")
    await say(api, services, key, "price?")
    assert [r["body"] for r in bot_replies(services, account_id)] == ["Spring price: $5.", "Plans start at $10."]


async def test_a_handoff_pauses_the_bot_until_resumed(api, account, services):
    key = account["api_key"]
    await configure(api, key, {"active": True, "rules": RULES, "handoffKeywords": ["agent"]})
    handoff = await say(api, services, key, "I want an agent")
    paused = await say(api, services, key, "price?")
    assert paused["bot"]["outcome"] == "paused" and "(handoff)" in paused["bot"]["detail"]
    assert await bot.resume(services, account["account_id"], handoff["contactId"]) is True
    assert (await say(api, services, key, "price?"))["bot"]["outcome"] == "rule"


async def test_a_persons_reply_pauses_the_bot_for_that_contact(api, account, other_account, services):
    """Brief: a reply by a person (author user from the inbox, or api from POST send_custom_channel_message)
    pauses the bot for that contact for pauseMinutesAfterHumanReply, inside the outbound message's write."""
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "rules": RULES, "pauseMinutesAfterHumanReply": 45})
    first = await say(api, services, key, "price?", fromId="p")
    r = await api.post("/v1/send_custom_channel_message", {"customData": {
        "fromId": "p", "customChannel": "webchat", "body": "A person here."}}, key=key)
    assert r.code == 200
    [pause] = rows(services, "SELECT reason, paused_until, created_at FROM bot_pauses WHERE contact_id = ?",
                   first["contactId"])
    assert pause["reason"] == "human_reply"
    minutes = (_parse(pause["paused_until"]) - _parse(pause["created_at"])).total_seconds() / 60
    assert minutes == 45
    assert (await say(api, services, key, "price?", fromId="p"))["bot"]["outcome"] == "paused"
    # The inbox's path: send_reply(author="user") pauses too; the bot's own replies do not.
    other = await say(api, services, key, "price?", fromId="q")
    assert other["bot"]["outcome"] == "rule"
    await bot.resume(services, account_id, first["contactId"])
    await messaging.send_reply(services, account_id, first["contactId"], "Typed in the inbox", author="user")
    assert rows(services, "SELECT reason FROM bot_pauses WHERE contact_id = ?", first["contactId"]) == \
        [{"reason": "human_reply"}]
    # Without an active bot a person's reply pauses it too (issue 25 §5): switching it on later must not barge in.
    await configure(api, other_account["api_key"], {"active": False})
    r = await api.post("/v1/send_custom_channel_message", {"customData": {
        "fromId": "p", "customChannel": "webchat", "body": "Hello"}}, key=other_account["api_key"])
    assert r.code == 200
    assert [r["reason"] for r in rows(services, "SELECT * FROM bot_pauses WHERE account_id = ?",
                                      other_account["account_id"])] == ["human_reply"]


def _parse(text):
    from common.ids import parse_iso
    return parse_iso(text)


async def test_an_opted_out_contact_is_never_answered(api, account, services):
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "rules": RULES, "fallback": "Hmm."})
    first = await say(api, services, key, "price?")
    await _opt_out(services.db, account_id, first["contactId"])
    assert (await say(api, services, key, "price?"))["bot"] == {
        "outcome": "opted_out", "detail": "the contact opted out", "replyId": None}
    assert len(bot_replies(services, account_id)) == 1


async def test_no_webhook_url_means_no_reply_and_says_so(api, account, services):
    key = account["api_key"]
    await configure(api, key, {"active": True, "rules": RULES}, webhook=None)
    outcome = (await say(api, services, key, "price?"))["bot"]
    assert outcome["outcome"] == "not_sent" and "no Custom Channel Webhook URL" in outcome["detail"]


# ---- credits ---------------------------------------------------------------------------------

async def test_each_reply_of_a_sub_account_spends_credits_until_there_are_too_few(api, agency, sub, services):
    """docs/design.md#api-decisions "Credits": "Each bot reply spends credits (1 by default) from a sub-account ... at zero the
    bot stays silent and the inbox says why"; the spend is in the reply's transaction."""
    await grant(api, agency, sub, 2.5)
    key, account_id = sub["api_key"], sub["account_id"]
    r = await api.patch(f"/v1/subaccounts/{account_id}", {"creditsPerReply": 1.25}, key=agency["api_key"])
    assert r.code == 200 and r.json["creditsPerReply"] == 1.25, r.body
    await configure(api, key, {"active": True, "rules": RULES})
    for _ in range(2):
        assert (await say(api, services, key, "price?"))["bot"]["outcome"] == "rule"
    silent = await say(api, services, key, "price?")
    assert silent["bot"]["outcome"] == "no_credits"
    assert silent["bot"]["detail"].startswith("the balance of 0 credits is below creditsPerReply 1.25")
    assert (await api.get("/v1/account", key=key)).json["credits"] == 0
    replies = bot_replies(services, account_id)
    spends = rows(services, "SELECT amount, balance_after, description FROM credit_transactions"
                            " WHERE account_id = ? AND kind = 'spend' ORDER BY id", account_id)
    assert spends == [{"amount": -125, "balance_after": 125, "description": f"bot reply {replies[0]['id']}"},
                      {"amount": -125, "balance_after": 0, "description": f"bot reply {replies[1]['id']}"}]
    # The agency and standard accounts are not charged.
    await configure(api, agency["api_key"], {"active": True, "rules": RULES})
    assert (await say(api, services, agency["api_key"], "price?"))["bot"]["outcome"] == "rule"
    assert rows(services, "SELECT * FROM credit_transactions WHERE account_id = ? AND kind = 'spend'",
                agency["account_id"]) == []


async def test_no_credits_is_decided_again_inside_the_reply_write(api, agency, sub, services):
    """The balance read with the message can be stale by the time the reply is written: the spend inside the
    reply's transaction decides, and a reply it refuses is not stored."""
    await grant(api, agency, sub, 1)
    key, account_id = sub["api_key"], sub["account_id"]
    await configure(api, key, {"active": False, "rules": RULES})
    first, second = [await say(api, services, key, "hello") for _ in range(2)]  # inactive: no outcome yet
    context = {"config": {}, "account_type": "subaccount", "credits_per_reply": None}  # the default: 1

    def stored(message):
        return {**message, "account_id": account_id, "contact_id": message["contactId"], "channel": None,
                "from_id": "user-1", "campaign_id": None}
    decision = bot.Decision("rule", "test", reply="One")
    assert await bot.apply(services, stored(first), context, decision) == "rule"
    assert await bot.apply(services, stored(second), context, decision) == "no_credits"  # the balance is 0 now
    assert len(bot_replies(services, account_id)) == 1
    assert (await get_message(api, key, second["id"]))["bot"]["outcome"] == "no_credits"


# ---- the AI provider -------------------------------------------------------------------------

async def test_the_provider_answers_from_the_system_prompt_and_a_bounded_conversation(api, account, services,
                                                                                      provider):
    """Brief: chat-completions (POST {baseUrl}/chat/completions, model, messages, bearer key) with the system
    prompt and the recent conversation, bounded by count (--bot-history-messages 4 here) and characters
    (--bot-history-chars 60 here)."""
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "rules": RULES, "provider": {
        "baseUrl": provider.base_url, "model": "tiny", "apiKey": "sk-test", "systemPrompt": "You sell bikes."}})
    for text in ("one " * 10, "price?", "two " * 5, "three", "four " * 3):
        await say(api, services, key, text.strip())
    answered = await say(api, services, key, "Which bike for a child?")
    assert answered["bot"]["outcome"] == "provider" and answered["bot"]["detail"] == "model tiny (json_schema)"
    assert bot_replies(services, account_id)[-1]["body"] == "Provider says hi"
    request = provider.requests[-1]
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "tiny" and body["response_format"]["type"] == "json_schema"
    system, *conversation = body["messages"]
    assert system["role"] == "system" and system["content"].startswith("You sell bikes.")
    assert '"handoff"' in system["content"]
    # Of the 11 messages, the newest 4 are the provider's reply to "three", "four four four", its reply to
    # that, and the new question; the 60-character budget then leaves out the oldest of those.
    assert conversation == [{"role": "user", "content": "four four four"},
                            {"role": "assistant", "content": "Provider says hi"},
                            {"role": "user", "content": "Which bike for a child?"}]
    assert sum(len(m["content"]) for m in conversation) <= 60


def test_the_conversation_is_bounded_and_keeps_the_newest_message():
    history = [{"direction": "inbound", "body": "x" * 100}, {"direction": "outbound", "body": "older"}]
    assert bot_provider.conversation(history, 20, 30) == [{"role": "user", "content": "x" * 30}]
    history = [{"direction": "inbound", "body": "new"}, {"direction": "outbound", "body": "reply"},
               {"direction": "inbound", "body": "old"}]
    assert [m["content"] for m in bot_provider.conversation(history, 2, 100)] == ["reply", "new"]


async def test_the_provider_hands_off_by_a_structured_answer(api, account, services, provider):
    """Brief: the decision to hand off is structured, never guessed from prose."""
    key = account["api_key"]
    await configure(api, key, {"active": True, "provider": {"baseUrl": provider.base_url, "model": "tiny"}})
    provider.script = [("answer", "I will get a colleague.", True),
                       ("answer", "Let me get a human for you", False)]
    handoff = await say(api, services, key, "this is urgent")
    assert handoff["bot"]["outcome"] == "handoff" and handoff["bot"]["replyId"]
    assert (await get_message(api, key, handoff["bot"]["replyId"]))["body"] == "I will get a colleague."
    assert (await say(api, services, key, "hello?"))["bot"]["outcome"] == "paused"
    await bot.resume(services, account["account_id"], handoff["contactId"])
    prose = await say(api, services, key, "hello?")  # the word "human" in prose is just a reply
    assert prose["bot"]["outcome"] == "provider"


@pytest.mark.parametrize("step, error", [
    (("status", 500), "HTTP 500"),
    (("status", 401), "HTTP 401"),
    (("status", 422), "HTTP 422"),  # json_schema refused, then json_object refused too
    (("content", "{}"), "malformed answer: json_schema: an empty reply without a handoff; the plain-text answer "
                        "had nothing usable either"),
    ("hang", "timeout: no answer within 1 s"),
    # The model server died mid-answer (issue 43 §14: llama.cpp's segfault on the first token), or before any.
    (("drop", b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{\"id\": \"chat"),
     "connection error: the model server closed the connection before its answer was complete"),
    (("drop", b""), "connection error: the model server closed the connection before its answer was complete"),
])
async def test_a_provider_failure_sends_the_fallback_and_is_recorded(api, account, services, provider, step, error):
    """Brief: "Timeout, 4xx/5xx or malformed answer → the fallback if set, else nothing; recorded on the message
    (outcome + detail) and logged; the server never crashes or blocks"."""
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "fallback": "A person will answer soon.", "provider": {
        "baseUrl": provider.base_url, "model": "tiny", "timeoutSeconds": 1}})
    # Each step is the answer to the structured request and to the one that follows it (the next format, or
    # the plain-text request).
    provider.script = [step, step]
    outcome = (await say(api, services, key, "hello"))["bot"]
    assert outcome["outcome"] == "provider_failed" and outcome["detail"].startswith(error), outcome
    assert outcome["detail"].endswith("; the fallback was sent")
    assert bot_replies(services, account_id)[-1]["body"] == "A person will answer soon."
    await configure(api, key, {"fallback": None})
    provider.script = [step, step]
    outcome = (await say(api, services, key, "hello"))["bot"]
    assert (outcome["outcome"], outcome["replyId"]) == ("provider_failed", None)
    assert len(bot_replies(services, account_id)) == 1


async def test_the_provider_is_behind_the_ssrf_guard_when_connecting(provider):
    """Brief: "the same SSRF guard as webhooks"; a provider URL stored before a host moved to a private
    address is refused when connecting, not only when saved."""
    http = SimpleAsyncHTTPClient(force_instance=True, resolver=CheckedResolver(allow_private=False))
    try:
        with pytest.raises(bot_provider.ProviderError, match="refused"):
            await bot_provider.ask(http, {"baseUrl": provider.base_url.replace("http:", "https:"), "model": "m"},
                                   None, [], allow_private=False)
        with pytest.raises(bot_provider.ProviderError, match="must be an https:// URL"):
            await bot_provider.ask(http, {"baseUrl": provider.base_url, "model": "m"}, None, [], allow_private=False)
    finally:
        http.close()
    assert provider.requests == []


async def test_answers_run_after_the_200_with_bounded_concurrency(api, account, services, provider):
    """Brief: answering after the inbound 200, never on the request path, with bounded concurrency
    (--bot-concurrency 2 here): five messages while the provider hangs get five 200s, two provider calls."""
    key = account["api_key"]
    await configure(api, key, {"active": True, "provider": {"baseUrl": provider.base_url, "model": "tiny"}})
    provider.script = ["hang"] * 5
    answers = [await post_inbound(api, key, body=f"question {n}", fromId=f"c{n}") for n in range(5)]
    assert [r.code for r in answers] == [200] * 5  # answered while every provider call is blocked
    while provider.in_flight < 2:
        await asyncio.sleep(0.01)
    assert len(services.bot._tasks) == 5 and services.bot._slots.locked()  # three wait for a slot
    provider.release.set()
    await services.bot.idle()
    assert provider.most_in_flight == 2 and len(provider.requests) == 5
    for r in answers:
        assert (await get_message(api, key, r.json["messageId"]))["bot"]["outcome"] == "provider"


async def test_one_contacts_messages_are_decided_one_after_another(api, account, services, provider):
    """A message that comes while the provider decides the contact's previous one waits for that decision:
    when it hands off, the next one finds the bot paused (before, it was answered beside the handoff)."""
    key = account["api_key"]
    await configure(api, key, {"active": True, "provider": {"baseUrl": provider.base_url, "model": "tiny"}})
    provider.script = [("hang", ("answer", "I will get a colleague.", True)), ("answer", "Sure, here you go", False)]
    first = await post_inbound(api, key, body="this is urgent", fromId="u-order")
    second = await post_inbound(api, key, body="hello?", fromId="u-order")
    contact_id = (await get_message(api, key, first.json["messageId"]))["contactId"]
    # Both messages are with the runner: the second waits its turn, or (the bug) is at the provider too.
    # (the first at the provider and both with the runner: the queue counts before its request reaches the provider)
    while provider.in_flight < 2 and not (
            provider.in_flight == 1 and services.bot.contact_queue(account["account_id"], contact_id) >= 2):
        await asyncio.sleep(0.01)
    assert provider.in_flight == 1
    provider.release.set()
    await services.bot.idle()
    outcomes = [(await get_message(api, key, r.json["messageId"]))["bot"]["outcome"] for r in (first, second)]
    assert outcomes == ["handoff", "paused"] and len(provider.requests) == 1


# ---- the dry run -------------------------------------------------------------------------------

async def test_the_dry_run_answers_like_a_message_and_changes_nothing(api, agency, sub, services, provider):
    """docs/design.md#api-decisions: "POST /v1/bot/test {body, campaignId?, contactId?} → {reply, reason}: what the bot would do,
    sending and spending nothing"; the same decision as a real message."""
    await grant(api, agency, sub, 1)
    key, account_id = sub["api_key"], sub["account_id"]
    await configure(api, key, {"active": False, "greeting": "Welcome!", "rules": RULES, "handoffKeywords": ["human"],
                               "campaigns": {"spring": {"rules": [{"keywords": ["price"], "answer": "$5"}]}},
                               "provider": {"baseUrl": provider.base_url, "model": "tiny"}})

    async def dry(**body):
        r = await api.post("/v1/bot/test", body, key=key)
        assert r.code == 200, r.body
        return r.json

    assert await dry(body="the price?") == {"reply": "Plans start at $10.", "reason": "rule",
                                            "detail": 'keyword "price" of rules[0]', "handoff": False,
                                            "active": False, "providerMode": None}
    assert (await dry(body="the price?", campaignId="spring"))["reply"] == "$5"
    assert (await dry(body="the price?", firstMessage=True))["reason"] == "greeting"
    assert (await dry(body="get me a human"))["reason"] == "handoff"
    provider.script = [("answer", "A red one.", False)]
    assert (await dry(body="which bike?"))["reply"] == "A red one."
    assert provider.requests[-1]["body"]["messages"][-1] == {"role": "user", "content": "which bike?"}
    # As a contact: its first message (greeting), then its pause.
    await configure(api, key, {"active": True})
    first = await say(api, services, key, "hello there")
    assert first["bot"]["outcome"] == "greeting"  # the one credit is spent now
    silent = await dry(body="the price?", contactId=first["contactId"])
    assert (silent["reply"], silent["reason"]) == (None, "no_credits")
    assert 'rule: keyword "price" of rules[0]' in silent["detail"]
    await bot.resume(services, account_id, first["contactId"])
    before = rows(services, "SELECT COUNT(*) AS n FROM messages WHERE account_id = ?", account_id)
    await dry(body="get me a human", contactId=first["contactId"])
    assert rows(services, "SELECT * FROM bot_pauses WHERE account_id = ?", account_id) == []  # nothing applied
    assert rows(services, "SELECT COUNT(*) AS n FROM messages WHERE account_id = ?", account_id) == before


async def test_the_dry_run_refuses_unknown_and_foreign_contacts(api, account, other_account, services):
    key = account["api_key"]
    contact = (await say(api, services, key, "hi"))["contactId"]
    r = await api.post("/v1/bot/test", {"body": "hi", "contactId": contact}, key=other_account["api_key"])
    assert (r.code, r.json["error"]["code"]) == (404, "CONTACT_NOT_FOUND")
    r = await api.post("/v1/bot/test", {"body": "hi", "contactId": "ct_nope"}, key=key)
    assert r.code == 404
    r = await api.post("/v1/bot/test", {"body": "   "}, key=key)
    assert r.code == 400 and r.json["error"]["message"] == "body cannot be empty"
    r = await api.post("/v1/bot/test", {"body": "hi"}, key=key)  # no bot configured: nothing to say
    assert r.json == {"reply": None, "reason": "no_answer", "handoff": False, "active": False, "providerMode": None,
                      "detail": "no rule matched, and neither an AI provider nor a fallback is set"}


async def test_recovery_answers_by_state_whatever_the_age_and_never_twice(api, account, services):
    """server.py answers, once serving, what a previous run left undecided: messages stored before this run
    took requests (the boundary id) that the bot still owes a decision (bot_pending), however old, oldest
    first. A message that came in while the bot was off was never the bot's."""
    from datetime import timedelta

    from common.ids import first_id_at, new_id, utcnow
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": False, "rules": RULES})
    while_off = await say(api, services, key, "price?")  # the bot is off: not the bot's, ever
    await configure(api, key, {"active": True})
    services.bot._stopping = True  # the server "stops" before the bot starts on the next message
    r = await post_inbound(api, key, body="price?", fromId="user-1")
    services.bot._stopping = False
    # An hour old (the previous run died long ago): a wall-clock window would leave it unanswered.
    old_id = first_id_at("msg", utcnow() - timedelta(hours=1)) + "x"
    cx = services.db.connect_sync()
    cx.execute("UPDATE messages SET id = ? WHERE id = ?", (old_id, r.json["messageId"]))
    cx.commit()
    cx.close()
    boundary = new_id("msg")
    after = await say(api, services, key, "price?")  # this run's own message: answered already
    assert after["bot"]["outcome"] == "rule"
    assert await services.bot.recover(boundary) == 1
    await services.bot.idle()
    assert (await get_message(api, key, old_id))["bot"]["outcome"] == "rule"
    assert (await get_message(api, key, while_off["id"]))["bot"] is None
    assert await services.bot.recover(new_id("msg")) == 0  # decided now: nothing is answered twice
    assert len(bot_replies(services, account_id)) == 2


async def test_a_message_gets_at_most_one_bot_answer_whatever_runs_twice(api, account, services):
    """The outcome write is conditional and the reply is queued only when it won: applying a decision again
    (a recovery racing the live runner, a retried write) sends nothing more and changes nothing."""
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "rules": RULES})
    first = await say(api, services, key, "price?")
    assert first["bot"]["outcome"] == "rule"
    message = rows(services, "SELECT id, account_id, contact_id, body, channel, campaign_id, from_id FROM messages"
                             " WHERE id = ?", first["id"])[0]
    context = await services.db.read(bot_state.context_in_tx, account_id, message["contact_id"], None, first["id"])
    assert await bot.apply(services, message, context, bot.Decision("rule", "again", reply="Twice?")) is None
    assert await bot.apply(services, message, context, bot.Decision("no_answer", "again")) is None
    assert [r["body"] for r in bot_replies(services, account_id)] == ["Plans start at $10."]
    assert (await get_message(api, key, first["id"]))["bot"] == first["bot"]


@pytest.mark.sqlite_only("an SQLite trigger refuses the write as a full disk would (SQLITE_IOERR)")
async def test_a_decision_whose_write_failed_is_retried_not_dropped(api, account, services, monkeypatch, caplog):
    """The storage refuses the first write of the decision (here a trigger; in life a writer restart or a
    full disk): the runner writes it again, and the message is answered once."""
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "rules": RULES})
    monkeypatch.setattr(bot, "WRITE_RETRY_DELAYS", (0.2, 0.2, 0.2, 0.2, 0.2), raising=False)
    cx = services.db.connect_sync()
    cx.execute("CREATE TRIGGER refuse_outcome BEFORE UPDATE OF bot_outcome ON messages"
               " BEGIN SELECT RAISE(ABORT, 'disk I/O error (test)'); END")
    cx.commit()
    r = await post_inbound(api, key, body="price?", fromId="user-1")
    while "retrying" not in caplog.text and "bot failed" not in caplog.text:
        await asyncio.sleep(0.01)
    cx.execute("DROP TRIGGER refuse_outcome")
    cx.commit()
    cx.close()
    await services.bot.idle()
    assert (await get_message(api, key, r.json["messageId"]))["bot"]["outcome"] == "rule"
    assert [r["body"] for r in bot_replies(services, account_id)] == ["Plans start at $10."]


async def test_one_accounts_slow_provider_cannot_starve_another_account(api, account, other_account, services,
                                                                        provider):
    """Issue 18, item 3: each account has its share of the bot's slots (--bot-concurrency 2 here,
    --bot-concurrency-per-account 1), POST /v1/bot/test included: the first account's hanging provider,
    asked by its messages and its dry runs, holds one slot at most, and the second account is answered."""
    services.bot.per_account = 1
    slow, other = account, other_account
    await configure(api, slow["api_key"], {"active": True, "provider": {"baseUrl": provider.base_url, "model": "m"}})
    await configure(api, other["api_key"], {"active": True, "rules": RULES})
    provider.script = ["hang"] * 6
    for n in range(3):
        assert (await post_inbound(api, slow["api_key"], body=f"question {n}", fromId=f"c{n}")).code == 200
    dry_runs = [asyncio.ensure_future(api.post("/v1/bot/test", {"body": "hello?"}, key=slow["api_key"]))
                for _ in range(3)]
    while provider.in_flight < 1:
        await asyncio.sleep(0.01)
    r = await post_inbound(api, other["api_key"], body="price?", fromId="someone")
    dry = await api.post("/v1/bot/test", {"body": "price?"}, key=other["api_key"])
    assert dry.json["reason"] == "rule"
    message_id = r.json["messageId"]
    # Answered while the slow account's provider still hangs (a bounded wait, not a timing assertion).
    for _ in range(1000):
        if (await get_message(api, other["api_key"], message_id))["bot"]:
            break
        await asyncio.sleep(0.01)
    assert (await get_message(api, other["api_key"], message_id))["bot"]["outcome"] == "rule"
    assert provider.most_in_flight == 1  # the slow account's share, dry runs included
    provider.release.set()
    await services.bot.idle()
    assert [(await d).json["reason"] for d in dry_runs] == ["provider"] * 3
    assert services.bot._account_slots == {}  # nothing left behind per account


def test_the_docs_list_every_outcome():
    """The outcome vocabulary is small and documented: docs/api.md's table has exactly bot.OUTCOMES."""
    from pathlib import Path
    readme = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
    table = readme.split("| outcome | reply | when |")[1].split("\n\n")[0]
    assert [line.split("`")[1] for line in table.splitlines()[2:]] == list(bot.OUTCOMES)


async def test_a_flood_beyond_the_waiting_bound_is_recorded_busy(api, account, services, provider, monkeypatch):
    """The bot's queue is bounded: beyond MAX_WAITING messages (2 here) a message is recorded `busy` rather
    than held in memory while a slow provider falls behind."""
    key = account["api_key"]
    monkeypatch.setattr(bot_runner, "MAX_WAITING", 2)
    await configure(api, key, {"active": True, "provider": {"baseUrl": provider.base_url, "model": "tiny"}})
    provider.script = ["hang"] * 3
    ids = [(await post_inbound(api, key, body=f"q{n}", fromId=f"f{n}")).json["messageId"] for n in range(3)]
    while provider.in_flight < 2:
        await asyncio.sleep(0.01)
    provider.release.set()
    await services.bot.idle()
    outcomes = [(await get_message(api, key, i))["bot"]["outcome"] for i in ids]
    assert outcomes == ["provider", "provider", "busy"]


async def test_a_bot_reply_that_crosses_the_threshold_queues_the_auto_recharge_notification(api, agency, sub,
                                                                                           services):
    """docs/design.md#api-decisions "Auto-recharge": a spend that takes a sub-account below its threshold queues one
    subaccount.auto_recharge notification in the spend's transaction; the bot's spends go through that one
    path (storage.credits.spend), so a bot reply does it too."""
    from storage.outbox import list_outbox
    from tests.recharge import EVENT
    from tests.recharge import set_auto_recharge
    await accounts.update_settings(services.db, agency["account_id"],
                                   {"notificationUrls": {EVENT: "http://127.0.0.1:9/recharge"}})
    await grant(api, agency, sub, 2)
    await set_auto_recharge(api, agency, sub, 2, 10)
    await configure(api, sub["api_key"], {"active": True, "rules": RULES})
    assert (await say(api, services, sub["api_key"], "price?"))["bot"]["outcome"] == "rule"
    [notification] = [r for r in await list_outbox(services.db, agency["account_id"]) if r["event_type"] == EVENT]
    data = json.loads(notification["payload"])["data"]
    assert (data["sub_account_id"], data["balance"]) == (sub["account_id"], 1)


async def test_an_opt_out_keyword_is_not_answered_and_the_contact_stays_unanswered(api, account, services):
    """docs/design.md#api-decisions "Campaigns": an inbound message whose whole body is an opt-out keyword opts the contact out;
    the bot does not answer it (nor, then, the contact), until START opts it back in."""
    key = account["api_key"]
    await configure(api, key, {"active": True, "rules": RULES, "fallback": "Hmm."})
    assert (await say(api, services, key, "stop"))["bot"] is None
    assert (await say(api, services, key, "price?"))["bot"]["outcome"] == "opted_out"
    assert (await say(api, services, key, "START"))["bot"] is None
    assert (await say(api, services, key, "price?"))["bot"]["outcome"] == "rule"
