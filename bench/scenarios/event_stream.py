"""One event stream under its load (issue 37): 1,000 integrations long-polling GET /v1/events (each its own
HTTPS connection, bench/long_poll_clients.py) and 500 live inbox pages (bench/ws_clients.py) on one process, while
inbound messages arrive at 20 per second. Reports the delay from the API's 200 to each waiter and each page
receiving the message, and the server's memory per waiting long-poll (RSS with the long-polls waiting minus RSS
before they were opened, the pages already open, divided by their number; the same of the process's private dirty
memory, /proc/PID/smaps_rollup, which counts only what the process wrote). The load average is recorded beside
each figure: the machine is shared, and a figure measured under load is an upper bound."""
import os
import time
from pathlib import Path

from bench.scenarios.inbox import PROBES_PER_SECOND as INBOUND_PER_SECOND
from bench.scenarios.inbox import (Probe, finish, open_pages, pages_allowed, probe_delays, sign_in,
                                   start_clients, summary)

NAME = "event_stream"
TITLE = "Event stream: 1,000 long-polls and 500 live pages, inbound at 20 messages/s"
LONG_POLLS = 1000
PAGES = 500
CLIENTS = Path(__file__).resolve().parent.parent / "long_poll_clients.py"


def newest_cursor(parley):
    """Where a new integration starts: the nextCursor after paging through what is there."""
    cursor = None
    with parley.client() as client:
        while True:
            params = {"limit": 500, **({"after": cursor} if cursor else {})}
            page = client.get("/v1/events", params=params, headers={"x-api-key": parley.first_run["api_key"]}).json()
            cursor = page["nextCursor"] or cursor
            if not page["data"]:
                return cursor


