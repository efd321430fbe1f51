"""Inbox live events under load: 500 open inbox pages (WebSockets authenticated by a session cookie, held by
bench/ws_clients.py in a process of its own) while wrk drives the inbound endpoint. Reports inbound
throughput with the pages open beside the same load with none (runs alternating, in the same run), and the
delay from the API's 200 to the event arriving at each page, measured with probe messages (a steady
trickle from one contact, sent beside wrk's load in both modes).

Every page receives every event of the account (the bench's load is one account's), so this is the
fan-out's worst case: each inbound message becomes 500 deliveries."""
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

NAME = "inbox"
TITLE = "Inbox: 500 open pages (live events over WebSockets) under inbound load"
PAGES = 500
PROBES_PER_SECOND = 20
INBOUND = "/v1/incoming_custom_channel_message"
CLIENTS = Path(__file__).resolve().parent.parent / "ws_clients.py"


def sign_in(parley):
    """A session cookie, as a browser gets one: the login form with its XSRF token."""
    with parley.client() as client:
        client.get("/login")
        response = client.post("/login", data={"email": parley.first_run["login"], "password":
                                               parley.first_run["password"], "_xsrf": client.cookies["_xsrf"]})
        assert response.status_code == 303, response.text
        return "; ".join(f"{name}={value}" for name, value in client.cookies.items())


class Probe:
    """Posts inbound messages from one contact at a steady rate; remembers when each one's 200 arrived."""

    def __init__(self, parley, label):
        self.parley, self.label = parley, label
        self.answered = {}  # messageId -> time.monotonic() of the 200
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def post(self, client, n):
        response = client.post(INBOUND, params={"apiKey": self.parley.first_run["api_key"]},
                               json={"customData": {"messageSid": f"probe-{self.label}-{n}", "fromId": "bench-probe",
                                                    "toId": "parley-bench", "body": f"probe {n}"}})
        answered = time.monotonic()
        response.raise_for_status()
        return response.json()["messageId"], answered

    def run(self):
        with self.parley.client() as client:
            n = 0
            while not self.stopping.is_set():
                n += 1
                message_id, answered = self.post(client, n)
                self.answered[message_id] = answered
                time.sleep(max(0.0, 1 / PROBES_PER_SECOND - (time.monotonic() - answered)))

    def contact_id(self):
        with self.parley.client() as client:
            message_id, _ = self.post(client, 0)
            response = client.get(f"/v1/messages/{message_id}", params={"apiKey": self.parley.first_run["api_key"]})
            return response.json()["contactId"]


