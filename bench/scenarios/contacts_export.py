"""Contacts export (issue 41): GET /v1/contacts/export.csv of 100,000 contacts, streamed a page at a time; the
server's RSS (its process tree: the server and its writer) sampled every 100 ms while the file downloads, and the
time to the first byte and to the end."""
import csv
import io
import time

from bench.preload import preload
from bench.scenarios.contact_import import RssSampler

NAME = "contacts_export"
TITLE = "Contacts CSV export (issue 41)"
CONTACTS = 100_000
GOAL_RSS_GROWTH_MB = 30


def run(ctx):
    contacts = 10_000 if ctx.args.quick else CONTACTS
    data = ctx.fresh_data_dir("contacts-export")
    preload(data / "parley.db", ctx.first_run["account_id"], contacts=contacts)
    parley = ctx.start_parley(data)
    try:
        pid = parley.proc.pid
        key = ctx.first_run["api_key"]
        with parley.client() as client:
            client.get("/v1/contacts", params={"apiKey": key, "limit": "1"}).raise_for_status()  # warm up
            ctx.wait_for_quiet()
            before = ctx.proc_status(pid)
            sampler = RssSampler(ctx, pid)
            sampler.start()
            started = time.monotonic()
            first_byte, size, tail = None, 0, b""
            lines = 0
            with client.stream("GET", "/v1/contacts/export.csv", params={"apiKey": key}, timeout=600) as r:
                r.raise_for_status()
                for chunk in r.iter_bytes():
                    first_byte = first_byte or time.monotonic() - started
                    size += len(chunk)
                    lines += chunk.count(b"\n")
                    tail = (tail + chunk)[-4096:]
            seconds = time.monotonic() - started
            sampler.stop.set()
            sampler.join()
        rows = lines - 1  # the header (no cell holds a newline here)
        last = next(csv.reader(io.StringIO(tail.decode("utf-8", "replace").splitlines()[-1])))
    finally:
        parley.stop()
    ctx.log(f"  {rows} contacts, {size / 2**20:.1f} MB in {seconds:.1f} s; RSS {before['rss_mb']} -> "
            f"{sampler.peak_mb} MB")
    return {"contacts": contacts, "rows": rows, "mb": round(size / 2**20, 1), "seconds": round(seconds, 2),
            "first_byte_ms": round(first_byte * 1000, 1), "rows_per_second": round(rows / seconds),
            "last_row_id": last[0], "rss_before_mb": before["rss_mb"], "rss_peak_mb": sampler.peak_mb,
            "rss_growth_mb": round(sampler.peak_mb - before["rss_mb"], 1)}


def render(r):
    return ["| Contacts | CSV MB | Seconds | Rows/s | First byte ms | RSS before MB | RSS peak MB | Growth MB |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {r['rows']} | {r['mb']} | {r['seconds']} | {r['rows_per_second']} | {r['first_byte_ms']} | "
            f"{r['rss_before_mb']} | {r['rss_peak_mb']} | {r['rss_growth_mb']} |"]


def goals(r):
    from bench.report import goal
    return [goal("contacts export: every contact in the file", r["rows"], r["contacts"], r["rows"] == r["contacts"]),
            goal(f"contacts export RSS growth <= {GOAL_RSS_GROWTH_MB} MB (100k contacts, streamed)", r["rss_growth_mb"],
                 GOAL_RSS_GROWTH_MB, r["rss_growth_mb"] <= GOAL_RSS_GROWTH_MB)]
