#!/usr/bin/env python3
"""`make bench`: Parley against a bare-Tornado ceiling over HTTPS on loopback (wrk, keep-alive,
32 connections), lookup growth from 1 thousand to 1 million contacts, and peak RSS with 1 million
stored messages. Writes bench/results/latest.json and the table in bench/README.md.

    python bench/run.py [--duration 10] [--repeat 3] [--no-profile] [--quick]
"""
import argparse
import json
import os
import platform
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import tornado

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
from bench import scenarios  # noqa: E402
from bench.preload import preload  # noqa: E402
from tests.parley_process import ParleyProcess, child_pids, free_port  # noqa: E402

INBOUND = "/v1/incoming_custom_channel_message"
CONTACTS = "/v1/contacts"
ACCOUNT = "/v1/account"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def log(*args):
    print(time.strftime("%H:%M:%S"), *args, file=sys.stderr, flush=True)


# ---- processes --------------------------------------------------------------------------------

class Ceiling:
    def __init__(self, data_dir):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, str(BENCH / "ceiling.py"), "--data-dir", str(data_dir),
                                      "--port", str(self.port)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if '"listening"' not in line:
            raise RuntimeError(f"ceiling server did not start: {line!r}")
        self.base = f"https://127.0.0.1:{self.port}"

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)


def start_parley(data_dir, first_run=None, *extra_args):
    """The real server.py over HTTPS; first_run carries the key when the data dir is a copy."""
    parley = ParleyProcess(data_dir, "--rate-limit", "100000000", "--log-level", "warning", *extra_args,
                           http=False).start()
    parley.first_run = parley.first_run or first_run
    return parley


def process_tree(pid):
    """pid and every process below it: Parley's server and its writer process (storage/writer.py)."""
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo.extend(child_pids(tree[-1]))
    return tree


def proc_status(pid):
    """Peak and current RSS of the server: each process of its tree, and their sum (the peak of the sum
    is at most the sum of the peaks, so the goal is checked against the larger figure)."""
    processes = []
    for member in process_tree(pid):
        fields = {}
        for line in Path(f"/proc/{member}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            fields[name] = value.strip()
        processes.append({"pid": member, "name": "server" if member == pid else "writer",
                          "peak_rss_mb": round(int(fields["VmHWM"].split()[0]) / 1024, 1),
                          "rss_mb": round(int(fields["VmRSS"].split()[0]) / 1024, 1)})
    return {"peak_rss_mb": round(sum(p["peak_rss_mb"] for p in processes), 1),
            "rss_mb": round(sum(p["rss_mb"] for p in processes), 1), "processes": processes}


def busy_cpu_seconds():
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / CLOCK_TICKS  # minus idle and iowait


def cpu_seconds(pid, tree=None):
    """CPU seconds (utime + stime, all threads) of pid, or of every process in tree."""
    total = 0
    for member in tree or [pid]:
        try:
            parts = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(parts[11]) + int(parts[12])
    return total / CLOCK_TICKS


# ---- load -------------------------------------------------------------------------------------

def wait_for_quiet(threshold=0.25, patience=30):
    """Wait (up to `patience` s) until the machine is idle: other jobs on 2 cores skew a measurement."""
    deadline = time.monotonic() + patience
    while True:
        before = busy_cpu_seconds()
        time.sleep(1)
        cores = busy_cpu_seconds() - before
        if cores <= threshold:
            return
        if time.monotonic() > deadline:
            log(f"  the machine is still busy ({cores:.2f} cores used by others); measuring anyway")
            return
        log(f"  waiting for other jobs on the machine ({cores:.2f} cores busy)")
        time.sleep(2)


class Load:
    def __init__(self, args):
        self.connections, self.threads, self.duration = args.connections, args.threads, args.duration
        self.runs = 0
        self.other_cores = []

    def wrk(self, base, pid, mode, path, salt, n, *, connections=None, duration=None, quiet_first=True):
        connections = connections or self.connections
        duration = duration or self.duration
        if quiet_first:
            wait_for_quiet()
        threads = min(self.threads, connections)
        tree = process_tree(pid)  # Parley: the server and its writer process; the ceiling: one process
        before, main_before, busy_before = cpu_seconds(pid, tree), cpu_seconds(pid), busy_cpu_seconds()
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--timeout", "10s",
                              "-s", str(BENCH / "load.lua"), base, "--", mode, path, str(salt), str(n)],
                             capture_output=True, text=True, timeout=duration + 60)
        cpu, main_cpu = cpu_seconds(pid, tree) - before, cpu_seconds(pid) - main_before
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        wrk_cpu = (children.ru_utime + children.ru_stime) - (children_before.ru_utime + children_before.ru_stime)
        # Whatever else ran on the machine meanwhile (other jobs skew a 2-core measurement).
        other = busy_cpu_seconds() - busy_before - cpu - wrk_cpu
        line = next((l for l in out.stdout.splitlines() if l.startswith("WRKJSON ")), None)
        if line is None:
            raise RuntimeError(f"wrk failed: {out.stdout}\n{out.stderr}")
        result = json.loads(line[len("WRKJSON "):])
        result["connections"] = connections
        result["server_cpu_ms_per_request"] = round(1000 * cpu / max(1, result["requests"]), 3)
        result["server_cores"] = round(cpu / result["seconds"], 2)
        result["main_process_cores"] = round(main_cpu / result["seconds"], 2)  # the event loop's process
        result["wrk_cores"] = round(wrk_cpu / result["seconds"], 2)
        result["other_cores"] = round(max(0.0, other) / result["seconds"], 2)
        self.runs += 1
        self.other_cores.append(result["other_cores"])
        bad = sum(result["errors"].values())
        log(f"  {mode:8s} c={connections:<3d} {result['rps']:8.1f} req/s  p50 {result['p50_ms']:7.2f} ms  "
            f"p99 {result['p99_ms']:7.2f} ms  errors {bad}  cores: server {result['server_cores']:.2f} "
            f"(main {result['main_process_cores']:.2f}) "
            f"wrk {result['wrk_cores']:.2f} other {result['other_cores']:.2f}")
        return result


