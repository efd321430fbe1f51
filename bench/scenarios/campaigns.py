"""Campaigns (issue 13): a 100,000-contact list and a campaign to it, unthrottled, against a local receiver
in its own process (plain http, --allow-private-webhooks).

Two campaigns to the same list on one server: the first alone measures the time to enqueue every recipient
(from the POST until no recipient is pending), the delivery throughput (messages the receiver got per
second, first to last) and the server's memory growth (peak RSS of server + writer over the RSS before the
POST); the second runs beside wrk's inbound load, whose p99 is reported beside the same load's idle figure
measured just before.
"""
import sqlite3
import subprocess
import sys
import threading
import time

import httpx

from bench.preload import preload
from tests.parley_process import free_port

NAME = "campaigns"
TITLE = "Campaigns: a 100,000-contact campaign"
INBOUND = "/v1/incoming_custom_channel_message"
UNTHROTTLED = 1_000_000  # ratePerMinute's maximum: far above what delivery can do


def _fill_list(db_path, account_id, name):
    """A list holding every contact, written straight into the stopped server's database (bench tooling)."""
    cx = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        count = cx.execute("SELECT COUNT(*) FROM contacts WHERE account_id = ?", (account_id,)).fetchone()[0]
        cx.execute("BEGIN")
        cx.execute("INSERT INTO lists (id, account_id, name, contact_count, created_at)"
                   " VALUES ('lst_bench', ?, ?, ?, '2024-01-01T00:00:00.000Z')", (account_id, name, count))
        cx.execute("INSERT INTO list_members (list_id, contact_id, added_at) SELECT 'lst_bench', id,"
                   " '2024-01-01T00:00:00.000Z' FROM contacts WHERE account_id = ?", (account_id,))
        cx.execute("COMMIT")
    finally:
        cx.close()
    return "lst_bench"


class Receiver:
    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "bench/receiver.py", "--port", str(self.port)],
                                     stdout=subprocess.PIPE, text=True)
        if '"listening"' not in self.proc.stdout.readline():
            raise RuntimeError("the receiver did not start")

    def stats(self):
        return httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=10).json()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


class Watch(threading.Thread):
    """Polls the campaign (every 0.1 s) and the server's memory until every message was delivered."""

    def __init__(self, ctx, parley, campaign_id, total, started):
        super().__init__(daemon=True)
        self.ctx, self.parley, self.campaign_id, self.total, self.started = ctx, parley, campaign_id, total, started
        self.enqueued_at = self.delivered_at = None
        self.peak_rss = 0.0
        self.last = None

    def run(self):
        key = {"apiKey": self.ctx.first_run["api_key"]}
        deadline = time.monotonic() + 1800
        with self.parley.client() as client:
            while time.monotonic() < deadline:
                self.last = client.get(f"/v1/campaigns/{self.campaign_id}", params=key).json()
                counts = self.last["counts"]
                now = time.monotonic()
                self.peak_rss = max(self.peak_rss, self.ctx.proc_status(self.parley.proc.pid)["rss_mb"])
                if self.enqueued_at is None and counts["pending"] == 0:
                    self.enqueued_at = now
                if counts["sent"] + counts["failed"] >= self.total:
                    self.delivered_at = now
                    return
                time.sleep(0.1)


def _campaign(client, key, list_id, name):
    r = client.post("/v1/campaigns", params=key, json={"name": name, "listId": list_id,
                                                       "body": "Hi {{firstName}}, the spring sale is on.",
                                                       "ratePerMinute": UNTHROTTLED})
    r.raise_for_status()
    return r.json()["id"]