def memory_kb(pid):
    """The server process's (not its writer's) RSS and private dirty memory, in KB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:])
    return {name: int(fields[key].split()[0]) for name, key in (("rss", "Rss"), ("private_dirty", "Private_Dirty"))}


def load_average():
    return round(os.getloadavg()[0], 2)


def open_long_polls(parley, after, watch, count=LONG_POLLS):
    return start_clients(CLIENTS, [parley.base, parley.cert, parley.first_run["api_key"], count, after, watch],
                         "the long-poll clients")


def run(ctx):
    data = ctx.fresh_data_dir("event_stream")
    # Room for the load: the long-polls' share (0.25) and the live sockets' share (0.5) of --max-connections.
    parley = ctx.start_parley(data, "--max-connections", "6000", *pages_allowed(PAGES),
                              "--events-long-polls-per-key", str(LONG_POLLS),
                              "--events-long-polls-per-account", str(LONG_POLLS),
                              # The connections are opened, then measured idle, before their first request.
                              "--idle-timeout-seconds", "300")
    try:
        cookie = sign_in(parley)
        watch = Probe(parley, "setup").contact_id()
        after = newest_cursor(parley)
        ctx.log(f"  {PAGES} live pages")
        pages = open_pages(parley, cookie, watch, PAGES)
        ctx.wait_for_quiet()
        before, load_idle = memory_kb(parley.proc.pid), load_average()
        ctx.log(f"  {LONG_POLLS} connections, then a long-poll on each")
        polls = open_long_polls(parley, after, watch)  # connected, nothing asked yet
        time.sleep(3)  # what an open connection holds does not change with the machine's load
        connected = memory_kb(parley.proc.pid)
        polls.stdin.write("go\n")
        polls.stdin.flush()
        if '"ready"' not in polls.stdout.readline():
            raise RuntimeError("the long-poll clients did not start")
        ctx.wait_for_quiet()
        waiting, load_waiting = memory_kb(parley.proc.pid), load_average()
        ctx.log(f"  inbound at {INBOUND_PER_SECOND}/s for {ctx.args.duration * 2} s")
        # Eight senders: the messages keep arriving at 20/s while the server is busy (one sender waits for each
        # answer, and the rate fell to 6/s: bench/HISTORY.md).
        probe = Probe(parley, f"stream-{time.time_ns()}", senders=8)
        processes = {"server": parley.proc, "long_poll_clients": polls, "page_clients": pages}
        cpu_before = {name: ctx.cpu_seconds(process.pid, ctx.process_tree(process.pid))
                      for name, process in processes.items()}
        started = time.monotonic()
        probe.thread.start()
        time.sleep(ctx.args.duration * 2)
        probe.stopping.set()
        probe.thread.join(30)
        inbound_rate = round(len(probe.answered) / (ctx.args.duration * 2), 1)
        load_probe = load_average()
        # Who had the CPU: on 2 cores the clients' processes compete with the server they load.
        cores = {name: round((ctx.cpu_seconds(process.pid, ctx.process_tree(process.pid)) - cpu_before[name])
                             / (time.monotonic() - started), 2)
                 for name, process in processes.items()}
        last = max(probe.answered, key=probe.answered.get)
        polled = finish(polls, last)
        paged = finish(pages, last)
        server = ctx.proc_status(parley.proc.pid)
    finally:
        parley.stop()
    poll_delays, poll_missing = probe_delays(probe, polled, LONG_POLLS)
    page_delays, page_missing = probe_delays(probe, paged, PAGES)
    return {"long_polls": LONG_POLLS, "pages": PAGES, "probes": len(probe.answered),
            "rss_before_mb": round(before["rss"] / 1024, 1), "rss_waiting_mb": round(waiting["rss"] / 1024, 1),
            "kb_per_long_poll": round((waiting["rss"] - before["rss"]) / LONG_POLLS, 1),
            # Split: its TLS connection (open, nothing asked), and the long-poll waiting on it.
            "kb_per_connection": round((connected["rss"] - before["rss"]) / LONG_POLLS, 1),
            "kb_per_wait": round((waiting["rss"] - connected["rss"]) / LONG_POLLS, 1),
            "inbound_per_second": inbound_rate,
            "private_dirty_kb_per_long_poll": round((waiting["private_dirty"] - before["private_dirty"]) / LONG_POLLS, 1),
            "load_average": {"idle": load_idle, "waiting": load_waiting, "probe": load_probe},
            "long_poll_delay_ms": summary(poll_delays), "long_poll_missing": poll_missing,
            "long_poll_answers": polled["answers"], "long_poll_errors": polled["errors"],
            "long_poll_duplicates": polled.get("duplicates", 0),
            "page_delay_ms": summary(page_delays), "page_missing": page_missing,
            "page_drops": paged["drops"], "cores": cores, "server_after": server}


def render(r):
    lp, pg = r["long_poll_delay_ms"], r["page_delay_ms"]
    return [
        "| Delay, API's 200 → the event (ms) | p50 | p99 | max | missing |",
        "|---|---:|---:|---:|---:|",
        f"| each of {r['long_polls']:,} long-polls | {lp['p50']} | {lp['p99']} | {lp['max']} | {r['long_poll_missing']} |",
        f"| each of {r['pages']} live pages | {pg['p50']} | {pg['p99']} | {pg['max']} | {r['page_missing']} |",
        "",
        f"{r['probes']} inbound messages at 20/s ({r.get('inbound_per_second')}/s reached); the long-polls were answered {r['long_poll_answers']:,} times "
        f"({r['long_poll_errors']} errors, {r.get('long_poll_duplicates', 0)} messages given twice). Server RSS "
        f"{r['rss_before_mb']} MB with the pages open, {r['rss_waiting_mb']} MB with the long-polls waiting too: "
        f"{r['kb_per_long_poll']} KB per waiting long-poll ({r.get('private_dirty_kb_per_long_poll')} KB of private "
        f"dirty memory): {r.get('kb_per_connection')} KB its TLS connection, open with nothing asked, "
        f"{r.get('kb_per_wait')} KB the long-poll waiting on it. Cores used while inbound ran: {', '.join(f'{k} {v}' for k, v in r['cores'].items())}. "
        f"Load average (1 min): {', '.join(f'{k} {v}' for k, v in r.get('load_average', {}).items())} "
        "(2 cores, shared: a figure measured under load is an upper bound).",
    ]


def goals(r):
    from bench.report import goal
    lp = r["long_poll_delay_ms"]["p99"]
    # Met only with every message delivered once to every waiter, and the inbound rate held (within 5 %).
    return [
        goal("event stream: p99 delay API 200 -> each of 1,000 long-polls (500 pages open, 20 messages/s)", lp, 1000,
             lp is not None and lp <= 1000 and r["long_poll_missing"] == 0 and not r.get("long_poll_duplicates")
             and r.get("inbound_per_second", 0) >= 19),
        goal("event stream: server memory per waiting long-poll (KB)", r["kb_per_long_poll"], 20,
             r["kb_per_long_poll"] <= 20),
    ]
