"""Bulk contact import (issue 14): 100,000 CSV rows uploaded and imported through the UI's endpoints into a
list, timed from Start to completed, with the server's RSS (its process tree: the server, its writer and
the import's reader process) sampled throughout; then a second file while wrk looks contacts up, for the
lookup p99 during an import beside the idle figure; then the import-contacts command on a third file
beside the idle server."""
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.preload import preload

NAME = "import"
TITLE = "Bulk contact import (issue 14)"
ROWS = 100_000
LOOKUP_CONTACTS = 1_000  # preloaded; the lookup load asks for them
ROOT = Path(__file__).resolve().parents[2]


def write_csv(path, rows, area):
    """rows data rows with phones in area code `area`: every 100th phone invalid (no country code), every
    50th a second spelling of the phone of the row 10 before (matched)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("\ufeffFirst name;Last name;Mobile;E-mail\n")
        for i in range(rows):
            if i % 100 == 1:
                phone = f"{area} 555 0199"
            elif i % 50 == 0 and i >= 10:
                j = i - 10
                phone = f"+1 ({area}) {200 + j // 10000:03d}-{j % 10000:04d}"
            else:
                phone = f"+1{area}{200 + i // 10000:03d}{i % 10000:04d}"
            f.write(f"Bench;Import {i};{phone};import{area}-{i}@example.com\n")


class RssSampler(threading.Thread):
    """The largest summed current RSS of the server's process tree, sampled every 100 ms."""

    def __init__(self, ctx, pid):
        super().__init__(daemon=True)
        self.ctx, self.pid, self.peak_mb, self.stop = ctx, pid, 0.0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak_mb = max(self.peak_mb, self.ctx.proc_status(self.pid)["rss_mb"])
            except (OSError, ValueError, KeyError):
                pass  # a reader process ended between the scan and the read
            time.sleep(0.1)


def ui_client(parley, first_run):
    client = parley.client()
    client.get("/login")
    r = client.post("/login", data={"email": first_run["login"], "password": first_run["password"],
                                    "_xsrf": client.cookies["_xsrf"]})
    assert r.status_code == 303, f"sign-in failed: {r.status_code}"
    return client


def import_file(client, path, list_name):
    """Upload, start (into a new list), wait for the end; returns the figures."""
    started = time.monotonic()
    with open(path, "rb") as f:
        r = client.post("/contacts/import/upload", params={"name": path.name}, content=f,
                        headers={"X-XSRFToken": client.cookies["_xsrf"], "Content-Type": "text/csv"})
    r.raise_for_status()
    import_id = r.json()["id"]
    uploaded = time.monotonic()
    r = client.post(f"/contacts/import/{import_id}/start", data={
        "firstName": "0", "lastName": "1", "phone": "2", "email": "3", "defaultCountry": "", "list": "new",
        "newListName": list_name, "_xsrf": client.cookies["_xsrf"]}, follow_redirects=False)
    assert r.status_code == 303, r.text
    t0 = time.monotonic()
    while True:
        progress = client.get(f"/contacts/import/{import_id}/progress").json()
        if progress["status"] not in ("queued", "running"):
            break
        time.sleep(0.1)
    seconds = time.monotonic() - t0
    return {"status": progress["status"], "rows": progress["rowsRead"], "created": progress["created"],
            "matched": progress["matched"], "failed": progress["failed"],
            "upload_seconds": round(uploaded - started, 2), "import_seconds": round(seconds, 2),
            "rows_per_second": round(progress["rowsRead"] / seconds), "job_rows_per_second": progress["rowsPerSecond"],
            "file_mb": round(path.stat().st_size / 2**20, 1)}