def median_of(runs):
    """Each figure's median over repeated runs; errors summed."""
    keys = ("rps", "p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms", "server_cpu_ms_per_request",
            "server_cores", "main_process_cores", "wrk_cores")
    out = {k: round(statistics.median(r[k] for r in runs), 3) for k in keys}
    out["other_cores_max"] = max(r["other_cores"] for r in runs)
    out["requests"] = sum(r["requests"] for r in runs)
    out["non_2xx_or_socket_errors"] = sum(sum(r["errors"].values()) for r in runs)
    out["runs"] = len(runs)
    return out


def available(parley, method, path, body=None):
    """False when the server has no route for path (404 'no such path'): the endpoint has not landed."""
    with parley.client() as client:
        response = client.request(method, path, params={"apiKey": parley.first_run["api_key"]}, json=body)
    return not (response.status_code == 404 and "no such path" in response.text)


def count_rows(db_path, sql, *params):
    cx = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return cx.execute(sql, params).fetchone()[0]
    finally:
        cx.close()


def compare(load, ceiling, parley, mode, path, n, repeat, *, salt_for):
    """Alternate ceiling and Parley runs `repeat` times; medians and the ratio of req/s."""
    key = parley.first_run["api_key"]
    full = f"{path}?apiKey={key}"
    runs = {"ceiling": [], "parley": []}
    for target in ("ceiling", "parley"):  # warm both up: connections, caches, code paths
        server = ceiling if target == "ceiling" else parley
        load.wrk(server.base, server_pid(server), mode, full, salt_for(f"warm-{target}"), n, duration=2)
    for rep in range(repeat):
        for target in ("ceiling", "parley"):
            server = ceiling if target == "ceiling" else parley
            runs[target].append(load.wrk(server.base, server_pid(server), mode, full, salt_for(f"{target}{rep}"), n))
    result = {name: median_of(r) for name, r in runs.items()}
    result["ratio"] = round(result["parley"]["rps"] / result["ceiling"]["rps"], 3)
    return result


