#!/usr/bin/env python3
"""Open inbox pages for bench/scenarios/inbox.py, in a process of their own: N WebSockets to /ws, each
authenticated by the session cookie and this site's Origin and offering permessage-deflate, like N browser
tabs on the inbox.

    python bench/ws_clients.py BASE CERT COOKIE N WATCH_CONTACT_ID

Prints {"ready": N} once every socket is live; then reads a message id from stdin (the last probe's) and,
once every page received it (or after a minute), prints one JSON line with what arrived:
frames and events per socket, reloads, and for every message.created of WATCH_CONTACT_ID (the probe's
contact; * for every contact's) the time.monotonic() at which each socket received it (and for every conversation.updated of it, under
"update:<event id>": bench/scenarios/team_inbox.py's assignments). Frames that do not mention the probe's
contact are counted, not decoded: the clients must keep up with the whole account's events."""
import asyncio
import json
import re
import ssl
import sys
import time

import tornado.httpclient
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect


class Page:
    def __init__(self, pool, index):
        self.pool, self.index = pool, index
        self.frames = self.events = self.reloads = self.drops = 0
        self.last_id = None
        self.ready = asyncio.Event()

    async def run(self):
        while not self.pool.stopping:
            if self.last_id is None:
                self.last_id = await self.pool.page_event_id()
            try:
                connection = await websocket_connect(self.pool.request(self.last_id), compression_options={})
            except Exception:
                self.drops += 1
                await asyncio.sleep(0.5)
                continue
            while True:
                text = await connection.read_message()
                if text is None:
                    break
                received = time.monotonic()
                self.frames += 1
                if text.startswith('{"type":"events"'):
                    self.events += text.count('{"id":')  # counted, not decoded
                    start = text.rfind('{"id":') + 6
                    self.last_id = int(text[start:text.index(",", start)])
                    if self.pool.watch == "*" or self.pool.watch in text:
                        for event in json.loads(text)["events"]:
                            if self.pool.watch != "*" and event["data"].get("contactId") != self.pool.watch:
                                continue
                            if event["type"] == "message.created":
                                self.pool.arrivals.setdefault(event["data"]["messageId"], []).append(received)
                            elif event["type"] == "conversation.updated":
                                self.pool.arrivals.setdefault(f"update:{event['id']}", []).append(received)
                elif '"ready"' in text:
                    self.ready.set()
                elif '"reload"' in text:
                    self.reloads += 1
                    self.last_id = None  # a browser loads the page again: a fresh position
            if not self.pool.stopping:
                self.drops += 1


class Pool:
    def __init__(self, base, cert, cookie, watch):
        self.base, self.cookie, self.watch = base, cookie, watch
        self.context = ssl.create_default_context(cafile=cert)
        self.context.check_hostname = False  # the self-signed certificate names localhost
        self.arrivals = {}
        self.stopping = False
        self.http = tornado.httpclient.AsyncHTTPClient()

    def request(self, after):
        ws = self.base.replace("https://", "wss://")
        return HTTPRequest(f"{ws}/ws?after={after}", ssl_options=self.context, connect_timeout=30,
                           request_timeout=30, headers={"Cookie": self.cookie, "Origin": self.base})

    async def page_event_id(self):
        """What a browser does: load the inbox page and resume from the event id it was rendered at."""
        response = await self.http.fetch(f"{self.base}/inbox", headers={"Cookie": self.cookie},
                                         ssl_options=self.context, follow_redirects=False,
                                         connect_timeout=120, request_timeout=120)  # 500 queue behind 10
        return int(re.search(rb'data-live-after="(\d+)"', response.body).group(1))


async def serve_until_last_arrives(pool, count, tasks, receivers=None):
    """The clients' side of their scenario's protocol (this file's, bench/long_poll_clients.py's and
    bench/widget_clients.py's): say ready, then read the last probe's message id (the scenario writes it and closes
    stdin) and wait, up to a minute, until every one of count clients (or of receivers, when only some get it)
    has it, so that a late event is counted late, not missing; then stop them."""
    print(json.dumps({"ready": count}), flush=True)
    last = (await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)).strip()
    deadline = time.monotonic() + 60
    wanted = count if receivers is None else receivers
    while last and len(pool.arrivals.get(last, ())) < wanted and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    pool.stopping = True
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def main(base, cert, cookie, count, watch):
    pool = Pool(base, cert, cookie, watch)
    pages = [Page(pool, i) for i in range(count)]
    tasks = []
    for page in pages:  # opened in steps, like tabs, not as one burst of TLS handshakes
        tasks.append(asyncio.ensure_future(page.run()))
        await asyncio.sleep(0.002)
    await asyncio.wait_for(asyncio.gather(*(p.ready.wait() for p in pages)), 120)
    await serve_until_last_arrives(pool, count, tasks)
    print(json.dumps({"pages": count, "frames": sum(p.frames for p in pages), "events": sum(p.events for p in pages),
                      "reloads": sum(p.reloads for p in pages), "drops": sum(p.drops for p in pages),
                      "arrivals": pool.arrivals}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