def run(ctx):
    rows = 10_000 if ctx.args.quick else ROWS
    duration = max(3, min(ctx.args.duration, 8))
    data = ctx.fresh_data_dir("import")
    preload(data / "parley.db", ctx.first_run["account_id"], contacts=LOOKUP_CONTACTS)
    files = {name: ctx.workdir / "import" / f"{name}.csv" for name in ("alone", "under_load", "cli")}
    for area, path in zip((646, 347, 917), files.values()):
        write_csv(path, rows, area)
    key = ctx.first_run["api_key"]
    lookup = f"/v1/contacts?apiKey={key}"
    result = {"rows": rows}
    parley = ctx.start_parley(data)
    try:
        pid = parley.proc.pid
        ctx.load.wrk(parley.base, pid, "lookup", lookup, "-", LOOKUP_CONTACTS, duration=2)  # warm up
        result["lookup_idle"] = ctx.load.wrk(parley.base, pid, "lookup", lookup, "-", LOOKUP_CONTACTS,
                                             duration=duration)
        client = ui_client(parley, ctx.first_run)
        ctx.wait_for_quiet()
        before = ctx.proc_status(pid)
        sampler = RssSampler(ctx, pid)
        sampler.start()
        ctx.log(f"  importing {rows} rows through the UI endpoints")
        cpu_before = ctx.cpu_seconds(pid, ctx.process_tree(pid))
        result["alone"] = import_file(client, files["alone"], "Bench alone")
        sampler.stop.set()
        sampler.join()
        result["alone"]["rss_before_mb"] = before["rss_mb"]
        result["alone"]["rss_peak_mb"] = sampler.peak_mb
        result["alone"]["rss_growth_mb"] = round(sampler.peak_mb - before["rss_mb"], 1)
        ctx.log(f"  {result['alone']['rows_per_second']} rows/s, RSS {before['rss_mb']} -> {sampler.peak_mb} MB")

        ctx.log("  importing another file while wrk looks contacts up")
        during = {}
        imported = threading.Thread(target=lambda: during.update(import_file(client, files["under_load"],
                                                                            "Bench under load")))
        imported.start()
        time.sleep(1)
        result["lookup_during"] = ctx.load.wrk(parley.base, pid, "lookup", lookup, "-", LOOKUP_CONTACTS,
                                               duration=duration, quiet_first=False)
        imported.join()
        result["under_load"] = during
        # Did the import outlast the wrk run? Otherwise part of the "during" figure was measured idle.
        result["lookup_during"]["import_outlasted_wrk"] = during["import_seconds"] > duration + 1
        result["server_after"] = ctx.proc_status(pid)
        client.close()

        if not ctx.args.quick:
            ctx.log("  the import-contacts command beside the idle server")
            started = time.monotonic()
            out = subprocess.run([sys.executable, str(ROOT / "server.py"), "import-contacts", "--email",
                                  ctx.first_run["login"], str(files["cli"]), "--data-dir", str(data),
                                  "--log-level", "warning"], capture_output=True, text=True, cwd=ROOT, timeout=1800)
            seconds = time.monotonic() - started
            summary = json.loads(out.stdout.strip().splitlines()[-1])
            result["cli"] = {**summary, "seconds": round(seconds, 1), "rows_per_second": round(summary["rows"] / seconds)}
        result["cpu_seconds_first_import"] = round(ctx.cpu_seconds(pid, ctx.process_tree(pid)) - cpu_before, 1)
    finally:
        parley.stop()
    return result


def render(r):
    a, u, idle, during = r["alone"], r["under_load"], r["lookup_idle"], r["lookup_during"]
    lines = ["| Import | Rows | Seconds | Rows/s | Created | Matched | Failed |", "|---|---:|---:|---:|---:|---:|---:|",
             f"| UI endpoints, alone ({a['file_mb']} MB, upload {a['upload_seconds']} s) | {a['rows']} | "
             f"{a['import_seconds']} | {a['rows_per_second']} | {a['created']} | {a['matched']} | {a['failed']} |",
             f"| UI endpoints, during the lookup load | {u['rows']} | {u['import_seconds']} | {u['rows_per_second']} | "
             f"{u['created']} | {u['matched']} | {u['failed']} |"]
    if "cli" in r:
        c = r["cli"]
        lines.append(f"| import-contacts command | {c['rows']} | {c['seconds']} | {c['rows_per_second']} | "
                     f"{c['created']} | {c['matched']} | {c['failed']} |")
    lines += ["", f"Server RSS (server + writer + the import's reader process, current RSS sampled every 100 ms): "
                  f"{a['rss_before_mb']} MB before, {a['rss_peak_mb']} MB at most during the import "
                  f"(growth {a['rss_growth_mb']} MB).", "",
              "| GET /v1/contacts?phoneNumber= (32 connections) | req/s | p50 ms | p99 ms |", "|---|---:|---:|---:|",
              f"| idle | {idle['rps']:.0f} | {idle['p50_ms']:.1f} | {idle['p99_ms']:.1f} |",
              f"| during an import | {during['rps']:.0f} | {during['p50_ms']:.1f} | {during['p99_ms']:.1f} |"]
    if not during.get("import_outlasted_wrk"):
        lines.append("\n(The import ended before the wrk run did: part of the 'during' figure is idle.)")
    return lines


def goals(r):
    from bench.report import goal
    a, during = r["alone"], r["lookup_during"]
    return [
        goal("import rows/s >= 5000 (100k rows, UI endpoints)", a["rows_per_second"], 5000, a["rows_per_second"] >= 5000),
        goal("import RSS growth < 50 MB", a["rss_growth_mb"], 50, a["rss_growth_mb"] < 50),
        goal("lookup p99 during an import <= 30 ms (32 connections)", during["p99_ms"], 30, during["p99_ms"] <= 30),
    ]
