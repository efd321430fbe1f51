#!/usr/bin/env python3
"""Integrations long-polling GET /v1/events for bench/scenarios/event_stream.py, in a process of their own: N
loops, each on its own kept-alive HTTPS connection, each asking with the last nextCursor and wait=30 as the resume
loop of docs/api.md#events does.

    python bench/long_poll_clients.py BASE CERT API_KEY N AFTER WATCH_CONTACT_ID

Prints {"ready": N} once every loop has sent its first long-poll; then reads a message id from stdin (the last
probe's) and, once every loop received it (or after a minute), prints one JSON line: answers, events, errors, and
for every message.created of WATCH_CONTACT_ID the time.monotonic() at which each loop received it."""
import asyncio
import json
import ssl
import sys
import time

import httpx
from ws_clients import serve_until_last_arrives  # run as a script: bench/ is on sys.path


class Loop:
    def __init__(self, pool, after):
        self.pool, self.cursor = pool, after
        self.answers = self.events = self.errors = 0
        self.sent = asyncio.Event()

    async def run(self, client):
        while not self.pool.stopping:
            request = client.get("/v1/events", params={"after": self.cursor, "wait": 30, "limit": 500,
                                                       "types": "message.created"})
            self.sent.set()  # the first is on its way (the server holds it until an event commits)
            try:
                response = await request
            except httpx.HTTPError:
                self.errors += 1
                await asyncio.sleep(0.5)
                continue
            received = time.monotonic()
            self.answers += 1
            if response.status_code != 200:
                self.errors += 1
                await asyncio.sleep(float(response.headers.get("Retry-After", 1)))
                continue
            page = response.json()
            self.events += len(page["data"])
            for event in page["data"]:
                if event["data"].get("contactId") == self.pool.watch:
                    self.pool.arrivals.setdefault(event["data"]["id"], []).append(received)
            self.cursor = page["nextCursor"]


class Pool:
    def __init__(self, watch):
        self.watch, self.arrivals, self.stopping = watch, {}, False


async def main(base, cert, key, count, after, watch):
    context = ssl.create_default_context(cafile=cert)
    context.check_hostname = False  # the self-signed certificate names localhost
    pool = Pool(watch)
    loops = [Loop(pool, after) for _ in range(count)]
    clients, tasks = [], []
    for loop in loops:  # one client each: its own connection, as N integrations have; opened in steps
        client = httpx.AsyncClient(base_url=base, verify=context, headers={"x-api-key": key},
                                   timeout=httpx.Timeout(60, connect=60, pool=60))
        clients.append(client)
        tasks.append(asyncio.ensure_future(loop.run(client)))
        await asyncio.sleep(0.002)
    await asyncio.wait_for(asyncio.gather(*(loop.sent.wait() for loop in loops)), 120)
    await serve_until_last_arrives(pool, count, tasks)
    print(json.dumps({"loops": count, "answers": sum(loop.answers for loop in loops),
                      "events": sum(loop.events for loop in loops), "errors": sum(loop.errors for loop in loops),
                      "arrivals": pool.arrivals}), flush=True)
    await asyncio.gather(*(client.aclose() for client in clients), return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]))