def lookup_growth(load, targets, key, repeat):
    """The same lookup against the small and the big database, alternating runs at the goal's 32
    connections and at 1 (latency without queueing); medians, and p50 big / p50 small."""
    path = f"{CONTACTS}?apiKey={key}"
    growth = {name: {"contacts": n} for name, (_, n) in targets.items()}
    for name, (server, n) in targets.items():
        load.wrk(server.base, server.proc.pid, "lookup", path, "-", n, duration=2)  # warm up
    for connections, label in ((load.connections, "c32"), (1, "c1")):
        runs = {name: [] for name in targets}
        for _ in range(repeat):
            for name, (server, n) in targets.items():
                runs[name].append(load.wrk(server.base, server.proc.pid, "lookup", path, "-", n,
                                           connections=connections))
        for name in targets:
            growth[name][label] = median_of(runs[name])
        growth[f"p50_ratio_{label}"] = round(growth["big"][label]["p50_ms"] / growth["small"][label]["p50_ms"], 3)
    return growth


def server_pid(server):
    return server.proc.pid


class Salts:
    """Unique messageSid prefixes and non-overlapping phone ranges for every run against one database."""

    def __init__(self):
        self.run = 0
        self.stamp = int(time.time())

    def sid(self, label):
        self.run += 1
        return f"b{self.stamp}-{label}-{self.run}"

    def phone_offset(self, label):
        self.run += 1
        if self.run >= 39:
            raise RuntimeError("out of bench phone ranges; lower --repeat")
        return self.run * 200_000


class Context:
    """What a scenario (bench/scenarios/) gets.

    args: the parsed command line (duration, repeat, connections, quick ...); load: the wrk wrapper
    (load.wrk(base, pid, mode, path, salt, n, connections=, duration=)); salts: unique sids and phones;
    first_run: the owner account {account_id, api_key, ...} of every copy; workdir: scratch space.
    fresh_data_dir(name) copies the base data dir (owner account, certificate, nothing else) for a server
    of the scenario's own; start_parley(data_dir, *extra_args) starts the real server on it (stop it).
    """

    def __init__(self, args, load, salts, first_run, base, workdir):
        self.args, self.load, self.salts, self.first_run = args, load, salts, first_run
        self.base, self.workdir = base, workdir
        self.log, self.proc_status, self.count_rows, self.median_of = log, proc_status, count_rows, median_of
        self.process_tree, self.cpu_seconds, self.wait_for_quiet = process_tree, cpu_seconds, wait_for_quiet

    def fresh_data_dir(self, name):
        target = self.workdir / name / "data"
        shutil.copytree(self.base, target)
        return target

    def start_parley(self, data_dir, *extra_args):
        return start_parley(data_dir, self.first_run, *extra_args)


# ---- profile ----------------------------------------------------------------------------------

