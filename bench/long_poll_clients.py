#!/usr/bin/env python3
"""Integrations long-polling GET /v1/events for bench/scenarios/event_stream.py, in a process of their own: N
loops, each on its own kept-alive HTTPS connection, each asking with the last nextCursor and wait=30 as the resume
loop of docs/api.md#events does.

    python bench/long_poll_clients.py BASE CERT API_KEY N AFTER WATCH_CONTACT_ID

Opens the N connections first (TLS handshakes done, nothing asked) and prints {"ready": 0, "connected": N}, then
waits for a line on stdin (the scenario measures the server's memory meanwhile); prints {"ready": N} once every
loop has sent its first long-poll; then reads a message id from stdin (the last
probe's) and, once every loop received it (or after a minute), prints one JSON line: answers, events, errors,
duplicates (a message a loop was given twice), and for every message.created of WATCH_CONTACT_ID the
time.monotonic() at which each loop received it.

The load generator shares the server's 2 cores, so it is kept light (an httpx client per loop took more CPU than
the server it measured, bench/HISTORY.md): plain asyncio streams, the request written by hand, the answer read by
its Content-Length (or chunks), and the page scanned for its events rather than decoded. The scan relies on the
order the API writes an event's keys ({"id", "type", "createdAt", "data": {"id", ..., "contactId", ...}}); a page
it cannot scan (an error, a change of shape) is decoded as JSON instead, so a change of shape costs CPU, not
correctness."""
import asyncio
import json
import re
import ssl
import sys
import time
from urllib.parse import quote, urlsplit

from ws_clients import serve_until_last_arrives  # run as a script: bench/ is on sys.path

EVENT = re.compile(rb'\{"id":"([^"]+)","type":"message\.created","createdAt":"[^"]*","data":\{"id":"([^"]+)"')
NEXT = re.compile(rb'"nextCursor":"([^"]+)"\}$')
STATUS = re.compile(rb"HTTP/1\.1 (\d{3})")
LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.IGNORECASE)
CHUNKED = re.compile(rb"\r\ntransfer-encoding: *chunked", re.IGNORECASE)
CLOSE = re.compile(rb"\r\nconnection: *close", re.IGNORECASE)
RETRY = re.compile(rb"\r\nretry-after: *(\d+)", re.IGNORECASE)


class Loop:
    def __init__(self, pool, after):
        self.pool, self.cursor = pool, after
        self.answers = self.events = self.errors = self.duplicates = 0
        self.seen = set()  # message ids given to this loop: each must come once
        self.sent = asyncio.Event()
        self.reader = self.writer = None

    async def connect(self):
        self.reader, self.writer = await asyncio.open_connection(self.pool.host, self.pool.port,
                                                                 ssl=self.pool.context, server_hostname="localhost")

    async def run(self):
        pool = self.pool
        reader, writer = self.reader, self.writer
        while not pool.stopping:
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(pool.host, pool.port, ssl=pool.context,
                                                                   server_hostname="localhost")
                writer.write(pool.request(self.cursor))
                self.sent.set()  # the first is on its way (the server holds it until an event commits)
                status, body, closing = await read_response(reader)
            except (OSError, asyncio.IncompleteReadError, ssl.SSLError, ValueError):
                self.errors += 1
                writer = close(writer)
                await asyncio.sleep(0.5)
                continue
            received = time.monotonic()
            self.answers += 1
            if closing:
                writer = close(writer)
            if status != 200:
                self.errors += 1
                retry = RETRY.search(body[1])
                await asyncio.sleep(float(retry.group(1)) if retry else 1)
                continue
            self.take(body[0], received)
        close(writer)

    def take(self, body, received):
        """The page's events: each of the watched contact's messages timed; the cursor moves to nextCursor."""
        pool = self.pool
        events, next_cursor = None, NEXT.search(body)
        if next_cursor is not None:
            matches = list(EVENT.finditer(body))
            ends = [m.start() for m in matches[1:]] + [next_cursor.start()]
            events = [(m.group(2).decode(), body.find(pool.watch_text, m.end(), end) >= 0)
                      for m, end in zip(matches, ends)]
            if len(events) != body.count(b'"type":"'):
                events = None
        if events is None:  # not the shape scanned for: read it properly
            page = json.loads(body)
            events = [(e["data"]["id"], e["data"].get("contactId") == pool.watch) for e in page["data"]]
            self.cursor = page["nextCursor"]
        else:
            self.cursor = next_cursor.group(1).decode()
        self.events += len(events)
        for message_id, watched in events:
            if message_id in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(message_id)
            if watched:
                pool.arrivals.setdefault(message_id, []).append(received)


async def read_response(reader):
    """(status, (body, head), whether the server closes the connection after it)."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = STATUS.match(head)
    if status is None:
        raise ValueError(f"not an HTTP/1.1 answer: {head[:100]!r}")
    length = LENGTH.search(head)
    if length is not None:
        body = await reader.readexactly(int(length.group(1)))
    elif CHUNKED.search(head):
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            parts.append(await reader.readexactly(size + 2))
            if not size:  # the last chunk's CRLF was the answer's end (no trailers)
                break
        body = b"".join(p[:-2] for p in parts)
    else:
        raise ValueError("an answer without Content-Length or chunks")
    return int(status.group(1)), (body, head), CLOSE.search(head) is not None


def close(writer):
    if writer is not None:
        writer.close()
    return None


class Pool:
    def __init__(self, base, cert, key, watch):
        url = urlsplit(base)
        self.host, self.port = url.hostname, url.port or 443
        self.context = ssl.create_default_context(cafile=cert)
        self.context.check_hostname = False  # the self-signed certificate names localhost
        self.watch, self.watch_text = watch, f'"contactId":"{watch}"'.encode()
        self.arrivals, self.stopping = {}, False
        self._head = (f"Host: {url.netloc}\r\nx-api-key: {key}\r\nUser-Agent: parley-bench\r\n\r\n").encode()

    def request(self, cursor):
        after = f"after={quote(cursor, safe='')}&" if cursor else ""
        return (f"GET /v1/events?{after}wait=30&limit=500&types=message.created HTTP/1.1\r\n").encode() + self._head


async def main(base, cert, key, count, after, watch):
    pool = Pool(base, cert, key, watch)
    loops = [Loop(pool, after) for _ in range(count)]
    for loop in loops:  # one connection each, as N integrations have; opened one after another
        await loop.connect()
    print(json.dumps({"ready": 0, "connected": count}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    tasks = []
    for loop in loops:
        tasks.append(asyncio.ensure_future(loop.run()))
        await asyncio.sleep(0.001)
    await asyncio.wait_for(asyncio.gather(*(loop.sent.wait() for loop in loops)), 120)
    await serve_until_last_arrives(pool, count, tasks)
    print(json.dumps({"loops": count, "answers": sum(loop.answers for loop in loops),
                      "events": sum(loop.events for loop in loops), "errors": sum(loop.errors for loop in loops),
                      "duplicates": sum(loop.duplicates for loop in loops), "arrivals": pool.arrivals}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]))
