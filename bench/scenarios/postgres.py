"""PostgreSQL beside SQLite (issue 19): inbound, contact creation and lookup against the same bare-Tornado ceiling
in the same run, then the time to enqueue a 100,000-recipient campaign on each backend.

A throwaway PostgreSQL 15 cluster (tests/pg_cluster.py: on this box, Unix socket, fsync off as the tests run it)
holds the PostgreSQL server's database; the SQLite server keeps its file in its data directory as always. Each
server gets its own account (create-account) and the same 1,000 contacts (preloaded_phone, for wrk's lookups).
Every round runs the ceiling, then the two servers in alternating order; medians over the rounds. The server
CPU figures count Parley's processes only: PostgreSQL's backends are not in its process tree (their time shows
as "other" cores).
"""
import shutil
import time

from bench.preload import IdMaker, preloaded_phone
from bench.scenarios.campaigns import UNTHROTTLED, Receiver

NAME = "postgres"
TITLE = "PostgreSQL beside SQLite: inbound, contacts, lookup, campaign enqueue"
INBOUND = "/v1/incoming_custom_channel_message"
CONTACTS = "/v1/contacts"
LOOKUP_CONTACTS = 1000
PASSWORD = "bench-postgres-password"
# (mode, path, contacts wrk draws from, salt): the three load.lua modes of the core phases.
MODES = (("inbound", INBOUND, 500, "sid"), ("create", CONTACTS, 0, "phone"),
         ("lookup", CONTACTS, LOOKUP_CONTACTS, None))


def _server(ctx, label, *database_args):
    from tests.parley_process import ParleyProcess, run_cli
    data = ctx.workdir / f"pg-{label}" / "data"
    data.mkdir(parents=True)
    created = run_cli(data, "create-account", "--name", "Bench", "--email", f"{label}@bench.example",
                      "--password", PASSWORD, *database_args)
    parley = ParleyProcess(data, "--rate-limit", "100000000", "--log-level", "warning", "--allow-private-webhooks",
                           *database_args, http=False)
    parley.start()
    parley.first_run = {"account_id": created["account_id"], "api_key": created["api_key"]}
    return parley


def _connect(parley, url):
    from tests import db_direct
    return db_direct.connect_postgres(url) if url else db_direct.connect(parley)


def _fill(parley, url, start, n, list_name=None):
    """n contacts (preloaded_phone(start..start+n)) written straight into the server's database (bench tooling,
    as bench/preload.py does for SQLite), and a list of them when list_name is given; returns the list id."""
    account_id, make_id, now = parley.first_run["account_id"], IdMaker("ct"), "2024-01-01T00:00:00.000Z"
    cx = _connect(parley, url)
    try:
        ids = [make_id() for _ in range(n)]
        cx.execute("BEGIN")
        cx.executemany("INSERT INTO contacts (id, account_id, first_name, phone, email, created_at)"
                       " VALUES (?, ?, ?, ?, ?, ?)",
                       [(ids[k], account_id, f"Bench{start + k}", preloaded_phone(start + k),
                         f"bench{start + k}@example.com", now) for k in range(n)])
        list_id = None
        if list_name:
            list_id = f"lst_bench_{start}"
            cx.execute("INSERT INTO lists (id, account_id, name, contact_count, created_at) VALUES (?, ?, ?, ?, ?)",
                       (list_id, account_id, list_name, n, now))
            cx.executemany("INSERT INTO list_members (list_id, contact_id, added_at) VALUES (?, ?, ?)",
                           [(list_id, contact_id, now) for contact_id in ids])
        cx.execute("COMMIT")
        return list_id
    finally:
        cx.close()


def _enqueue_seconds(parley, list_id, receiver, done=lambda counts: counts["pending"] == 0, name="Bench enqueue"):
    """POST a campaign to the list; seconds until done(its counts): by default until no recipient is pending
    (every message queued)."""
    key = {"apiKey": parley.first_run["api_key"]}
    with parley.client() as client:
        client.patch("/v1/account/settings", params=key,
                     json={"customChannelWebhookUrl": f"http://127.0.0.1:{receiver.port}/hook"}).raise_for_status()
        started = time.monotonic()
        r = client.post("/v1/campaigns", params=key, json={"name": name, "listId": list_id,
                                                           "body": "Hi {{firstName}}, the spring sale is on.",
                                                           "ratePerMinute": UNTHROTTLED})
        r.raise_for_status()
        deadline = started + 900
        while time.monotonic() < deadline:
            counts = client.get(f"/v1/campaigns/{r.json()['id']}", params=key).json()["counts"]
            if done(counts):
                return round(time.monotonic() - started, 2)
            time.sleep(0.1)
    return None


