#!/usr/bin/env python3
"""Website chat visitors for bench/scenarios/widget.py, in a process of their own: N visitors of one widget, each
writing its first message (which makes its token and contact), ADDRESS_SHARE to a loopback address (127.0.1.x:
the server allows 60 a minute from one address), then holding the chat frame's live
WebSocket (/widget/{id}/live) open as an idle chat does.

    python bench/widget_clients.py BASE CERT WIDGET_ID N

Prints {"ready": N} once every visitor's socket is live; then reads a message id from stdin (the scenario's last
reply) and, once its visitor received it (or after a minute), prints one JSON line: frames, drops, and for every
message of the business the time.monotonic() at which its visitor received it."""
import asyncio
import json
import ssl
import sys
import time

import httpx
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect
from ws_clients import serve_until_last_arrives  # run as a script: bench/ is on sys.path


class Visitor:
    def __init__(self, pool, index):
        self.pool, self.index = pool, index
        self.frames = self.drops = 0
        self.ready = asyncio.Event()

    async def run(self, client):
        headers = {"Origin": self.pool.base}
        path = f"/widget/{self.pool.widget}"
        sent = await client.post(f"{path}/messages", json={"body": f"Hello from visitor {self.index}"}, headers=headers)
        sent.raise_for_status()
        token = sent.json()["token"]
        history = await client.get(f"{path}/messages", headers={**headers, "X-Parley-Visitor": token})
        cursor = history.json()["cursor"]
        while not self.pool.stopping:
            ws = self.pool.base.replace("https://", "wss://")
            request = HTTPRequest(f"{ws}{path}/live?after={cursor}", ssl_options=self.pool.context,
                                  connect_timeout=60, request_timeout=60, headers={"Origin": self.pool.base})
            try:
                connection = await websocket_connect(request)
            except Exception:
                self.drops += 1
                await asyncio.sleep(0.5)
                continue
            await connection.write_message(json.dumps({"token": token}))
            self.ready.set()
            while (text := await connection.read_message()) is not None:
                received = time.monotonic()
                self.frames += 1
                frame = json.loads(text)
                if frame.get("type") == "messages":
                    cursor = frame["cursor"]
                    for message in frame["messages"]:
                        if not message["mine"]:
                            self.pool.arrivals.setdefault(message["id"], []).append(received)
            if not self.pool.stopping:
                self.drops += 1


ADDRESS_SHARE = 40  # visitors writing from one loopback address


def loopback_client(base, context, index, **kw):
    """An HTTPS client whose connections come from 127.0.<1 + index // 250>.<1 + index % 250>."""
    address = f"127.0.{1 + index // 250}.{1 + index % 250}"
    return httpx.AsyncClient(base_url=base, verify=context, timeout=60,
                             transport=httpx.AsyncHTTPTransport(verify=context, local_address=address), **kw)


class Pool:
    def __init__(self, base, cert, widget):
        self.base, self.widget, self.arrivals, self.stopping = base, widget, {}, False
        self.context = ssl.create_default_context(cafile=cert)
        self.context.check_hostname = False  # the self-signed certificate names localhost


async def main(base, cert, widget, count):
    pool = Pool(base, cert, widget)
    visitors = [Visitor(pool, i) for i in range(count)]
    tasks = []
    clients = [loopback_client(base, pool.context, i) for i in range((count + ADDRESS_SHARE - 1) // ADDRESS_SHARE)]
    for visitor in visitors:  # they arrive in steps, not as one burst
        tasks.append(asyncio.ensure_future(visitor.run(clients[visitor.index // ADDRESS_SHARE])))
        await asyncio.sleep(0.005)
    await asyncio.wait_for(asyncio.gather(*(v.ready.wait() for v in visitors)), 300)
    await serve_until_last_arrives(pool, count, tasks, receivers=1)
    for client in clients:
        await client.aclose()
    print(json.dumps({"visitors": count, "frames": sum(v.frames for v in visitors),
                      "drops": sum(v.drops for v in visitors), "arrivals": pool.arrivals}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
