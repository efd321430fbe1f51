"""Webhook delivery through the real server process (HTTPS, --allow-private-webhooks): a reply queued
while the receiver is down is delivered after the server restarts."""
import http.server
import json
import threading
import time

from standardwebhooks import Webhook

from tests.parley_process import ParleyProcess, free_port


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


def wait_until(check, timeout=30.0):
    """Poll until check() returns something truthy; a deadline, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def test_a_reply_queued_while_the_receiver_is_down_is_delivered_after_a_restart(tmp_path):
    """Spec §6: "the message status becomes Sent on success and Failed on error or unreachability";
    docs/design.md#api-decisions: "Outbox rows survive restarts", "a later success moves the message to Sent", "every
    attempt is recorded"."""
    data = tmp_path / "data"
    args = ("--allow-private-webhooks", "--webhook-timeout-seconds", "2")
    receiver_port = free_port()
    with ParleyProcess(data, *args, http=False) as parley, parley.client() as client:
        key = {"apiKey": parley.first_run["api_key"]}
        r = client.patch("/v1/account/settings", params=key,
                         json={"customChannelWebhookUrl": f"http://127.0.0.1:{receiver_port}/hook"})
        assert r.status_code == 200, r.text
        secret = client.get("/v1/account/webhook-secret", params=key).json()["secret"]
        r = client.post("/v1/send_custom_channel_message", params=key,
                        json={"customData": {"fromId": "user-7", "customChannel": "chat",
                                             "body": "Your order has shipped"}})
        assert r.status_code == 200, r.text
        message_id = r.json()["messageId"]

        # Nobody listens on the receiver's port: the first attempt fails and the error is stored.
        failed = wait_until(lambda: (m := client.get(f"/v1/messages/{message_id}", params=key).json())
                            ["status"] == "Failed" and m)
        assert failed["error"]["error"].startswith("connection error")
        assert [a["httpStatus"] for a in failed["attempts"]] == [None]

    with ThreadedReceiver(receiver_port) as receiver:
        with ParleyProcess(data, *args, http=False) as parley, parley.client() as client:
            wait_until(lambda: receiver.requests)
            sent = wait_until(lambda: (m := client.get(f"/v1/messages/{message_id}", params=key).json())
                              ["status"] == "Sent" and m)
    assert len(receiver.requests) == 1
    request = receiver.requests[0]
    payload = Webhook(secret).verify(request["body"], request["headers"])
    assert payload["messageId"] == message_id and payload["body"] == "Your order has shipped"
    assert payload["toId"] == "user-7" and payload["channel"] == "chat"
    assert set(payload) >= {"contactId", "messageId", "userId", "body", "toId", "channel"}
    assert sent["error"] is None
    assert [a["httpStatus"] for a in sent["attempts"]] == [None, 200]
