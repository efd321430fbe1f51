"""The rule bot (issue 10): inbound message -> the bot's reply arriving at a local receiver, p50 and p99 at
32 conversations; and inbound throughput with the rule bot active beside the bot-off figure, measured in
the same run (goal: the bot costs at most 15 % of inbound throughput).

The receiver (bench/bot_peer.py) runs in its own process. Latency: 32 conversations, each sending a
message and waiting for the bot's reply before the next (a person waiting for an answer), so the figure
is the reply's own delay, not a queue's. Throughput: wrk's inbound load (bench/load.lua, every message
matches a rule) with the bot off and on, alternating; after each bot-on run the harness waits until every
message of the run has its outcome and every reply is delivered, and reports how long that took (the
backlog the run left) and how many replies arrived during the run itself.
"""
import signal
import statistics
import subprocess
import sys
import time

import httpx

NAME = "bot"
TITLE = "Rule bot: reply latency and the bot's cost on inbound throughput"
INBOUND = "/v1/incoming_custom_channel_message"
BOT = {"rules": [{"keywords": ["stock", "price"], "answer": "Yes, the blue one is in stock, from $10."}]}
DRAIN_LIMIT = 300  # seconds to wait for a bot-on run's backlog


class PeerProcess:
    def __init__(self, port):
        self.port = port
        self.proc = subprocess.Popen([sys.executable, "bench/bot_peer.py", "--port", str(port)],
                                     stdout=subprocess.PIPE, text=True)
        if '"listening"' not in self.proc.stdout.readline():
            raise RuntimeError("bench/bot_peer.py did not start")
        self.base = f"http://127.0.0.1:{port}"

    def count(self):
        return httpx.get(f"{self.base}/count").json()["count"]

    def drive(self, **spec):
        return httpx.post(f"{self.base}/drive", json=spec, timeout=spec["seconds"] + 120).json()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 2)


def run(ctx):
    from tests.parley_process import free_port
    data = ctx.fresh_data_dir("bot")
    parley = ctx.start_parley(data, "--allow-private-webhooks")
    peer = PeerProcess(free_port())
    key = ctx.first_run["api_key"]
    db = data / "parley.db"
    try:
        with parley.client(params={"apiKey": key}) as api:
            def set_bot(active):
                r = api.patch("/v1/account/settings", json={"customChannelWebhookUrl": f"{peer.base}/hook",
                                                           "bot": {**BOT, "active": active}})
                assert r.status_code == 200, r.text

            def drained(salt):
                """Seconds until every message with this sid prefix has the bot's outcome and no reply waits."""
                started = time.monotonic()
                while time.monotonic() - started < DRAIN_LIMIT:
                    undecided = ctx.count_rows(db, "SELECT COUNT(*) FROM messages WHERE direction = 'inbound'"
                                                   " AND bot_outcome IS NULL AND external_id LIKE ?", f"{salt}-%")
                    pending = ctx.count_rows(db, "SELECT COUNT(*) FROM outbox WHERE status = 'pending'")
                    if undecided == 0 and pending == 0:
                        return round(time.monotonic() - started, 2)
                    time.sleep(0.25)
                return None

            set_bot(True)
            ctx.log("  latency: 32 conversations waiting for the bot's replies")
            ctx.wait_for_quiet()
            latency = peer.drive(base=parley.base, key=key, cafile=parley.cert, conversations=ctx.args.connections,
                                 seconds=ctx.args.duration, salt=ctx.salts.sid("conv"))
            ctx.log(f"  {latency['replies']} replies, p50 {percentile(latency['reply_ms'], 50)} ms, "
                    f"p99 {percentile(latency['reply_ms'], 99)} ms, timeouts {latency['timeouts']}")

            path = f"{INBOUND}?apiKey={key}"
            runs = {"off": [], "on": []}
            extras = {"replies_during_run": [], "drain_seconds": [], "accepted": [], "all_in_cpu_ms": []}
            tree = ctx.process_tree(parley.proc.pid)
            for mode in ("off", "on"):  # warm-up
                set_bot(mode == "on")
                salt = ctx.salts.sid(f"warm-{mode}")
                ctx.load.wrk(parley.base, parley.proc.pid, "inbound", path, salt, 500, duration=2)
                if mode == "on":
                    drained(salt)
            for rep in range(ctx.args.repeat):
                for mode in ("off", "on"):
                    set_bot(mode == "on")
                    salt = ctx.salts.sid(f"bot-{mode}{rep}")
                    before = peer.count()
                    ctx.wait_for_quiet()
                    cpu_before = ctx.cpu_seconds(parley.proc.pid, tree)
                    result = ctx.load.wrk(parley.base, parley.proc.pid, "inbound", path, salt, 500, quiet_first=False)
                    runs[mode].append(result)
                    if mode == "on":
                        extras["replies_during_run"].append(peer.count() - before)
                        extras["accepted"].append(result["requests"])
                        extras["drain_seconds"].append(drained(salt))
                        # Everything the run's messages cost the server, their deferred deliveries included.
                        extras["all_in_cpu_ms"].append(
                            1000 * (ctx.cpu_seconds(parley.proc.pid, tree) - cpu_before) / result["requests"])
                        ctx.log(f"  bot on: {extras['replies_during_run'][-1]} of {result['requests']} replies "
                                f"arrived during the run; backlog drained in {extras['drain_seconds'][-1]} s")
            outcomes = ctx.count_rows(db, "SELECT COUNT(*) FROM messages WHERE direction = 'inbound'"
                                          " AND json_extract(bot_outcome, '$.outcome') = 'rule'")
    finally:
        peer.stop()
        parley.stop()
    off, on = ctx.median_of(runs["off"]), ctx.median_of(runs["on"])
    drains = [d for d in extras["drain_seconds"] if d is not None]
    return {
        "latency": {"conversations": ctx.args.connections, "replies": latency["replies"],
                    "timeouts": latency["timeouts"], "errors": latency["errors"],
                    "reply_p50_ms": percentile(latency["reply_ms"], 50),
                    "reply_p99_ms": percentile(latency["reply_ms"], 99),
                    "inbound_p50_ms": percentile(latency["inbound_ms"], 50),
                    "inbound_p99_ms": percentile(latency["inbound_ms"], 99)},
        "bot_off": off, "bot_on": on, "ratio": round(on["rps"] / off["rps"], 3),
        "replies_during_run_share": round(statistics.median(
            r / a for r, a in zip(extras["replies_during_run"], extras["accepted"])), 3),
        "drain_seconds_max": max(drains) if drains else None,
        "bot_on_all_in_cpu_ms_per_message": round(statistics.median(extras["all_in_cpu_ms"]), 3),
        "undrained_runs": len(extras["drain_seconds"]) - len(drains),
        "rule_outcomes_recorded": outcomes,
    }


