"""The website chat widget under its load (issue 38): 1,000 visitors with the chat's live WebSocket open on one
process (bench/widget_clients.py; each wrote a first message, so each is a contact with a conversation), one inbox
page open (bench/ws_clients.py). Reports the server's memory with the visitors connected against idle, the delay
from a visitor's message (its 201) to the inbox page, and from an agent's reply (POST /v1/contacts/{id}/messages,
its 201) to that visitor's chat, replies going to visitors picked in turn."""
import ssl
import threading
import time
from pathlib import Path

import httpx

from bench.scenarios.inbox import finish, open_pages, pages_allowed, sign_in, start_clients, summary

NAME = "widget"
TITLE = "Website chat widget: 1,000 connected visitors, messages both ways"
VISITORS = 1000
PER_SECOND = 10  # visitor messages, and agent replies, each
CLIENTS = Path(__file__).resolve().parent.parent / "widget_clients.py"


def enable_widget(parley):
    key = {"x-api-key": parley.first_run["api_key"]}
    with parley.client() as client:
        client.patch("/v1/account/settings", headers=key, json={"widget": {"enabled": True}}).raise_for_status()
        return client.get("/v1/account/widget", headers=key).json()["widgetId"]


def open_visitors(parley, widget, count=VISITORS):
    return start_clients(CLIENTS, [parley.base, parley.cert, widget, count], "the visitors")


def contacts(parley):
    """Every contact's id (the visitors'), by the listing's cursor."""
    found, cursor = [], None
    with parley.client() as client:
        while True:
            page = client.get("/v1/contacts", headers={"x-api-key": parley.first_run["api_key"]},
                              params={"limit": 200, **({"cursor": cursor} if cursor else {})}).json()
            found += [c["id"] for c in page["data"]]
            cursor = page["nextCursor"]
            if not cursor:
                return found


class Traffic:
    """New visitors writing at PER_SECOND (each message a new chat from an address of its own: a visitor may
    write 12 a minute) and an agent replying at PER_SECOND to the connected visitors in turn, each remembering
    when its 201 came."""

    def __init__(self, parley, widget, visitor_ids):
        self.parley, self.widget, self.visitor_ids = parley, widget, visitor_ids
        self.written, self.replied = {}, {}  # message id -> time.monotonic() of the 201
        self.stopping = threading.Event()
        self.clients = {}  # the writers' clients, by local address
        self.threads = [threading.Thread(target=self.paced, args=(self.write, self.written), daemon=True),
                        threading.Thread(target=self.paced, args=(self.reply, self.replied), daemon=True)]

    def write(self, client, n):
        # From one of 20 loopback addresses in turn (127.0.9.x): 30 a minute each, under the 60 allowed.
        address = f"127.0.9.{1 + n % 20}"
        if address not in self.clients:
            context = ssl.create_default_context(cafile=self.parley.cert)
            self.clients[address] = self.parley.client(
                transport=httpx.HTTPTransport(verify=context, local_address=address))
        response = self.clients[address].post(f"/widget/{self.widget}/messages", json={"body": f"probe {n}"},
                                              headers={"Origin": self.parley.base})
        response.raise_for_status()
        return response.json()["message"]["id"]

    def reply(self, client, n):
        contact = self.visitor_ids[n % len(self.visitor_ids)]
        response = client.post(f"/v1/contacts/{contact}/messages", json={"body": f"Reply {n}", "channel": "web"},
                               headers={"x-api-key": self.parley.first_run["api_key"]})
        response.raise_for_status()
        return response.json()["id"]

    def paced(self, send, answered):
        with self.parley.client() as client:
            n = 0
            while not self.stopping.is_set():
                n += 1
                message_id = send(client, n)
                answered[message_id] = at = time.monotonic()
                time.sleep(max(0.0, 1 / PER_SECOND - (time.monotonic() - at)))


def delays(sent, seen):
    """(sorted delays in ms from each 201 to its one receiver, those never received)."""
    got = [1000 * (seen["arrivals"][m][0] - at) for m, at in sent.items() if seen["arrivals"].get(m)]
    return sorted(got), len(sent) - len(got)


