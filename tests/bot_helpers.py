"""The bot in tests: a real local HTTP server speaking chat-completions as its AI provider (Provider), the settings
the bot's tests run with, and the calls that configure the bot and say something to it."""
import asyncio
import json

import tornado.httpserver
import tornado.web
from tornado.testing import bind_unused_port

from tests.api_helpers import get_message, post_inbound

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


def rows(services, sql, *params):
    cx = services.db.connect_sync()
    try:
        return [dict(r) for r in cx.execute(sql, params)]
    finally:
        cx.close()


def bot_replies(services, account_id):
    return rows(services, "SELECT m.id, m.body, m.campaign_id, m.to_id, m.channel, o.payload FROM messages m"
                          " JOIN outbox o ON o.message_id = m.id WHERE m.account_id = ? AND m.author = 'bot'"
                          " ORDER BY m.id", account_id)
