#!/usr/bin/env python3
"""The bot scenario's other side, in its own process so that it does not compete with the server's event
loop: a webhook receiver that counts the replies it gets, and on request a driver of N conversations that
each send an inbound message and wait for the bot's reply before sending the next.

    python bench/bot_peer.py --port PORT

It prints {"event": "listening", "port": PORT} once it listens and stops on SIGTERM.
  POST /hook   a reply (any JSON with toId): counted; wakes the conversation waiting for that toId
  GET  /count  {"count": replies received so far}
  POST /drive  {base, key, cafile, conversations, seconds, salt}: runs the conversations, answers with
               {"replies", "inbound_ms": [...], "reply_ms": [...], "timeouts", "errors"} (milliseconds from
               sending the inbound message to its 200, and to the reply's arrival here)
"""
import argparse
import asyncio
import json
import signal
import time

import httpx
import tornado.httpserver
import tornado.web

WAIT_FOR_REPLY = 30.0


class Peer:
    def __init__(self):
        self.count = 0
        self.waiting = {}  # toId -> future of the reply's arrival time (time.monotonic())


class Hook(tornado.web.RequestHandler):
    def initialize(self, peer):
        self.peer = peer

    def post(self):
        self.peer.count += 1
        future = self.peer.waiting.pop(json.loads(self.request.body).get("toId"), None)
        if future is not None and not future.done():
            future.set_result(time.monotonic())
        self.finish("ok")


class Count(tornado.web.RequestHandler):
    def initialize(self, peer):
        self.peer = peer

    def get(self):
        self.finish({"count": self.peer.count})


class Drive(tornado.web.RequestHandler):
    def initialize(self, peer):
        self.peer = peer

    async def post(self):
        spec = json.loads(self.request.body)
        self.finish(await drive(self.peer, **spec))


async def drive(peer, *, base, key, cafile, conversations, seconds, salt):
    """`conversations` contacts at once, each: send a message, wait for the bot's reply, again."""
    result = {"replies": 0, "inbound_ms": [], "reply_ms": [], "timeouts": 0, "errors": 0}
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=conversations, max_keepalive_connections=conversations)
    async with httpx.AsyncClient(base_url=base, verify=cafile, limits=limits, timeout=30) as client:
        async def conversation(n):
            to_id, sent = f"{salt}-conv-{n}", 0
            while time.monotonic() < deadline:
                sent += 1
                arrival = asyncio.get_running_loop().create_future()
                peer.waiting[to_id] = arrival
                started = time.monotonic()
                response = await client.post("/v1/incoming_custom_channel_message", params={"apiKey": key}, json={
                    "customData": {"messageSid": f"{to_id}-{sent}", "fromId": to_id, "toId": "bench-shop",
                                   "body": f"Hi, what is the price of the blue one? ({sent})", "channel": "bench"}})
                answered = time.monotonic()
                if response.status_code != 200:
                    result["errors"] += 1
                    peer.waiting.pop(to_id, None)
                    continue
                try:
                    replied = await asyncio.wait_for(arrival, WAIT_FOR_REPLY)
                except TimeoutError:
                    result["timeouts"] += 1
                    continue
                result["replies"] += 1
                result["inbound_ms"].append(round(1000 * (answered - started), 3))
                result["reply_ms"].append(round(1000 * (replied - started), 3))

        await asyncio.gather(*(conversation(n) for n in range(conversations)))
    return result


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    peer = Peer()
    app = tornado.web.Application([(r"/hook", Hook, {"peer": peer}), (r"/count", Count, {"peer": peer}),
                                   (r"/drive", Drive, {"peer": peer})])
    server = tornado.httpserver.HTTPServer(app)
    server.listen(args.port, "127.0.0.1")
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(json.dumps({"event": "listening", "port": args.port}), flush=True)
    await stop.wait()
    server.stop()


if __name__ == "__main__":
    asyncio.run(main())
