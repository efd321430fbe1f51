"""The live pages in tests: a /ws client recording its frames (Socket), a socket that never drains (FakeTransport), an
inbound message on the webchat channel and an account whose owner can sign in."""
import asyncio
import json

from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from services import accounts, messaging
from tests.ui_helpers import PASSWORD

TIMEOUT = 10


async def inbound(services, account_id, sid, from_id="+14155552671", body="Hello", **kw):
    message, created = await messaging.receive_inbound(services, account_id, message_sid=sid, from_id=from_id,
                                                       to_id="shop", body=body, channel="webchat", **kw)
    assert created
    return message


async def ui_user(services, email):
    """An account with an owner who can sign in: {account_id, api_key, email, ...}."""
    return await accounts.create_account(services.db, services.box, services.keys, name="Live",
                                         email=email, password=PASSWORD)


class Socket:
    """A /ws client that records every frame; the navigation's counts frames apart (counts, next_counts)."""

    def __init__(self, connection):
        self.connection = connection
        self.frames = []
        self.counts = []
        self._counts_read = 0

    @classmethod
    async def open(cls, client, cookies, after, origin="same", deflate=False):
        """after: the page's event id, or "counts" for a page that shows only the navigation's counts."""
        port = client.get_http_port()
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}
        if origin == "same":
            origin = f"https://127.0.0.1:{port}"
        if origin:
            headers["Origin"] = origin
        query = "counts=1" if after == "counts" else f"after={after}"
        request = HTTPRequest(f"ws://127.0.0.1:{port}/ws?{query}", headers=headers)
        return cls(await websocket_connect(request, compression_options={} if deflate else None))

    async def _read(self):
        text = await asyncio.wait_for(self.connection.read_message(), TIMEOUT)
        frame = None if text is None else json.loads(text)
        if frame is not None and frame["type"] == "counts":
            self.counts.append({k: v for k, v in frame.items() if k != "type"})
        else:
            self.frames.append(frame)
        return frame

    async def next(self):
        """The next frame that is not a counts frame."""
        while True:
            frame = await self._read()
            if frame is None or frame["type"] != "counts":
                return frame

    async def next_counts(self):
        """The next counts frame not yet returned: {needsPerson, unread}."""
        while len(self.counts) == self._counts_read:
            assert await self._read() is not None, f"closed before a counts frame: {self.frames}"
        self._counts_read += 1
        return self.counts[self._counts_read - 1]

    async def until(self, predicate):
        while True:
            frame = await self.next()
            if frame is None:
                raise AssertionError(f"closed ({self.connection.close_code}) before the expected frame: {self.frames}")
            if predicate(frame):
                return frame

    async def events(self, count):
        """The next ``count`` events (after any ready frame)."""
        got = []
        while len(got) < count:
            frame = await self.next()
            assert frame is not None, f"closed early: {self.frames}"
            if frame["type"] == "events":
                got += frame["events"]
        assert len(got) == count, got
        return got

    def close(self):
        self.connection.close()


class FakeTransport:
    """A socket whose frames leave at once (flushed=True) or never (a browser that stopped reading)."""

    def __init__(self, flushed=True):
        self.frames, self.closed, self.flushed = [], None, flushed
        self.counts = []  # the counts frames, apart from the others

    def write(self, frame):
        if self.closed:
            raise RuntimeError("closed")
        if frame.data.startswith(b'{"type":"counts"'):
            self.counts.append(json.loads(frame.data))
        else:
            self.frames.append(frame.data)
        future = asyncio.get_running_loop().create_future()
        if self.flushed:
            future.set_result(None)
        return future

    def close(self, code, reason):
        self.closed = (code, reason)