def profile_inbound(load, parley, seconds, workdir):
    """Sample the server with py-spy while wrk drives the inbound endpoint; top functions by own time."""
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if not py_spy:
        log("py-spy not installed; skipping the profile")
        return None
    raw = workdir / "inbound.folded"
    wait_for_quiet()  # before py-spy starts, so that its window is the load's
    spy = subprocess.Popen([py_spy, "record", "--pid", str(parley.proc.pid), "--subprocesses", "--rate", "250",
                            "--nonblocking",
                            "--format", "raw", "--output", str(raw), "--duration", str(seconds)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    load.wrk(parley.base, parley.proc.pid, "inbound", f"{INBOUND}?apiKey={parley.first_run['api_key']}",
             f"profile{int(time.time())}", 500, duration=seconds - 2, quiet_first=False)
    spy.wait(seconds + 30)
    if not raw.exists():
        log("py-spy wrote nothing:", spy.stderr.read()[-500:])
        return None
    return summarize_profile(raw)


def summarize_profile(raw):
    """Own and inclusive time per function from py-spy's folded stacks, split between the server's
    event-loop thread, its SQLite reader thread (aiosqlite) and the writer process."""
    own, inclusive, total = {}, {}, 0
    per_thread = {"event_loop": 0, "reader_thread": 0, "writer_process": 0}
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue  # the rest of a frame whose text held a line break (py-spy writes it as it is)
        count = int(count)
        frames = stack.split(";")
        in_writer = any(f.startswith("process ") and "storage.writer" in f for f in frames)
        frames = [_frame_name(f) for f in frames if not f.startswith("process ")]
        if not frames or in_writer and frames[-1] == "SocketIO.readinto (socket.py)":
            continue  # the writer waiting for its next batch is idle, not busy
        total += count
        per_thread["writer_process" if in_writer else "reader_thread"
                   if "_connection_worker_thread (aiosqlite/core.py)" in frames else "event_loop"] += count
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count

    def top(table, n):
        return [{"function": f, "percent": round(100 * c / total, 1)}
                for f, c in sorted(table.items(), key=lambda kv: -kv[1])[:n]]
    return {"samples": total, "threads_percent": {k: round(100 * v / max(1, total), 1) for k, v in per_thread.items()},
            "top_own": top(own, 15), "top_inclusive": [t for t in top(inclusive, 60) if t["percent"] < 99][:25]}


def _frame_name(frame):
    """'fn (/abs/path/file.py:12)' -> 'fn (file path relative to the repo or site-packages)'."""
    if " (" not in frame:
        return frame
    name, where = frame.split(" (", 1)
    path = where.split(":")[0].rstrip(")")
    for prefix in (str(ROOT) + "/", sys.prefix + "/"):
        path = path.replace(prefix, "")
    if "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    elif "/lib/python" in path:
        path = path.split("/lib/python", 1)[1].split("/", 1)[-1]
    return f"{name} ({path})"


# ---- the run ----------------------------------------------------------------------------------

def machine():
    model = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                  if l.startswith("model name")), platform.processor())
    mem_kb = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1])
    wrk_version = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("[")[0].strip()
    return {"cpus": os.cpu_count(), "cpu_model": model, "memory_gb": round(mem_kb / 1024 / 1024, 1),
            "kernel": platform.release(), "python": platform.python_version(), "tornado": tornado.version,
            "sqlite": sqlite3.sqlite_version, "load_client": wrk_version}