def run(ctx):
    count = 100 if ctx.args.quick else VISITORS
    data = ctx.fresh_data_dir("widget")
    parley = ctx.start_parley(data, "--max-connections", "4000", *pages_allowed(1))
    try:
        widget = enable_widget(parley)
        cookie = sign_in(parley)
        ctx.wait_for_quiet()
        idle = ctx.proc_status(parley.proc.pid)["processes"][0]["rss_mb"]
        ctx.log(f"  {count} visitors")
        visitors = open_visitors(parley, widget, count)
        ctx.wait_for_quiet()
        connected = ctx.proc_status(parley.proc.pid)["processes"][0]["rss_mb"]
        traffic = Traffic(parley, widget, contacts(parley))
        page = open_pages(parley, cookie, "*", 1)  # every contact's message.created
        ctx.log(f"  a visitor writing and an agent replying, {PER_SECOND}/s each, for {ctx.args.duration * 2} s")
        started = time.monotonic()
        for thread in traffic.threads:
            thread.start()
        time.sleep(ctx.args.duration * 2)
        traffic.stopping.set()
        for thread in traffic.threads:
            thread.join(30)
        seconds = time.monotonic() - started
        for client in traffic.clients.values():
            client.close()
        paged = finish(page, max(traffic.written, key=traffic.written.get))
        chatted = finish(visitors, max(traffic.replied, key=traffic.replied.get))
        server = ctx.proc_status(parley.proc.pid)
    finally:
        parley.stop()
    in_delays, in_missing = delays(traffic.written, paged)
    out_delays, out_missing = delays(traffic.replied, chatted)
    return {"visitors": count, "rss_idle_mb": idle, "rss_connected_mb": connected,
            "rss_growth_mb": round(connected - idle, 1), "visitor_messages": len(traffic.written),
            "replies": len(traffic.replied), "seconds": round(seconds, 1),
            "to_inbox_ms": summary(in_delays), "to_inbox_missing": in_missing,
            "to_visitor_ms": summary(out_delays), "to_visitor_missing": out_missing,
            "visitor_drops": chatted["drops"], "server_after": server}


def render(r):
    i, o = r["to_inbox_ms"], r["to_visitor_ms"]
    return [
        "| Delay (ms) | p50 | p99 | max | missing |",
        "|---|---:|---:|---:|---:|",
        f"| a visitor's message (201) → the open inbox page ({r['visitor_messages']}) | {i['p50']} | {i['p99']} | "
        f"{i['max']} | {r['to_inbox_missing']} |",
        f"| an agent's reply (201) → the visitor's chat ({r['replies']}) | {o['p50']} | {o['p99']} | {o['max']} | "
        f"{r['to_visitor_missing']} |",
        "",
        f"{r['visitors']:,} visitors connected (live WebSocket each, {r['visitor_drops']} drops): server RSS "
        f"{r['rss_idle_mb']} MB idle, {r['rss_connected_mb']} MB connected, {r['rss_growth_mb']} MB more. "
        f"Paced at {PER_SECOND}/s each, the visitors' messages and the replies ran at "
        f"{r['visitor_messages'] / r['seconds']:.1f}/s and {r['replies'] / r['seconds']:.1f}/s (each waits for its 201).",
    ]


def goals(r):
    from bench.report import goal
    i, o = r["to_inbox_ms"]["p99"], r["to_visitor_ms"]["p99"]
    return [
        goal("widget: server RSS with 1,000 visitors connected, more than idle (MB)", r["rss_growth_mb"], 60,
             r["rss_growth_mb"] <= 60),
        goal("widget: p99 visitor's message -> open inbox page (ms)", i, 500,
             i is not None and i <= 500 and r["to_inbox_missing"] == 0),
        goal("widget: p99 agent's reply -> the visitor's chat (ms)", o, 500,
             o is not None and o <= 500 and r["to_visitor_missing"] == 0),
    ]