def run(ctx):
    n = 10_000 if ctx.args.quick else 100_000
    data = ctx.fresh_data_dir("campaigns")
    account_id = ctx.first_run["account_id"]
    preload(data / "parley.db", account_id, contacts=n)
    list_id = _fill_list(data / "parley.db", account_id, "Everyone")
    receiver = Receiver()
    parley = ctx.start_parley(data, "--allow-private-webhooks")
    key = {"apiKey": ctx.first_run["api_key"]}
    inbound = f"{INBOUND}?apiKey={ctx.first_run['api_key']}"
    result = {"contacts": n}
    try:
        with parley.client() as client:
            client.patch("/v1/account/settings", params=key,
                         json={"customChannelWebhookUrl": f"http://127.0.0.1:{receiver.port}/hook"}).raise_for_status()
        ctx.log(f"  inbound alone (the idle figure), {ctx.args.duration} s")
        idle = ctx.load.wrk(parley.base, parley.proc.pid, "inbound", inbound, ctx.salts.sid("camp-idle"), 500)

        ctx.wait_for_quiet()
        before = ctx.proc_status(parley.proc.pid)
        ctx.log(f"  campaign 1: {n} recipients, unthrottled, nothing else running")
        with parley.client() as client:
            started = time.monotonic()
            watch = Watch(ctx, parley, _campaign(client, key, list_id, "Bench alone"), n, started)
        watch.start()
        watch.join()
        stats = receiver.stats()
        after = ctx.proc_status(parley.proc.pid)
        result["alone"] = {
            "enqueue_seconds": round(watch.enqueued_at - started, 2),
            "all_delivered_seconds": round(watch.delivered_at - started, 2),
            "received": stats["count"], "counts": watch.last["counts"],
            "delivery_per_second": round(stats["count"] / max(1e-9, stats["last"] - stats["first"]), 1),
            "rss_before_mb": before["rss_mb"], "peak_rss_mb": after["peak_rss_mb"],
            "peak_rss_growth_mb": round(after["peak_rss_mb"] - before["rss_mb"], 1), "processes": after["processes"]}
        ctx.log(f"  enqueued in {result['alone']['enqueue_seconds']} s, delivered at "
                f"{result['alone']['delivery_per_second']}/s, RSS growth {result['alone']['peak_rss_growth_mb']} MB")

        ctx.log("  campaign 2 with inbound load beside it")
        with parley.client() as client:
            started = time.monotonic()
            watch = Watch(ctx, parley, _campaign(client, key, list_id, "Bench with inbound"), n, started)
        watch.start()
        busy = ctx.load.wrk(parley.base, parley.proc.pid, "inbound", inbound, ctx.salts.sid("camp-busy"), 500,
                            quiet_first=False)
        progress = watch.last["counts"]
        watch.join()
        result["with_inbound"] = {"inbound_idle": _figures(idle), "inbound_during_campaign": _figures(busy),
                                  "campaign_progress_when_load_ended": progress,
                                  "all_delivered_seconds": round(watch.delivered_at - started, 2)}
    finally:
        parley.stop()
        receiver.stop()
    return result


def _figures(run):
    return {k: run[k] for k in ("rps", "p50_ms", "p99_ms", "requests", "server_cores", "other_cores")}


def render(r):
    a, w = r["alone"], r["with_inbound"]
    idle, busy = w["inbound_idle"], w["inbound_during_campaign"]
    return [
        f"{r['contacts']:,} recipients, ratePerMinute {UNTHROTTLED:,} (unthrottled), receiver in its own process "
        "(plain http, keep-alive).", "",
        "| Figure | Value |", "|---|---:|",
        f"| Time to enqueue every recipient | {a['enqueue_seconds']} s |",
        f"| Delivery throughput (receiver, first to last) | {a['delivery_per_second']:,} messages/s |",
        f"| All delivered after | {a['all_delivered_seconds']} s |",
        f"| Peak RSS growth (server + writer) | {a['peak_rss_growth_mb']} MB ({a['rss_before_mb']} → "
        f"{a['peak_rss_mb']} MB) |",
        f"| Inbound idle: req/s, p50, p99 | {idle['rps']:.0f}, {idle['p50_ms']:.1f} ms, {idle['p99_ms']:.1f} ms |",
        f"| Inbound during a campaign: req/s, p50, p99 | {busy['rps']:.0f}, {busy['p50_ms']:.1f} ms, "
        f"{busy['p99_ms']:.1f} ms |",
    ]


def goals(r):
    from bench.report import goal
    a = r["alone"]
    return [
        goal("campaign: enqueue 100k recipients <= 10 s", a["enqueue_seconds"], 10, a["enqueue_seconds"] <= 10),
        goal("campaign: delivery >= 1,000 messages/s", a["delivery_per_second"], 1000, a["delivery_per_second"] >= 1000),
        goal("campaign: peak RSS growth <= 50 MB", a["peak_rss_growth_mb"], 50, a["peak_rss_growth_mb"] <= 50),
    ]
