"""The bench's measuring parts: the bare-Tornado ceiling and Parley's server as processes, their CPU and memory
from /proc, wrk's load against them (medians over alternating runs), and the Context a scenario gets."""
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
import time
from pathlib import Path

import tornado

from tests.parley_process import ParleyProcess, child_pids, free_port

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
INBOUND = "/v1/incoming_custom_channel_message"
CONTACTS = "/v1/contacts"
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


def machine():
    model = next((row.split(":", 1)[1].strip() for row in Path("/proc/cpuinfo").read_text().splitlines()
                  if row.startswith("model name")), platform.processor())
    mem_kb = int(next(row for row in Path("/proc/meminfo").read_text().splitlines() if row.startswith("MemTotal")).split()[1])
    wrk_version = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("[")[0].strip()
    return {"cpus": os.cpu_count(), "cpu_model": model, "memory_gb": round(mem_kb / 1024 / 1024, 1),
            "kernel": platform.release(), "python": platform.python_version(), "tornado": tornado.version,
            "sqlite": sqlite3.sqlite_version, "load_client": wrk_version}


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
        line = next((row for row in out.stdout.splitlines() if row.startswith("WRKJSON ")), None)
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
    for server, n in targets.values():
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