def run(ctx):
    from bench.measure import Ceiling
    from tests.pg_cluster import PgCluster, available
    if not available():
        return {"skipped": "PostgreSQL 15 is not installed (postgresql-15)"}
    args = ctx.args
    cluster = PgCluster().start()
    servers = {}
    try:
        admin = _connect(None, cluster.url())
        admin.execute("CREATE DATABASE parley_bench")
        admin.close()
        url = cluster.url("parley_bench")
        servers["sqlite"] = _server(ctx, "sqlite")
        servers["postgres"] = _server(ctx, "postgres", "--database-url", url)
        urls = {"sqlite": "", "postgres": url}
        for label, parley in servers.items():
            _fill(parley, urls[label], 0, LOOKUP_CONTACTS)
        ceiling = Ceiling(servers["sqlite"].data_dir)
        targets = {"ceiling": ceiling, **servers}
        keys = {"ceiling": servers["sqlite"].first_run["api_key"],
                **{label: s.first_run["api_key"] for label, s in servers.items()}}
        result = {"contacts": LOOKUP_CONTACTS}
        for mode, path, n, salt_kind in MODES:
            ctx.log(f"  {mode}: ceiling, SQLite, PostgreSQL")

            def measure(label, tag, duration=None):
                # create: each server has a database of its own, so a round's 200,000 phones only need to differ
                # from its other rounds' (load.lua); warm-up is round 0.
                salt = {"sid": lambda: ctx.salts.sid(f"pg-{label}-{tag}"),
                        "phone": lambda: str(0 if tag == "warm" else (tag + 1) * 200_000)}.get(salt_kind, lambda: "-")()
                server = targets[label]
                return ctx.load.wrk(server.base, server.proc.pid, mode, f"{path}?apiKey={keys[label]}", salt, n,
                                    duration=duration)
            runs = {label: [] for label in targets}
            for label in targets:  # warm up: connections, caches, code paths
                measure(label, "warm", duration=2)
            for rep in range(args.repeat):
                order = ("sqlite", "postgres") if rep % 2 == 0 else ("postgres", "sqlite")
                for label in ("ceiling", *order):
                    runs[label].append(measure(label, rep))
            result[mode] = {label: ctx.median_of(r) for label, r in runs.items()}
            for label in servers:
                result[mode][f"{label}_ratio"] = round(result[mode][label]["rps"] / result[mode]["ceiling"]["rps"], 3)
        ceiling.stop()

        n = 10_000 if args.quick else 100_000
        result["campaign"] = {"recipients": n}
        receiver = Receiver()
        try:
            for label, parley in servers.items():
                ctx.log(f"  campaign enqueue on {label}: {n} recipients")
                list_id = _fill(parley, urls[label], 1_000_000, n, "Everyone")
                ctx.wait_for_quiet()
                result["campaign"][f"{label}_enqueue_seconds"] = _enqueue_seconds(parley, list_id, receiver)
        finally:
            receiver.stop()
        return result
    finally:
        for parley in servers.values():
            parley.stop()
        cluster.stop()
        shutil.rmtree(ctx.workdir / "pg-sqlite", ignore_errors=True)
        shutil.rmtree(ctx.workdir / "pg-postgres", ignore_errors=True)


def render(result):
    if "skipped" in result:
        return [f"Not run: {result['skipped']}."]
    lines = ["Each round: the ceiling, then SQLite and PostgreSQL in alternating order (PostgreSQL on this box, "
             "Unix socket, fsync off; its backends' CPU is not in the server figures).", "",
             "| Endpoint, 32 connections | ceiling req/s | SQLite req/s | ratio | PostgreSQL req/s | ratio |"
             " PostgreSQL p99 ms |", "|---|---:|---:|---:|---:|---:|---:|"]
    for mode, title in (("inbound", "inbound message"), ("create", "contact create"),
                        ("lookup", f"contact lookup ({result['contacts']} contacts)")):
        r = result[mode]
        lines.append(f"| {title} | {r['ceiling']['rps']:.0f} | {r['sqlite']['rps']:.0f} | {r['sqlite_ratio']:.3f} | "
                     f"{r['postgres']['rps']:.0f} | {r['postgres_ratio']:.3f} | {r['postgres']['p99_ms']:.1f} |")
    c = result["campaign"]
    lines += ["", f"Campaign of {c['recipients']} recipients, enqueued (POST until none pending): SQLite "
                  f"{c['sqlite_enqueue_seconds']} s, PostgreSQL {c['postgres_enqueue_seconds']} s."]
    return lines


def goals(result):
    from bench.report import goal
    if "skipped" in result:
        return [goal("PostgreSQL inbound >= 0.5 x ceiling", None, 0.5, None)]
    ratio = result["inbound"]["postgres_ratio"]
    out = [goal("PostgreSQL inbound >= 0.5 x ceiling", ratio, 0.5, ratio >= 0.5)]
    c = result["campaign"]
    for label in ("sqlite", "postgres"):
        seconds = c[f"{label}_enqueue_seconds"]
        out.append(goal(f"campaign: enqueue {c['recipients']} recipients <= 10 s on {label}", seconds, 10,
                        seconds is not None and seconds <= 10))
    return out