def open_pages(parley, cookie, watch):
    clients = subprocess.Popen([sys.executable, str(CLIENTS), parley.base, parley.cert, cookie, str(PAGES), watch],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = clients.stdout.readline()
    if '"ready"' not in line:
        clients.kill()
        raise RuntimeError(f"the WebSocket clients did not start: {line!r}")
    return clients


def measure(ctx, parley, cookie, watch, with_pages, rep):
    label = f"{'pages' if with_pages else 'none'}{rep}"
    clients = open_pages(parley, cookie, watch) if with_pages else None
    ctx.wait_for_quiet()
    client_cpu = ctx.cpu_seconds(clients.pid) if clients else 0.0
    probe = Probe(parley, f"{label}-{time.time_ns()}")
    probe.thread.start()
    try:
        load = ctx.load.wrk(parley.base, parley.proc.pid, "inbound", f"{INBOUND}?apiKey={parley.first_run['api_key']}",
                            ctx.salts.sid(label), 500, quiet_first=False)
    finally:
        probe.stopping.set()
        probe.thread.join(30)
    result = {"inbound": load, "probes": len(probe.answered)}
    if clients:
        result["client_cores"] = round((ctx.cpu_seconds(clients.pid) - client_cpu) / (load["seconds"] + 1), 2)
        last = max(probe.answered, key=probe.answered.get)
        out, _ = clients.communicate(last, timeout=120)  # returns once the pages have the last probe's event
        seen = json.loads(out.strip().splitlines()[-1])
        delays, missing = [], 0
        for message_id, answered in probe.answered.items():
            arrivals = seen["arrivals"].get(message_id, [])
            missing += PAGES - len(arrivals)
            delays += [1000 * (at - answered) for at in arrivals]
        delays.sort()
        result.update({"frames": seen["frames"], "events_delivered": seen["events"], "reloads": seen["reloads"],
                       "drops": seen["drops"], "probe_deliveries": len(delays), "probe_deliveries_missing": missing,
                       "delay_ms": {"p50": _percentile(delays, 50), "p99": _percentile(delays, 99),
                                    "max": round(delays[-1], 1) if delays else None}})
    return result


def _percentile(values, p):
    if not values:
        return None
    return round(values[min(len(values) - 1, int(len(values) * p / 100))], 1)


def run(ctx):
    data = ctx.fresh_data_dir("inbox")
    parley = ctx.start_parley(data)
    try:
        cookie = sign_in(parley)
        watch = Probe(parley, "setup").contact_id()
        runs = {"none": [], "pages": []}
        for rep in range(ctx.args.repeat):
            for mode in ("none", "pages"):
                ctx.log(f"  inbound with {PAGES if mode == 'pages' else 'no'} open inbox pages")
                runs[mode].append(measure(ctx, parley, cookie, watch, mode == "pages", rep))
        server = ctx.proc_status(parley.proc.pid)
    finally:
        parley.stop()
    none = ctx.median_of([r["inbound"] for r in runs["none"]])
    pages = ctx.median_of([r["inbound"] for r in runs["pages"]])
    delays = [r["delay_ms"] for r in runs["pages"]]
    return {"pages": PAGES, "probes_per_second": PROBES_PER_SECOND, "without_pages": none, "with_pages": pages,
            "ratio": round(pages["rps"] / none["rps"], 3),
            "delay_ms": {k: statistics.median(d[k] for d in delays) for k in ("p50", "p99", "max")},
            "reloads": sum(r["reloads"] for r in runs["pages"]), "drops": sum(r["drops"] for r in runs["pages"]),
            "probe_deliveries": sum(r["probe_deliveries"] for r in runs["pages"]),
            "probe_deliveries_missing": sum(r["probe_deliveries_missing"] for r in runs["pages"]),
            "events_delivered": sum(r["events_delivered"] for r in runs["pages"]),
            "frames": sum(r["frames"] for r in runs["pages"]),
            "client_cores": statistics.median(r["client_cores"] for r in runs["pages"]),
            "server_after": server, "runs": runs}


def render(r):
    w, p = r["without_pages"], r["with_pages"]
    return [
        "| Inbound load | Parley req/s | p50 ms | p99 ms | Parley cores (main) | Errors |",
        "|---|---:|---:|---:|---:|---:|",
        f"| no inbox page open | {w['rps']:.0f} | {w['p50_ms']:.1f} | {w['p99_ms']:.1f} | "
        f"{w['server_cores']:.2f} ({w['main_process_cores']:.2f}) | {w['non_2xx_or_socket_errors']} |",
        f"| {r['pages']} inbox pages open | {p['rps']:.0f} | {p['p50_ms']:.1f} | {p['p99_ms']:.1f} | "
        f"{p['server_cores']:.2f} ({p['main_process_cores']:.2f}) | {p['non_2xx_or_socket_errors']} |",
        "",
        f"With the pages open inbound runs at {r['ratio']:.2f}× the rate without. Delay from the API's 200 to the "
        f"event at a page ({r['probe_deliveries']} probe deliveries, {r['probes_per_second']} probes/s beside the "
        f"load): p50 {r['delay_ms']['p50']} ms, p99 {r['delay_ms']['p99']} ms, max {r['delay_ms']['max']} ms. "
        f"{r['events_delivered']:,} events reached the pages in {r['frames']:,} frames; "
        f"{r['probe_deliveries_missing']} probe deliveries missing, {r['reloads']} reloads, {r['drops']} dropped "
        f"connections. The page clients used {r['client_cores']} cores.",
    ]


def goals(r):
    from bench.run import goal
    return [
        goal("inbox: no live event lost at 500 open pages (probe deliveries missing)", r["probe_deliveries_missing"],
             0, r["probe_deliveries_missing"] == 0),
        goal("inbox: p99 delay API 200 -> page <= 1000 ms at 500 pages under load", r["delay_ms"]["p99"], 1000,
             r["delay_ms"]["p99"] is not None and r["delay_ms"]["p99"] <= 1000),
    ]
