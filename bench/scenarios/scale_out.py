"""Scale-out (issue 20): inbound throughput with 4, 2 and 1 server processes on one PostgreSQL database, and a
campaign's delivery rate with 2 and 1 processes against the same receiver.

A throwaway PostgreSQL 15 cluster (tests/pg_cluster.py: Unix socket, fsync off as the tests run it); the
processes share one data directory (one secret key) and one database, as docs/deployment.md runs them. The
load is split as a balancer would: one wrk per process, the connections divided between them, run at once;
throughput is their sum. Each process's CPU per request is reported, so that the scaling on a machine with
more cores can be read off (this one has 2, shared with wrk and PostgreSQL: it cannot scale linearly).
Processes are stopped between steps (4, then 2, then 1): an idle process would still claim deliveries.
"""
import os
import shutil
from concurrent.futures import ThreadPoolExecutor

from bench.scenarios.campaigns import Receiver
from bench.scenarios.postgres import PASSWORD, _connect, _enqueue_seconds, _fill

NAME = "scale_out"
TITLE = "Scale-out: inbound with 1, 2 and 4 processes on one PostgreSQL; campaign delivery with 1 and 2"
INBOUND = "/v1/incoming_custom_channel_message"
STEPS = (4, 2, 1)
CAMPAIGN_STEPS = (2, 1)


def _processes(ctx, url, n):
    from tests.parley_process import ParleyProcess, run_cli
    data = ctx.workdir / "scale-out" / "data"
    data.mkdir(parents=True)
    created = run_cli(data, "create-account", "--name", "Bench", "--email", "scale@bench.example",
                      "--password", PASSWORD, "--database-url", url)
    processes = []
    for _ in range(n):
        parley = ParleyProcess(data, "--rate-limit", "100000000", "--log-level", "warning", "--allow-private-webhooks",
                               "--database-url", url, http=False)
        parley.start()
        parley.first_run = {"account_id": created["account_id"], "api_key": created["api_key"]}
        processes.append(parley)
    return processes


def _inbound(ctx, processes, tag):
    """One wrk per process at once, the connections split; the sum of their throughput, and each one's figures."""
    connections = max(1, ctx.args.connections // len(processes))
    key = processes[0].first_run["api_key"]
    ctx.wait_for_quiet()
    with ThreadPoolExecutor(len(processes)) as pool:
        runs = list(pool.map(lambda p: ctx.load.wrk(
            p.base, p.proc.pid, "inbound", f"{INBOUND}?apiKey={key}", ctx.salts.sid(f"scale-{tag}-{p.port}"), 500,
            connections=connections, quiet_first=False), processes))
    return {"rps": round(sum(r["rps"] for r in runs), 1), "p99_ms_max": max(r["p99_ms"] for r in runs),
            "errors": sum(sum(r["errors"].values()) for r in runs),
            "server_cpu_ms_per_request": [r["server_cpu_ms_per_request"] for r in runs],
            "server_cores": round(sum(r["server_cores"] for r in runs), 2), "connections_each": connections}


def _campaign_seconds(processes, url, receiver, n, tag):
    """A campaign to a list of n contacts, unthrottled; seconds from the POST until every message was sent."""
    list_id = _fill(processes[0], url, 2_000_000 + tag * n, n, f"Everyone {tag}")
    return _enqueue_seconds(processes[0], list_id, receiver, done=lambda c: c["sent"] + c["failed"] >= n,
                            name=f"Scale {tag}")


def run(ctx):
    from tests.pg_cluster import PgCluster, available
    if not available():
        return {"skipped": "PostgreSQL 15 is not installed (postgresql-15)"}
    cluster = PgCluster().start()
    processes = []
    try:
        admin = _connect(None, cluster.url())
        admin.execute("CREATE DATABASE parley_scale")
        admin.close()
        url = cluster.url("parley_scale")
        processes = _processes(ctx, url, max(STEPS))
        result = {"cores": os.cpu_count(), "connections": ctx.args.connections, "inbound": {}, "campaign": {}}
        n = 2_000 if ctx.args.quick else 20_000
        result["campaign"]["recipients"] = n
        receiver = Receiver()
        try:
            for step in STEPS:
                while len(processes) > step:
                    processes.pop().stop()  # SIGTERM: drains, hands its leases over
                ctx.log(f"  inbound with {step} process(es)")
                runs = [_inbound(ctx, processes, f"{step}-{rep}") for rep in range(ctx.args.repeat)]
                result["inbound"][str(step)] = sorted(runs, key=lambda r: r["rps"])[len(runs) // 2]  # the median run
                if step in CAMPAIGN_STEPS:
                    ctx.log(f"  campaign of {n} with {step} process(es)")
                    seconds = _campaign_seconds(processes, url, receiver, n, step)
                    result["campaign"][str(step)] = {"seconds": seconds,
                                                     "per_second": seconds and round(n / seconds, 1)}
        finally:
            receiver.stop()
        return result
    finally:
        for parley in processes:
            parley.stop()
        cluster.stop()
        shutil.rmtree(ctx.workdir / "scale-out", ignore_errors=True)


def render(result):
    if "skipped" in result:
        return [f"Not run: {result['skipped']}."]
    lines = [f"{result['cores']} cores shared by the processes, wrk and PostgreSQL; {result['connections']} "
             "connections split over the processes (one wrk each, at once).", "",
             "| Processes | inbound req/s (sum) | p99 ms (worst) | server cores | CPU ms per request, each process |",
             "|---:|---:|---:|---:|---|"]
    for step, r in sorted(result["inbound"].items(), key=lambda kv: int(kv[0])):
        lines.append(f"| {step} | {r['rps']:.0f} | {r['p99_ms_max']:.1f} | {r['server_cores']:.2f} | "
                     f"{', '.join(f'{x:.2f}' for x in r['server_cpu_ms_per_request'])} |")
    c = result["campaign"]
    lines += ["", f"Campaign of {c['recipients']} recipients, unthrottled, POST until all sent: " + ", ".join(
        f"{step} process(es) {c[step]['seconds']} s ({c[step]['per_second']}/s)" for step in ("1", "2") if step in c)
        + "."]
    return lines


def goals(result):
    from bench.report import goal
    if "skipped" in result:
        return [goal("scale-out: 2 processes serve inbound without errors", None, 0, None)]
    errors = sum(r["errors"] for r in result["inbound"].values())
    return [goal("scale-out: no errors with 1, 2, 4 processes", errors, 0, errors == 0)]
