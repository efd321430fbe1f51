"""Automatic assignment (issue 40): with 50 agents and 10,000 open conversations, how long one assignment decision
takes (goal p99 <= 5 ms), and inbound throughput with assignment on against off (goal >= 0.9x).

The account of the scenario's data directory gets 50 agents and 10,000 open conversations spread over them,
written straight into its SQLite file before the server starts. Decisions: on a copy of that file, 1,000 times a
new conversation waits and services.assignment_store.assign_queued_in_tx assigns it (the Assigner's whole transaction:
the lock, the agent claimed by their kept load (users.open_load), the update, its event and audit entry), timed
without and with its COMMIT (an fsync: the disk's, not the decision's). A new contact's message assigns its
conversation in its own write (the same claim): the throughput measures that. Throughput:
the real server under wrk, assignment off and balanced in alternating rounds (ABBA), first with every request from
a new contact (each one a new conversation that the on-rounds must assign: the worst case), then with messages to
500 existing conversations (the usual traffic: nothing to assign)."""
import shutil
import statistics
import time

from common.ids import new_id, now_iso, utcnow

NAME = "assignment"
TITLE = "Automatic assignment: decisions with 50 agents and 10,000 open conversations, inbound on against off"
AGENTS = 50
OPEN = 10_000
DECISIONS = 1_000
INBOUND = "/v1/incoming_custom_channel_message"


def _seed(db_path, account_id):
    """50 agents (signed up, available, no capacity limit) and 10,000 open conversations spread over them."""
    from storage import db
    cx = db.connect_sync(db_path)
    try:
        cx.execute("BEGIN")
        agents = [new_id("usr") for _ in range(AGENTS)]
        for n, user_id in enumerate(agents):
            cx.execute("INSERT INTO users (id, account_id, email, name, role, active, password_hash, is_owner,"
                       " created_at) VALUES (?, ?, ?, NULL, 'agent', 1, 'bench-no-password', 0, ?)",
                       (user_id, account_id, f"agent{n}@bench.example", now_iso()))
        cx.execute("UPDATE users SET available = 0 WHERE account_id = ? AND is_owner = 1", (account_id,))
        for n in range(OPEN):
            contact_id, message_id, at = new_id("ct"), new_id("msg"), now_iso()
            cx.execute("INSERT INTO contacts (id, account_id, first_name, opted_out, created_at) VALUES (?, ?, ?, 0, ?)",
                       (contact_id, account_id, f"Open {n}", at))
            cx.execute("INSERT INTO conversations (account_id, contact_id, last_message_id, last_message_at,"
                       " last_direction, last_preview, status, assignee_user_id, last_inbound_id) VALUES"
                       " (?, ?, ?, ?, 'inbound', 'hello', 'open', ?, ?)",
                       (account_id, contact_id, message_id, at, agents[n % AGENTS], message_id))
        cx.execute("COMMIT")
    finally:
        cx.close()
    return agents


def _set_mode(cx, account_id, mode):
    cx.execute("UPDATE accounts SET settings = json_set(COALESCE(settings, '{}'), '$.assignment', json(?))"
               " WHERE id = ?", (f'{{"mode": "{mode}", "awayAfterMinutes": null}}', account_id))


def _decisions(db_path, account_id):
    """(seconds to decide and write, seconds with the COMMIT too) of each of DECISIONS single assignments, on the
    seeded file."""
    from storage.assignment import assign_queued_in_tx
    from storage import db
    cx = db.connect_sync(db_path)
    times = []
    try:
        _set_mode(cx, account_id, "balanced")
        for n in range(DECISIONS):
            contact_id, message_id, at = new_id("ct"), new_id("msg"), now_iso()
            cx.execute("BEGIN")
            cx.execute("INSERT INTO contacts (id, account_id, first_name, opted_out, created_at) VALUES (?, ?, ?, 0, ?)",
                       (contact_id, account_id, f"New {n}", at))
            cx.execute("INSERT INTO conversations (account_id, contact_id, last_message_id, last_message_at,"
                       " last_direction, last_preview, last_inbound_id, queued_at) VALUES"
                       " (?, ?, ?, ?, 'inbound', 'hello', ?, ?)", (account_id, contact_id, message_id, at, message_id, at))
            cx.execute("COMMIT")
            cx.execute("BEGIN")
            started = time.perf_counter()
            assigned = assign_queued_in_tx(cx, account_id, utcnow())
            decided = time.perf_counter()
            cx.execute("COMMIT")
            times.append((decided - started, time.perf_counter() - started))
            assert len(assigned) == 1, assigned
    finally:
        cx.close()
    return times