def render(r):
    lat, off, on = r["latency"], r["bot_off"], r["bot_on"]
    return [
        "| Rule bot | req/s | p50 ms | p99 ms | Parley CPU ms/req | Parley cores (main) | Errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| inbound, bot off | {off['rps']:.0f} | {off['p50_ms']:.1f} | {off['p99_ms']:.1f} | "
        f"{off['server_cpu_ms_per_request']:.2f} | {off['server_cores']:.2f} ({off['main_process_cores']:.2f}) | "
        f"{off['non_2xx_or_socket_errors']} |",
        f"| inbound, rule bot on | {on['rps']:.0f} | {on['p50_ms']:.1f} | {on['p99_ms']:.1f} | "
        f"{on['server_cpu_ms_per_request']:.2f} | {on['server_cores']:.2f} ({on['main_process_cores']:.2f}) | "
        f"{on['non_2xx_or_socket_errors']} |",
        "",
        f"Bot on ÷ bot off: {r['ratio']:.2f}. During a bot-on run {100 * r['replies_during_run_share']:.0f} % of the "
        f"replies reached the receiver; the rest of the backlog drained within {r['drain_seconds_max']} s after "
        f"the run ({r['undrained_runs']} runs did not drain in {DRAIN_LIMIT} s). All in (the run and its "
        f"backlog's deliveries), a message with the bot on cost the server {r['bot_on_all_in_cpu_ms_per_message']} "
        f"ms of CPU, against {off['server_cpu_ms_per_request']:.2f} ms with the bot off.",
        "",
        f"Reply latency, inbound message sent -> the bot's reply at the receiver (its own process), "
        f"{lat['conversations']} conversations each waiting for its reply: p50 {lat['reply_p50_ms']} ms, "
        f"p99 {lat['reply_p99_ms']} ms over {lat['replies']} replies ({lat['timeouts']} timeouts, "
        f"{lat['errors']} errors); the inbound 200 itself p50 {lat['inbound_p50_ms']} ms, p99 {lat['inbound_p99_ms']} ms.",
    ]


def goals(r):
    from bench.report import goal
    return [goal("rule bot on: inbound req/s >= 0.85 x bot off", r["ratio"], 0.85, r["ratio"] >= 0.85)]
