"""A handoff tells the customer and the team (issue 25 §3): bot.handoffMessage to the contact once per
handoff (default text; "" sends nothing), and a conversation.handoff notification {contactId, messageId,
reason} queued in the same transaction, for a handoff keyword, the AI provider, or a rule that says so.
In-process on a real SQLite file; the outbox rows are what is checked (delivery, signing and retries are
the outbox's, tested in tests/test_delivery*.py)."""
import json

import pytest

from services import inbox
from tests.bot_helpers import BOT_SETTINGS, RULES, bot_replies, configure, say
from tests.db_direct import rows
from tests.live_helpers import Socket, inbound, ui_user
from tests.ui_helpers import FormClient

pytestmark = pytest.mark.settings(**BOT_SETTINGS)  # as tests/test_bot.py

NOTIFY = "http://127.0.0.1:9/handoffs"


def handoff_notifications(services, account_id):
    return [json.loads(r["payload"]) for r in rows(
        services, "SELECT payload FROM outbox WHERE account_id = ? AND kind = 'notification' AND event_type = ?"
                  " ORDER BY id", account_id, "conversation.handoff")]


async def listen(api, key):
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"conversation.handoff": NOTIFY}}, key=key)
    assert r.code == 200, r.body


async def test_a_keyword_handoff_sends_the_default_message_once_and_notifies(api, account, services):
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "rules": RULES, "handoffKeywords": ["human"]})
    await listen(api, key)
    handoff = await say(api, services, key, "a HUMAN please")
    assert handoff["bot"]["outcome"] == "handoff" and handoff["bot"]["replyId"]
    again = await say(api, services, key, "human! human!")  # paused now: no second message, no second event
    assert again["bot"]["outcome"] == "paused"
    assert [r["body"] for r in bot_replies(services, account_id)] == ["Thanks! A person will answer here soon."]
    [event] = handoff_notifications(services, account_id)
    assert event["event"] == "conversation.handoff" and event["accountId"] == account_id
    assert event["data"] == {"contactId": handoff["contactId"], "messageId": handoff["id"], "reason": "keyword"}


async def test_a_custom_message_an_empty_one_and_no_listener(api, account, services):
    """The account's text is sent; "" sends nothing but still pauses; without a notification URL nothing
    is queued for it."""
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "handoffKeywords": ["human"], "handoffMessage": "Un momento."})
    first = await say(api, services, key, "human", fromId="a")
    await configure(api, key, {"handoffMessage": ""})
    second = await say(api, services, key, "human", fromId="b")
    assert second["bot"] == {"outcome": "handoff", "detail": second["bot"]["detail"], "replyId": None}
    assert [r["body"] for r in bot_replies(services, account_id)] == ["Un momento."]
    assert first["bot"]["replyId"] and handoff_notifications(services, account_id) == []
    assert len(rows(services, "SELECT 1 FROM bot_pauses WHERE account_id = ? AND reason = 'handoff'",
                    account_id)) == 2


async def test_a_rule_that_hands_off_and_the_provider(api, account, services, provider):
    """A rule with "handoff": true answers with its own text and hands off; the provider's handoff sends its
    reply, or the handoffMessage when it has none. Each notification names its reason."""
    key, account_id = account["api_key"], account["account_id"]
    await configure(api, key, {"active": True, "rules": [
        {"keywords": ["refund"], "answer": "A colleague handles refunds.", "handoff": True}],
        "provider": {"baseUrl": provider.base_url, "model": "tiny"}})
    await listen(api, key)
    rule = await say(api, services, key, "refund please", fromId="r")
    provider.script += [("answer", "", True)]
    by_provider = await say(api, services, key, "this is urgent", fromId="p")
    assert (rule["bot"]["outcome"], by_provider["bot"]["outcome"]) == ("handoff", "handoff")
    assert [r["body"] for r in bot_replies(services, account_id)] == [
        "A colleague handles refunds.", "Thanks! A person will answer here soon."]
    assert [(e["data"]["messageId"], e["data"]["reason"]) for e in handoff_notifications(services, account_id)] == [
        (rule["id"], "rule"), (by_provider["id"], "provider")]


