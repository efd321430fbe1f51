"""GET /v1/events through the real server process over HTTPS (issue 37, "Done means"): a client running the resume
loop of docs/api.md#events long-polls while messages come in, the server is stopped (its waiting long-poll is
answered at once, not cut) and started again, more messages come in, and the client has seen every message.created
exactly once, in the order they were sent. On both databases (ParleyProcess uses the test's PostgreSQL database
when the PostgreSQL half runs)."""
import threading
import time

import httpx

from tests.parley_process import ParleyProcess
from tests.waiting import until_sync


class ResumeLoop:
    """The Python loop of docs/api.md#events in a thread: long-poll with the last nextCursor, ask again after a
    connection error or an error status; records the events and every answer's status."""

    def __init__(self, parley, key):
        self.parley, self.key = parley, key
        self.events, self.answers, self.cursor = [], [], None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stopping.is_set():
            params = {"wait": 30, "limit": 100, "types": "message.created"}
            if self.cursor:
                params["after"] = self.cursor
            try:
                with self.parley.client(timeout=40) as client:
                    r = client.get("/v1/events", params=params, headers={"x-api-key": self.key})
            except httpx.TransportError:
                time.sleep(0.2)  # the server restarting: ask again
                continue
            self.answers.append((r.status_code, time.monotonic()))
            if r.status_code != 200:
                time.sleep(0.2)
                continue
            page = r.json()
            self.events += page["data"]
            self.cursor = page["nextCursor"]

    def bodies(self):
        return [event["data"]["body"] for event in self.events]


def send_inbound(parley, key, body):
    with parley.client() as client:
        r = client.post("/v1/incoming_custom_channel_message", params={"apiKey": key},
                        json={"customData": {"messageSid": f"sid-{body}", "fromId": "visitor-1", "toId": "shop",
                                             "body": body, "channel": "webchat"}})
    assert r.status_code == 200, r.text
    return r.json()["messageId"]


def long_poll_refused(parley, key, cursor):
    """True when this key's one long-poll is taken (--events-long-polls-per-key 1): the loop is waiting."""
    with parley.client() as client:
        return client.get("/v1/events", params={"wait": 1, "after": cursor},
                          headers={"x-api-key": key}).status_code == 429


def wait_until(condition):
    assert until_sync(condition, 30), "not reached in 30 s"


def test_a_long_poll_client_sees_every_message_once_in_order_across_a_server_restart(tmp_path):
    parley = ParleyProcess(tmp_path / "data", "--events-long-polls-per-key", "1", http=False).start()
    try:
        key = parley.first_run["api_key"]
        loop = ResumeLoop(parley, key)
        loop.thread.start()
        sent = [send_inbound(parley, key, f"before {n}") for n in range(5)]
        wait_until(lambda: len(loop.events) == 5)
        # The loop is back in a long-poll (this key may hold one: a second is a 429); a stopping server answers
        # it at once (with what it has) rather than cutting the connection or keeping it until the wait ends.
        wait_until(lambda: long_poll_refused(parley, key, loop.cursor))
        answered = len(loop.answers)
        stop_asked = time.monotonic()
        assert parley.stop() == 0
        wait_until(lambda: len(loop.answers) > answered)
        status, at = loop.answers[answered]
        assert status == 200 and at - stop_asked < 25  # well before the 30 s wait

        parley.start()  # the same data directory and port: the cursor the loop kept is still valid
        sent += [send_inbound(parley, key, f"after {n}") for n in range(5)]
        wait_until(lambda: len(loop.events) >= 10)
        loop.stopping.set()
        assert [event["data"]["id"] for event in loop.events] == sent
        assert loop.bodies() == [f"before {n}" for n in range(5)] + [f"after {n}" for n in range(5)]
        assert len({event["id"] for event in loop.events}) == 10
        assert {status for status, _ in loop.answers} <= {200, 429}  # 429: while the test's probe waited
    finally:
        loop.stopping.set()
        parley.stop()
