"""Load for the fault tests (tests/test_faults.py, tests/test_postgres_faults.py): threads posting inbound messages
to a server process that a test kills or cuts off, remembering what was answered."""
import os
import threading
import time
from collections import Counter

import httpx

from tests.inbound_helpers import INBOUND

# PARLEY_FAULT_SCALE multiplies the load of the fault tests (make faults).
SCALE = max(1, int(os.environ.get("PARLEY_FAULT_SCALE", "1")))


def inbound_body(sid, from_id, n=0):
    return {"customData": {"messageSid": sid, "fromId": from_id, "toId": "fault-test",
                           "body": f"message {n} from {from_id}", "channel": "faults"}}


# Senders of the inbound load: ids, phones and emails (a new contact on first sight of each).
FROM_IDS = [f"user-{k}" for k in range(10)] + [f"+1415555{k:04d}" for k in range(5)] + \
           [f"lead{k}@example.com" for k in range(5)]


class InboundLoad:
    """Threads posting inbound messages with unique messageSids; remembers which were answered 200."""

    def __init__(self, parley, threads, from_ids):
        self.parley, self.threads, self.from_ids = parley, threads, from_ids
        self.answered = {}          # messageSid -> messageId (200 received)
        self.sent = {}              # messageSid -> the body posted (a retry sends the same message again)
        self.unanswered = set()     # sent, but no 200 arrived (connection cut, error)
        self.other_statuses = Counter()
        self.refused = set()        # answered 503 "nothing was written"
        self.slowest = 0.0          # seconds, the slowest answer
        self.cut = 0                # threads ended by a transport error or the client's 30 s timeout
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.workers = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in range(threads)]

    def _run(self, t):
        key = self.parley.first_run["api_key"]
        with self.parley.client() as client:
            n = 0
            while not self.stop.is_set():
                n += 1
                sid = f"kill-{t}-{n}"
                body = inbound_body(sid, self.from_ids[n % len(self.from_ids)], n)
                with self.lock:
                    self.unanswered.add(sid)
                    self.sent[sid] = body
                started = time.monotonic()
                try:
                    response = client.post(INBOUND, params={"apiKey": key}, json=body)
                except httpx.HTTPError:
                    with self.lock:
                        self.cut += 1
                    return  # the server is gone (or hung): this sid stays unanswered
                with self.lock:
                    self.slowest = max(self.slowest, time.monotonic() - started)
                    if response.status_code == 200:
                        self.unanswered.discard(sid)
                        self.answered[sid] = response.json()["messageId"]
                    else:
                        self.other_statuses[response.status_code] += 1
                        if "nothing was written" in response.text:
                            self.refused.add(sid)

    def wait_answered(self, count, timeout=60):
        """Until `count` sids in all were answered 200; whether they were."""
        deadline = time.monotonic() + timeout
        while len(self.answered) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return len(self.answered) >= count

    def __enter__(self):
        for worker in self.workers:
            worker.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for worker in self.workers:
            worker.join(30)


def wait_for(predicate, timeout, interval=0.2):
    """Whether predicate() became true within timeout seconds (checked every interval)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