async def test_a_handoff_that_cannot_be_answered_still_pauses_and_notifies(api, agency, sub, services):
    """A sub-account without credits gets no handoffMessage (no_credits), but the person is still called."""
    key, account_id = sub["api_key"], sub["account_id"]
    await configure(api, key, {"active": True, "handoffKeywords": ["human"]})
    await listen(api, key)
    handoff = await say(api, services, key, "human")
    assert handoff["bot"]["outcome"] == "no_credits" and bot_replies(services, account_id) == []
    [event] = handoff_notifications(services, account_id)
    assert event["data"]["reason"] == "keyword"
    assert (await say(api, services, key, "hello?"))["bot"]["outcome"] == "paused"


async def test_needs_a_person_counts_handoffs_until_a_person_replies(api, services, signed_in, ui_account):
    """Every page's navigation and title show the count (open pages get it again from the live socket,
    tests/test_live.py); a person's reply to that contact takes it off."""
    key = ui_account["api_key"]
    assert 'data-count="0"' in (await signed_in.get("/settings")).text
    await configure(api, key, {"active": True, "handoffKeywords": ["human"]})
    handoff = await say(api, services, key, "human")
    page = (await signed_in.get("/settings")).text
    assert "<title>(1) Settings · Parley</title>" in page and 'data-count="1"' in page
    r = await api.post("/v1/send_custom_channel_message", {"customData": {
        "fromId": "user-1", "customChannel": "webchat", "body": "A person here."}}, key=key)
    assert r.code == 200, r.body
    page = (await signed_in.get("/settings")).text
    assert "<title>Settings · Parley</title>" in page and 'id="needs-person" class="badge"' in page
    assert 'data-count="0" hidden>Needs a person' in page
    assert handoff["contactId"]


async def test_the_navigations_counts_are_pushed_to_every_page_of_the_account(api, services, http_server_client,
                                                                             signed_in, ui_account):
    """Issue 37: nothing polls the counts. A page without live events (counts=1) and a live page both get
    {needsPerson, unread} when they connect and again after each change, the counts-only page no events; another
    account's page nothing of them."""
    client, account_id, key = signed_in, ui_account["account_id"], ui_account["api_key"]
    await ui_user(services, "owner@other.example")
    other_client = FormClient(http_server_client)
    assert (await other_client.login("owner@other.example")).code == 303
    counts_only = await Socket.open(http_server_client, client.cookies, "counts")
    live = await Socket.open(http_server_client, client.cookies, 0)
    other = await Socket.open(http_server_client, other_client.cookies, "counts")
    for socket in (counts_only, live, other):
        assert await socket.next() == {"type": "ready"}
        assert await socket.next_counts() == {"needsPerson": 0, "unread": 0}

    first = await inbound(services, account_id, "sid-1", body="one")
    for socket in (counts_only, live):
        assert await socket.next_counts() == {"needsPerson": 0, "unread": 1}
    await configure(api, key, {"active": True, "handoffKeywords": ["human"]})
    await say(api, services, key, "a human please", fromId="+14155550199")  # the bot hands it off
    while (await counts_only.next_counts())["needsPerson"] != 1:
        pass  # the message first (unread 2), then the bot's outcome (the handoff)
    assert counts_only.counts[-1] == {"needsPerson": 1, "unread": 2}
    await inbox.mark_read(services, account_id, first["contact_id"], first["id"])
    assert await counts_only.next_counts() == {"needsPerson": 1, "unread": 1}
    r = await api.post("/v1/send_custom_channel_message", {"customData": {
        "fromId": "+14155550199", "customChannel": "webchat", "body": "A person here."}}, key=key)
    assert r.code == 200, r.body
    while (await counts_only.next_counts())["needsPerson"] != 0:
        pass
    assert counts_only.frames == [{"type": "ready"}]  # never an event
    assert other.counts == [{"needsPerson": 0, "unread": 0}]
    await live.until(lambda f: f["type"] == "events" and any(e["type"] == "conversation.updated" for e in f["events"]))
    for socket in (counts_only, live, other):
        socket.close()