def goal(name, value, target, met):
    return {"goal": name, "value": value, "target": target, "met": bool(met) if value is not None else None}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per measured wrk run")
    parser.add_argument("--repeat", type=int, default=3, help="alternating ceiling/Parley runs; medians reported")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--big", type=int, default=1_000_000, help="contacts and messages preloaded for growth/RSS")
    parser.add_argument("--small", type=int, default=1_000, help="contacts preloaded for the baseline lookup")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 s runs, 1 repeat, 20k big preload")
    parser.add_argument("--compare", metavar="REV", default="1549b07",
                        help="the commit the 'compare' scenario runs beside the working tree (inbound A/B)")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "latest.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--only", help="comma-separated: 'core' (the phases below) and/or scenario names "
                                       f"({', '.join(m.NAME for m in scenarios.load())}); default all")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    if args.quick:
        args.duration, args.repeat, args.big = 3, 1, 20_000
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk; `make bench` does it)")

    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="parley-bench-"))
    load, salts = Load(args), Salts()
    results = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": machine(),
               "config": {"connections": args.connections, "wrk_threads": args.threads, "duration_s": args.duration,
                          "repeat": args.repeat, "tls": "TLS 1.3 on loopback, keep-alive, Parley's self-signed cert",
                          "small_contacts": args.small, "big_contacts": args.big, "big_messages": args.big,
                          "quick": args.quick}}
    servers = []
    try:
        # A fresh instance: first start creates the owner account and prints its key; stop it, then
        # give each phase its own copy of the data directory with its preload.
        base = workdir / "base" / "data"
        base.parent.mkdir()
        first = start_parley(base)
        first_run = first.first_run
        first.stop()
        account_id = first_run["account_id"]

        if only is None or "core" in only:
            run_core(args, load, salts, results, servers, workdir, base, first_run)
        selected = scenarios.load(only)
        results["scenarios"] = {}
        for scenario in selected:
            log(f"scenario {scenario.NAME}")
            context = Context(args, load, salts, first_run, base, workdir)
            results["scenarios"][scenario.NAME] = scenario.run(context)
    finally:
        for server in servers:
            try:
                server.stop()
            except Exception:
                pass
        if args.keep:
            log("work directory kept:", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    results["goals"] = core_goals(results) if "big_server" in results else []
    for scenario in selected:
        results["goals"] += scenario.goals(results["scenarios"][scenario.NAME])
    results["wall_seconds"] = round(time.monotonic() - started, 1)
    results["other_load_cores"] = {"max": max(load.other_cores, default=0.0),
                                   "mean": round(statistics.mean(load.other_cores), 2) if load.other_cores else 0.0}
    out = args.out
    if only is not None and out == BENCH / "results" / "latest.json":
        # A partial run keeps the full run's file: its figures go beside it, per selection.
        out = out.with_name(f"partial-{'-'.join(sorted(only))}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    if only is None:
        write_readme_table(args.readme, results)
    log(f"done in {results['wall_seconds']} s: {out}")
    print(render_table(results))
    return 0


def run_core(args, load, salts, results, servers, workdir, base, first_run):
    """The core phases: Parley against the ceiling, lookup growth, memory with 1M messages."""
    account_id = first_run["account_id"]
    small = workdir / "small" / "data"
    shutil.copytree(base, small)
    preload(small / "parley.db", account_id, contacts=args.small)

    # ---- phase 1: Parley against the ceiling, 1 thousand contacts -----------------------
    log(f"phase 1: {args.small} contacts preloaded; ceiling vs Parley, {args.connections} connections")
    parley = start_parley(small, first_run)
    servers.append(parley)
    ceiling = Ceiling(small)
    servers.append(ceiling)
    have_lookup = available(parley, "GET", CONTACTS + "?phoneNumber=%2B12122000000")
    have_create = available(parley, "POST", CONTACTS, {})
    have_inbound = available(parley, "POST", INBOUND, {})
    results["endpoints_missing"] = [p for p, ok in ((f"GET {CONTACTS}", have_lookup), (f"POST {CONTACTS}", have_create),
                                                    (f"POST {INBOUND}", have_inbound)) if not ok]

    log("account read (GET /v1/account): the framework's floor for an authenticated read")
    account_runs = [load.wrk(parley.base, parley.proc.pid, "lookup", f"{ACCOUNT}?apiKey={first_run['api_key']}",
                             "-", args.small) for _ in range(args.repeat)]
    results["account_read"] = median_of(account_runs)

    if have_lookup:
        log("contact lookup, 1 thousand contacts (before anything else grows the table)")
        results["contacts_lookup"] = compare(load, ceiling, parley, "lookup", CONTACTS, args.small, args.repeat,
                                             salt_for=lambda label: "-")
    if have_inbound:
        log("inbound custom-channel messages, unique messageSids over 500 contacts")
        results["inbound"] = compare(load, ceiling, parley, "inbound", INBOUND, 500, args.repeat,
                                     salt_for=salts.sid)
        stored = count_rows(small / "parley.db", "SELECT COUNT(*) FROM messages WHERE external_id LIKE ?",
                            f"b{salts.stamp}-parley%")
        results["inbound"]["parley"]["messages_stored"] = stored
    if have_create:
        log("contact creation, a new phone per request")
        results["contacts_create"] = compare(load, ceiling, parley, "create", CONTACTS, 0, args.repeat,
                                             salt_for=salts.phone_offset)
    if have_inbound and not args.no_profile:
        log("profiling the inbound endpoint with py-spy")
        results["inbound_profile"] = profile_inbound(load, parley, max(8, args.duration), workdir)
    results["phase1_server"] = proc_status(parley.proc.pid)
    ceiling.stop()
    parley.stop()
    servers.clear()
    shutil.rmtree(small.parent)

    # ---- phase 2: 1 million contacts and 1 million messages ----------------------------
    big = workdir / "big" / "data"
    shutil.copytree(base, big)
    log(f"preloading {args.big} contacts and {args.big} messages")
    _, _, seconds = preload(big / "parley.db", account_id, contacts=args.big, messages=args.big)
    results["preload"] = {"contacts": args.big, "messages": args.big, "seconds": round(seconds, 1),
                          "db_mb": round((big / "parley.db").stat().st_size / 2**20, 1)}
    # Lookup growth compares the big database with a fresh small one served beside it, their runs
    # alternating: measured minutes apart (phase 1, then here), the drift of this shared VM (±15 %
    # between 10 s windows) showed up as growth that is not there.
    small = workdir / "small-lookup" / "data"
    shutil.copytree(base, small)
    preload(small / "parley.db", account_id, contacts=args.small)
    log(f"  preloaded in {seconds:.1f} s; phase 2: lookups and inbound load on the big database")
    parley = start_parley(big, first_run)
    servers.append(parley)
    started_rss = proc_status(parley.proc.pid)
    key = first_run["api_key"]
    if have_lookup:
        small_parley = start_parley(small, first_run)
        servers.append(small_parley)
        results["lookup_growth"] = lookup_growth(load, {"small": (small_parley, args.small), "big": (parley, args.big)},
                                                 key, args.repeat)
        small_parley.stop()
        servers.remove(small_parley)
    if have_inbound:
        results["inbound_on_big"] = median_of([load.wrk(parley.base, parley.proc.pid, "inbound",
                                                        f"{INBOUND}?apiKey={key}", salts.sid("big"), 500)])
    results["big_server"] = {"after_start": started_rss, "after_load": proc_status(parley.proc.pid),
                             "messages_stored": count_rows(big / "parley.db", "SELECT COUNT(*) FROM messages"),
                             "contacts_stored": count_rows(big / "parley.db", "SELECT COUNT(*) FROM contacts")}
    parley.stop()
    servers.clear()


def core_goals(results):
    inbound, growth = results.get("inbound"), results.get("lookup_growth")
    return [
        goal("inbound req/s >= 0.6 x ceiling", inbound and inbound["ratio"], 0.6, inbound and inbound["ratio"] >= 0.6),
        goal("inbound p99 <= 30 ms at 32 connections", inbound and inbound["parley"]["p99_ms"], 30,
             inbound and inbound["parley"]["p99_ms"] <= 30),
        goal("lookup p50 at 1M <= 1.2 x at 1k (32 connections)", growth and growth["p50_ratio_c32"], 1.2,
             growth and growth["p50_ratio_c32"] <= 1.2),
        goal("peak RSS <= 150 MB with 1M messages stored", results["big_server"]["after_load"]["peak_rss_mb"], 150,
             results["big_server"]["after_load"]["peak_rss_mb"] <= 150),
    ]


# ---- report -----------------------------------------------------------------------------------

def render_table(r):
    m = r["machine"]
    lines = [f"Run {r['date']} on {m['cpus']} × {m['cpu_model']}, {m['memory_gb']} GB, Linux {m['kernel']}, "
             f"Python {m['python']}, Tornado {m['tornado']}, SQLite {m['sqlite']}, {m['load_client']}; "
             f"{r['config']['connections']} connections, {r['config']['duration_s']} s × {r['config']['repeat']} "
             f"runs (medians){' — QUICK SMOKE RUN, not a measurement' if r['config']['quick'] else ''}. "
             f"Other processes used {r['other_load_cores']['mean']} cores on average (max "
             f"{r['other_load_cores']['max']}) during the runs"
             f"{': the machine was shared, figures are pessimistic' if r['other_load_cores']['max'] > 0.2 else ''}."]
    if "big_server" in r:
        lines += [""] + render_core(r)
    for scenario in scenarios.load(set(r.get("scenarios", {}))):
        lines += ["", f"### {scenario.TITLE}", ""] + scenario.render(r["scenarios"][scenario.NAME])
    lines += ["", "| Goal | Value | Target | Met |", "|---|---:|---:|---|"]
    for g in r["goals"]:
        met = "n/a (endpoint missing)" if g["met"] is None else ("yes" if g["met"] else "**no**")
        value = "–" if g["value"] is None else g["value"]
        lines.append(f"| {g['goal']} | {value} | {g['target']} | {met} |")
    prof = r.get("inbound_profile")
    if prof:
        threads = prof.get("threads_percent", {})
        lines += ["", f"Inbound profile (py-spy, {prof['samples']} samples of the server's busy threads: "
                      f"{threads.get('event_loop')} % event loop, {threads.get('writer_process')} % writer process, "
                      f"{threads.get('reader_thread')} % reader thread), own time:", "",
                  "| Function | % |", "|---|---:|"]
        lines += [f"| `{t['function']}` | {t['percent']} |" for t in prof["top_own"][:12]]
    return "\n".join(lines)


def render_core(r):
    lines = ["| Scenario | Ceiling req/s | Parley req/s | Ratio | Parley p50 ms | Parley p99 ms | Ceiling p99 ms | "
             "Parley CPU ms/req | Parley cores (main) | Ceiling cores | Errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, label in (("inbound", "POST /v1/incoming_custom_channel_message"), ("contacts_create", "POST /v1/contacts"),
                       ("contacts_lookup", "GET /v1/contacts?phoneNumber= (1k contacts)")):
        x = r.get(key)
        if not x:
            lines.append(f"| {label} | – | not built yet | | | | | | | | |")
            continue
        c, p = x["ceiling"], x["parley"]
        lines.append(f"| {label} | {c['rps']:.0f} | {p['rps']:.0f} | {x['ratio']:.2f} | {p['p50_ms']:.1f} | "
                     f"{p['p99_ms']:.1f} | {c['p99_ms']:.1f} | {p['server_cpu_ms_per_request']:.2f} | "
                     f"{_cores(p)} | {c['server_cores']:.2f} | {p['non_2xx_or_socket_errors']} |")
    a = r["account_read"]
    lines.append(f"| GET /v1/account (reference) | | {a['rps']:.0f} | | {a['p50_ms']:.1f} | {a['p99_ms']:.1f} | | "
                 f"{a['server_cpu_ms_per_request']:.2f} | {_cores(a)} | | {a['non_2xx_or_socket_errors']} |")
    g = r.get("lookup_growth")
    lines += ["", "| Lookup growth | 1k contacts p50 ms | 1M contacts p50 ms | Growth | 1k p99 ms | 1M p99 ms |",
              "|---|---:|---:|---:|---:|---:|"]
    if g:
        for c, label in (("c32", "32 connections"), ("c1", "1 connection")):
            lines.append(f"| {label} | {g['small'][c]['p50_ms']:.2f} | {g['big'][c]['p50_ms']:.2f} | "
                         f"{g['big'][c]['p50_ms'] / g['small'][c]['p50_ms']:.2f} | {g['small'][c]['p99_ms']:.2f} | "
                         f"{g['big'][c]['p99_ms']:.2f} |")
    else:
        lines.append("| GET /v1/contacts not built yet | | | | | |")
    b = r["big_server"]
    peaks = " + ".join(f"{p['peak_rss_mb']} MB {p['name']}" for p in b["after_load"].get("processes", []))
    lines += ["", f"Memory with {b['messages_stored']:,} messages and {b['contacts_stored']:,} contacts stored "
                  f"(preloaded in {r['preload']['seconds']} s, database {r['preload']['db_mb']} MB): server RSS "
                  f"{b['after_start']['rss_mb']} MB after start, peak RSS (VmHWM) {b['after_load']['peak_rss_mb']} MB "
                  f"({peaks}) "
                  f"after the lookup and inbound load above."]
    return lines


def _cores(run):
    """Cores the server used: all its processes, and (in brackets) the event loop's process alone."""
    main = run.get("main_process_cores")
    return f"{run['server_cores']:.2f}" + (f" ({main:.2f})" if main is not None else "")


START, END = "<!-- bench:results:start -->", "<!-- bench:results:end -->"


def write_readme_table(readme, results):
    text = readme.read_text() if readme.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text:
        text += f"\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    readme.write_text(f"{head}{START}\n{render_table(results)}\n{END}{tail}")


if __name__ == "__main__":
    sys.exit(main())