def _percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(ctx):
    data = ctx.fresh_data_dir(NAME)
    account_id = ctx.first_run["account_id"]
    db_path = data / "parley.db"
    _seed(db_path, account_id)
    copy = ctx.workdir / NAME / "decisions.db"
    shutil.copyfile(db_path, copy)
    times = _decisions(copy, account_id)
    decided, committed = [t[0] for t in times], [t[1] for t in times]
    decision = {"count": len(times), "p50_ms": round(1000 * _percentile(decided, 0.5), 3),
                "p99_ms": round(1000 * _percentile(decided, 0.99), 3), "max_ms": round(1000 * max(decided), 3),
                "with_commit_p50_ms": round(1000 * _percentile(committed, 0.5), 3),
                "with_commit_p99_ms": round(1000 * _percentile(committed, 0.99), 3)}
    ctx.log(f"  decision p50 {decision['p50_ms']} ms, p99 {decision['p99_ms']} ms; with its COMMIT p50 "
            f"{decision['with_commit_p50_ms']} ms, p99 {decision['with_commit_p99_ms']} ms ({len(times)} decisions)")

    parley = ctx.start_parley(data)
    key = {"apiKey": ctx.first_run["api_key"]}
    path = f"{INBOUND}?apiKey={ctx.first_run['api_key']}"
    runs = {"new": {"off": [], "balanced": []}, "existing": {"off": [], "balanced": []}}
    try:
        with parley.client() as client:
            def mode(name):
                r = client.patch("/v1/account/settings", params=key,
                                 json={"assignment": {"mode": name, "awayAfterMinutes": None}})
                r.raise_for_status()

            for traffic, n in (("new", 0), ("existing", 500)):
                mode("off")
                ctx.load.wrk(parley.base, parley.proc.pid, "inbound", path, ctx.salts.sid(f"as-warm-{traffic}"), n,
                             duration=2)
                for rep in range(max(2, ctx.args.repeat)):
                    for name in (("off", "balanced") if rep % 2 == 0 else ("balanced", "off")):
                        mode(name)
                        result = ctx.load.wrk(parley.base, parley.proc.pid, "inbound", path,
                                              ctx.salts.sid(f"as-{traffic}-{name}-{rep}"), n)
                        runs[traffic][name].append(result["rps"])
    finally:
        parley.stop()
    ratios = {traffic: round(statistics.median(r["balanced"]) / statistics.median(r["off"]), 3)
              for traffic, r in runs.items()}
    for traffic, ratio in ratios.items():
        ctx.log(f"  inbound ({traffic} conversations): on/off {ratio}")
    return {"agents": AGENTS, "open_conversations": OPEN, "decision": decision, "rps": runs, "ratio": ratios}


def render(r):
    d = r["decision"]
    return [f"- Assignment decision with {r['agents']} agents and {r['open_conversations']:,} open conversations "
            f"(its transaction up to COMMIT, SQLite): p50 {d['p50_ms']} ms, p99 {d['p99_ms']} ms, max {d['max_ms']} ms; "
            f"with the COMMIT p50 {d['with_commit_p50_ms']} ms, p99 {d['with_commit_p99_ms']} ms",
            f"- Inbound with assignment balanced against off: {r['ratio']['new']}x when every message opens a new "
            f"conversation (req/s on {r['rps']['new']['balanced']}, off {r['rps']['new']['off']}), "
            f"{r['ratio']['existing']}x to existing conversations (on {r['rps']['existing']['balanced']}, "
            f"off {r['rps']['existing']['off']})"]


def goals(r):
    from bench.report import goal
    p99 = r["decision"]["p99_ms"]
    return [goal("assignment: decision p99 (50 agents, 10,000 open)", p99, 5, p99 <= 5),
            goal("assignment: inbound on/off, every message a new conversation", r["ratio"]["new"], 0.9,
                 r["ratio"]["new"] >= 0.9),
            goal("assignment: inbound on/off, existing conversations", r["ratio"]["existing"], 0.9,
                 r["ratio"]["existing"] >= 0.9)]
