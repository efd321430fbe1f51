"""Team inbox (issue 21): 50 agents' inbox pages open (WebSockets, bench/ws_clients.py in a process of its own)
while assignments happen: a probe reassigns one conversation 10 times a second (PATCH /v1/conversations/{id},
between two users), and beside it bulk reassignments of 20 other conversations run 5 times a second (100
conversation.updated events a second). Reports the delay from each probe PATCH's 200 to its
conversation.updated arriving at each page (the issue's goal: p99 <= 1 s), and deliveries missing."""
import statistics
import threading
import time

from bench.scenarios.inbox import INBOUND, Probe, finish, open_pages, pages_allowed, sign_in, summary
from tests.team_users import add_user_to_server

NAME = "team_inbox"
TITLE = "Team inbox: 50 open pages while assignments happen (conversation.updated live)"
PAGES = 50
PROBES_PER_SECOND = 10
BULK_PER_SECOND = 5
BULK_SIZE = 20


class Assigner:
    """Reassigns conversations at a steady rate from a thread: one (the probe: each PATCH's 200 time kept in
    order) or a bulk of many (load)."""

    def __init__(self, parley, ids, users, rate):
        self.parley, self.ids, self.users, self.rate = parley, ids, users, rate
        self.answered = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        key = {"apiKey": self.parley.first_run["api_key"]}
        with self.parley.client() as client:
            n = 0
            while not self.stopping.is_set():
                n += 1
                started = time.monotonic()
                assignee = self.users[n % 2]
                if len(self.ids) == 1:
                    response = client.patch(f"/v1/conversations/{self.ids[0]}", params=key,
                                            json={"assigneeUserId": assignee})
                else:
                    response = client.post("/v1/conversations/bulk", params=key,
                                           json={"conversationIds": self.ids, "assigneeUserId": assignee})
                answered = time.monotonic()
                response.raise_for_status()
                self.answered.append(answered)
                time.sleep(max(0.0, 1 / self.rate - (answered - started)))


def contact_of(parley, from_id):
    """A conversation of its own: a contact who wrote once."""
    key = {"apiKey": parley.first_run["api_key"]}
    with parley.client() as client:
        response = client.post(INBOUND, params=key, json={"customData": {
            "messageSid": f"{from_id}-{time.time_ns()}", "fromId": from_id, "toId": "parley-bench", "body": "hi"}})
        response.raise_for_status()
        return client.get(f"/v1/messages/{response.json()['messageId']}", params=key).json()["contactId"]


def run(ctx):
    data = ctx.fresh_data_dir("team_inbox")
    # The 50 pages share one session cookie (bench/ws_clients.py) where 50 agents would have 50: a session may
    # keep them all live, as the account may.
    parley = ctx.start_parley(data, "--max-connections", "2000", *pages_allowed(PAGES))  # (as inbox.py's)
    try:
        cookie = sign_in(parley)
        users = [add_user_to_server(parley, parley.first_run["api_key"], f"agent{n}@bench.example",
                                    "bench agent password") for n in range(2)]
        watch = Probe(parley, "team-watch").contact_id()
        others = [contact_of(parley, f"team-other-{n}") for n in range(BULK_SIZE)]
        clients = open_pages(parley, cookie, watch, PAGES)
        ctx.wait_for_quiet()
        probe = Assigner(parley, [watch], users, PROBES_PER_SECOND)
        load = Assigner(parley, others, users, BULK_PER_SECOND)
        for assigner in (probe, load):
            assigner.thread.start()
        time.sleep(ctx.args.duration)
        for assigner in (probe, load):
            assigner.stopping.set()
            assigner.thread.join(30)
        with parley.client() as client:  # the last event: once every page has it, it has every update before it
            last, _ = Probe(parley, "team-last").post(client, 1)
        seen = finish(clients, last)
    finally:
        parley.stop()
    updates = sorted((int(key[7:]), arrivals) for key, arrivals in seen["arrivals"].items()
                     if key.startswith("update:"))
    delays, missing = [], PAGES * (len(probe.answered) - len(updates))
    for answered, (_, arrivals) in zip(probe.answered, updates):
        missing += PAGES - len(arrivals)
        delays += [1000 * (at - answered) for at in arrivals]
    delays.sort()
    return {"pages": PAGES, "probe_patches": len(probe.answered), "bulk_requests": len(load.answered),
            "updates_per_second": round((len(probe.answered) + BULK_SIZE * len(load.answered)) / ctx.args.duration, 1),
            "delay_ms": summary(delays), "deliveries_missing": missing, "reloads": seen["reloads"],
            "drops": seen["drops"], "events_delivered": seen["events"],
            "median_ms": round(statistics.median(delays), 1) if delays else None}


def render(r):
    d = r["delay_ms"]
    return [
        "| Delay, PATCH's 200 → conversation.updated at the page (ms) | p50 | p99 | max |",
        "|---|---:|---:|---:|",
        f"| {r['pages']} pages, {r['updates_per_second']} assignments/s | {d['p50']} | {d['p99']} | {d['max']} |",
        "",
        f"{r['probe_patches']} probe assignments, {r['bulk_requests']} bulk requests of {BULK_SIZE}; "
        f"{r['events_delivered']:,} events reached the pages; {r['deliveries_missing']} deliveries missing, "
        f"{r['reloads']} reloads, {r['drops']} dropped connections.",
    ]


def goals(r):
    from bench.report import goal
    p99 = r["delay_ms"]["p99"]
    return [goal("team inbox: p99 delay assignment 200 -> each of 50 pages", p99, 1000, p99 is not None and p99 <= 1000),
            goal("team inbox: no assignment event lost", r["deliveries_missing"], 0, r["deliveries_missing"] == 0)]
