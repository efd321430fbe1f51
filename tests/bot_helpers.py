"""The bot in tests: a real local HTTP server speaking chat-completions as its AI provider (Provider), the settings
the bot's tests run with, and the calls that configure the bot and say something to it."""
import asyncio
import json

import pytest
import tornado.httpserver
import tornado.web
from standardwebhooks import Webhook
from tornado.testing import bind_unused_port

from tests.api_helpers import get_message, post_inbound
from tests.db_direct import rows
from tests.delivery_helpers import ThreadedReceiver
from tests.parley_process import free_port
from tests.waiting import wait_until

SETTINGS = "/v1/account/settings"
WEBHOOK = "http://127.0.0.1:9/replies"  # deliveries are not run here: the outbox row is what is checked
RULES = [{"keywords": ["price", "cost"], "answer": "Plans start at $10."},
         {"keywords": ["opening hours", "open"], "answer": "9 to 5."}]


# The bot's tests run with room for 2 answers at once and a short history (4 messages, 60 characters).
BOT_SETTINGS = {"bot_concurrency": 2, "bot_history_messages": 4, "bot_history_chars": 60}


class Provider:
    """A real HTTP server speaking OpenAI-style chat-completions. Each request takes the next scripted
    answer: ("answer", reply, handoff) | ("content", text) | ("status", code) | "hang" (until released) |
    ("hang", then this answer) | ("drop", raw bytes written before the connection closes, like a crashed server);
    then a default reply. It records every request body and the most requests it had in flight."""

    def __init__(self):
        self.requests, self.script = [], []
        self.in_flight = self.most_in_flight = 0
        self.release = asyncio.Event()
        sock, self.port = bind_unused_port()
        provider = self

        class Completions(tornado.web.RequestHandler):
            async def post(self):
                provider.requests.append({"headers": dict(self.request.headers),
                                          "body": json.loads(self.request.body)})
                step = provider.script.pop(0) if provider.script else ("answer", "Provider says hi", False)
                provider.in_flight += 1
                provider.most_in_flight = max(provider.most_in_flight, provider.in_flight)
                try:
                    if step == "hang" or step[0] == "hang":  # ("hang", the answer then)
                        await asyncio.wait_for(provider.release.wait(), 30)
                        step = step[1] if step != "hang" else ("answer", "Sorry for the wait", False)
                finally:
                    provider.in_flight -= 1
                if step[0] == "drop":
                    stream = self.request.connection.detach()
                    await stream.write(step[1]) if step[1] else None
                    stream.close()
                    self._auto_finish = False  # nothing more is written to the closed connection
                    return
                if step[0] == "status":
                    self.set_status(step[1])
                    self.finish({"error": {"message": step[2] if len(step) > 2 else "model overloaded"}})
                    return
                content = step[1] if step[0] == "content" else json.dumps({"reply": step[1], "handoff": step[2]})
                self.finish({"id": "chatcmpl-1", "object": "chat.completion", "model": "tiny",
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": content}}]})

        self.server = tornado.httpserver.HTTPServer(tornado.web.Application([(r"/v1/chat/completions", Completions)]))
        self.server.add_sockets([sock])

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    async def close(self):
        self.release.set()
        self.server.stop()
        await self.server.close_all_connections()


async def configure(api, key, bot, webhook=WEBHOOK):
    body = {"bot": bot}
    if webhook:
        body["customChannelWebhookUrl"] = webhook
    r = await api.patch(SETTINGS, body, key=key)
    assert r.code == 200, r.body


async def say(api, services, key, body, **custom):
    """An inbound message; returns it as GET /v1/messages shows it once the bot is done with it."""
    custom.setdefault("fromId", "user-1")
    r = await post_inbound(api, key, body=body, **custom)
    assert r.code == 200, r.body
    await services.bot.idle()
    return await get_message(api, key, r.json["messageId"])


def bot_replies(services, account_id):
    return rows(services, "SELECT m.id, m.body, m.campaign_id, m.to_id, m.channel, o.payload FROM messages m"
                          " JOIN outbox o ON o.message_id = m.id WHERE m.account_id = ? AND m.author = 'bot'"
                          " ORDER BY m.id", account_id)


# The bot settings page (/bot) in the form client: its account form, filled in, and what the API then says.
def account_form(**fields):
    form = {"active": "on", "greeting": "", "fallback": "", "rule_rows": "2", "rules-0-keywords": "price, cost",
            "rules-0-answer": "Plans start at $10.", "rules-1-keywords": "", "rules-1-answer": "",
            "handoffKeywords": "human, agent", "pauseMinutesAfterHumanReply": "30",
            "provider-baseUrl": "", "provider-model": "", "provider-apiKey": "", "provider-systemPrompt": "",
            "provider-timeoutSeconds": ""}
    form.update(fields)
    return form


async def stored_bot(api, ui_account):
    return (await api.get("/v1/account", key=ui_account["api_key"])).json["settings"].get("bot")


# ---- the bot through the real server.py (tests/test_bot_e2e.py, tests/test_bot_real_model.py) ----------------

FALLBACK = "A person will answer soon."


@pytest.fixture(scope="module")
def receiver():
    """A local webhook receiver for the module's server (import it by name): each Account has a path of its own."""
    with ThreadedReceiver(free_port()) as r:
        yield r


class Account:
    """An account of the running server with its API client, a receiver path of its own and its secret."""

    def __init__(self, parley, receiver, created):
        self.parley, self.receiver, self.key = parley, receiver, created["api_key"]
        self.client = parley.client(headers={"x-api-key": created["api_key"]})
        self.path = f"/hook/{created['account_id']}"
        self.sids = iter(range(1, 1000))
        self.secret = None

    def configure(self, bot):
        r = self.client.patch("/v1/account/settings", json={
            "customChannelWebhookUrl": f"http://127.0.0.1:{self.receiver.port}{self.path}", "bot": bot})
        assert r.status_code == 200, r.text
        self.secret = self.client.get("/v1/account/webhook-secret").json()["secret"]

    def say(self, body, from_id="user-1", sid=None, **extra):
        """POST an inbound message; returns its messageId."""
        message_type = extra.pop("messageType", None)
        data = {"customData": {"messageSid": sid or f"sid-{next(self.sids)}", "fromId": from_id, "toId": "shop",
                               "body": body, "channel": "webchat", **extra}}
        if message_type:
            data["messageType"] = message_type
        r = self.client.post("/v1/incoming_custom_channel_message", json=data)
        assert r.status_code == 200, r.text
        return r.json()["messageId"]

    def outcome(self, message_id):
        """The bot's outcome on an inbound message, once it has one."""
        return wait_until(lambda: self.client.get(f"/v1/messages/{message_id}").json()["bot"])

    def replies(self):
        """Every reply the receiver got for this account, each verified with standardwebhooks."""
        return [Webhook(self.secret).verify(r["body"], r["headers"])
                for r in list(self.receiver.requests) if r["path"] == self.path]

    def reply_to(self, message_id):
        """Wait for the bot's outcome on message_id and the delivery of its reply; returns the payload."""
        outcome = self.outcome(message_id)
        assert outcome["replyId"], outcome
        return wait_until(lambda: next((p for p in self.replies() if p["messageId"] == outcome["replyId"]), None))
