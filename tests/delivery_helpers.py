"""Webhook delivery in tests: a real local HTTP receiver that records what it gets and answers from a script, and
the rows a reply's delivery is made of (for tests/test_delivery.py and every test that receives a webhook)."""
import asyncio
import http.server
import json
import threading
import time
from datetime import timedelta

import tornado.httpserver
import tornado.web
from tornado.testing import bind_unused_port

from common.ids import new_id, now_iso
from services import accounts
from storage import delivery as store
from storage.contacts import insert_contact_in_tx
from storage.messages import get_message, insert_message_in_tx
from storage.outbox import enqueue_in_tx
from tests.parley_process import free_port


class Receiver:
    """A real HTTP server on 127.0.0.1 that records every request and answers from a script:
    each answer is (status, headers, body), "hang" (wait until released, then 200) or ("hang", status,
    headers, body) (wait until released, then that answer); then 200 by default."""

    def __init__(self, port=None):
        self.requests = []
        self.answers = []
        self.in_flight = 0
        self.release = asyncio.Event()
        self.server = None
        if port is None:
            sock, self.port = bind_unused_port()
            sock.close()
        else:
            self.port = port

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self):
        receiver = self

        class Handler(tornado.web.RequestHandler):
            def check_xsrf_cookie(self):
                pass

            async def post(self, path):
                receiver.requests.append({"path": self.request.path, "headers": dict(self.request.headers),
                                          "body": self.request.body})
                answer = receiver.answers.pop(0) if receiver.answers else (200, {}, b"ok")
                if answer == "hang" or answer[0] == "hang":
                    receiver.in_flight += 1
                    try:
                        await asyncio.wait_for(receiver.release.wait(), 30)
                    finally:
                        receiver.in_flight -= 1
                    answer = (200, {}, b"late ok") if answer == "hang" else answer[1:]
                status, headers, body = answer
                self.set_status(status)
                for name, value in headers.items():
                    self.set_header(name, value)
                self.finish(body)

        self.server = tornado.httpserver.HTTPServer(tornado.web.Application([(r"/(.*)", Handler)]))
        self.server.listen(self.port, "127.0.0.1")
        return self

    async def close(self):
        self.release.set()
        if self.server is not None:
            self.server.stop()
            await self.server.close_all_connections()
            self.server = None


async def set_reply_url(services, account, url):
    # Stored directly (no save-time check): the delivery-time guard must stand on its own.
    await accounts.update_settings(services.db, account["account_id"], {"customChannelWebhookUrl": url})


async def queue_reply(services, account, body="Thanks, we got it", channel="my-chat", to_id="user-42"):
    """An outbound message (status Pending) and its outbox row, in one transaction, as the messaging
    service writes them. Returns (message_id, payload)."""
    account_id = account["account_id"]
    message_id, contact_id, now = new_id("msg"), new_id("ct"), now_iso()
    payload = {"contactId": contact_id, "messageId": message_id, "userId": "usr_owner", "body": body,
               "toId": to_id, "channel": channel}

    await services.db.write(_insert_reply, account_id, contact_id, message_id, payload, now)
    return message_id, payload


def _insert_reply(cx, account_id, contact_id, message_id, payload, now):
    """(In the writer process.) A contact, its Pending outbound message and the outbox row."""
    insert_contact_in_tx(cx, {"id": contact_id, "account_id": account_id, "created_at": now})
    insert_message_in_tx(cx, {"id": message_id, "account_id": account_id, "contact_id": contact_id,
                              "direction": "outbound", "status": "Pending", "body": payload["body"],
                              "channel": payload["channel"], "message_type": "text", "to_id": payload["toId"],
                              "created_at": now})
    enqueue_in_tx(cx, account_id=account_id, kind="reply", payload=payload, message_id=message_id)


async def delivery_state(services, account, message_id):
    account_id = account["account_id"]
    message = await get_message(services.db, account_id, message_id)
    outbox = await store.get_outbox_for_message(services.db, account_id, message_id)
    attempts = await store.list_attempts(services.db, account_id, outbox["id"])
    return message, outbox, attempts


async def secret_of(services, account):
    return (await accounts.get_webhook_secret(services.db, services.box, account["account_id"]))["secret"]


def later(now, seconds):
    return now + timedelta(seconds=seconds)


class ThreadedReceiver:
    """A real HTTP/1.1 server in a thread (the test itself is synchronous) recording every POST with its
    arrival time (time.monotonic), path and JSON payload; answer(payload, number of earlier requests for the same
    messageId) gives the status (200 by default)."""

    def __init__(self, port=None, answer=None):
        self.port = port or free_port()
        self.requests = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                payload = json.loads(body)
                with receiver.lock:
                    earlier = sum(1 for r in receiver.requests if r["payload"].get("messageId") == payload.get("messageId"))
                    receiver.requests.append({"at": time.monotonic(), "path": self.path,
                                              "headers": dict(self.headers.items()), "body": body, "payload": payload})
                self.send_response(answer(payload, earlier) if answer else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/hook"

    def payloads(self):
        with self.lock:
            return [r["payload"] for r in self.requests]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
