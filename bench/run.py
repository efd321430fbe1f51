#!/usr/bin/env python3
"""`make bench`: Parley against a bare-Tornado ceiling over HTTPS on loopback (wrk, keep-alive,
32 connections), lookup growth from 1 thousand to 1 million contacts, and peak RSS with 1 million
stored messages. Writes bench/results/latest.json and the table in bench/README.md.

    python bench/run.py [--duration 10] [--repeat 3] [--no-profile] [--quick]
"""
import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import scenarios
from bench.inbound_profile import profile_inbound
from bench.measure import (BENCH, CONTACTS, INBOUND, Ceiling, Context, Load, Salts, available,
                           compare, count_rows, log, lookup_growth, machine, median_of, proc_status, start_parley)
from bench.preload import preload
from bench.report import goal, render_table, write_readme_table

ACCOUNT = "/v1/account"


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
    parser.add_argument("--mail-server", choices=("dovecot", "pymap"), default="dovecot",
                        help="the IMAP server of the email scenarios: Debian's Dovecot (`make bench` installs it), or "
                             "pymap (pure Python, in memory, as the tests use)")
    parser.add_argument("--mail-delivery", choices=("maildir", "append"), default="maildir",
                        help="how the email scenarios' mail reaches the folder: files in Dovecot's maildir, as a "
                             "delivery agent writes them, or IMAP APPEND (pymap: always APPEND)")
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

        if only is None or "core" in only:
            run_core(args, load, salts, results, servers, workdir, base, first_run)
        selected = scenarios.load(only)
        results["scenarios"] = {}
        for scenario in selected:
            log(f"scenario {scenario.NAME}")
            context = Context(args, load, salts, first_run, base, workdir)
            try:
                results["scenarios"][scenario.NAME] = scenario.run(context)
            except Exception as error:  # the other scenarios still run, and this one is reported as failed
                log(f"  {scenario.NAME} failed:\n{traceback.format_exc()}")
                results["scenarios"][scenario.NAME] = {"scenario_error": repr(error)}
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
        result = results["scenarios"][scenario.NAME]
        results["goals"] += ([goal(f"{scenario.NAME}: the scenario ran", result["scenario_error"], "no error", False)]
                             if "scenario_error" in result else scenario.goals(result))
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


if __name__ == "__main__":
    sys.exit(main())
