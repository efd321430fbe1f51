"""The inbound endpoint of an older commit against the working tree (issue 23), in one alternating run.

`python bench/run.py --only compare --compare REV` (REV defaults to 1549b07, the end of the first wave):
REV is checked out into a temporary git worktree and both checkouts' `server.py serve` run side by side,
each on a data directory of its own made by its own `create-account` (so each has its own migrations),
beside the bare-Tornado ceiling. Every round runs the ceiling, then the two servers in alternating order
(ABBA), so that drift of this shared VM hits both alike; medians over the rounds, and each round's ratio.
With a profile (not --no-profile), py-spy samples both servers (event loop and writer process) under the
same load: the per-request cost table in bench/README.md is read off it.
"""
import shutil
import subprocess
from pathlib import Path

NAME = "compare"
TITLE = "Inbound: an older commit against the working tree (--compare)"
INBOUND = "/v1/incoming_custom_channel_message"
DEFAULT_REV = "1549b07"
ROOT = Path(__file__).resolve().parent.parent.parent
PASSWORD = "bench-compare-password"


def _checkout(rev, target):
    """A detached worktree of rev at target; None (and why) when git cannot make it."""
    out = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(target), rev],
                         capture_output=True, text=True)
    return None if out.returncode == 0 else out.stderr.strip() or out.stdout.strip()


def _server(ctx, label, root):
    """create-account with the checkout's own CLI, then its server; returns the started ParleyProcess."""
    from tests.parley_process import ParleyProcess, run_cli
    data = ctx.workdir / f"compare-{label}" / "data"
    data.mkdir(parents=True)
    created = run_cli(data, "create-account", "--name", "Bench", "--email", f"{label}@bench.example",
                      "--password", PASSWORD, root=root)
    parley = ParleyProcess(data, "--rate-limit", "100000000", "--log-level", "warning", http=False, root=root)
    parley.start()
    parley.first_run = {"account_id": created["account_id"], "api_key": created["api_key"]}
    return parley


def run(ctx):
    from bench.inbound_profile import profile_inbound
    from bench.measure import Ceiling
    args = ctx.args
    rev = getattr(args, "compare", None) or DEFAULT_REV
    described = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", rev],
                               capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    tree = ctx.workdir / "compare-tree"
    problem = _checkout(rev, tree)
    if problem:
        ctx.log(f"  cannot check out {rev}: {problem}")
        return {"commit": rev, "skipped": problem}
    servers = []
    try:
        servers.append(("rev", _server(ctx, "rev", tree)))
        servers.append(("head", _server(ctx, "head", ROOT)))
        ceiling = Ceiling(servers[1][1].data_dir)
        targets = {"ceiling": ceiling, **dict(servers)}
        keys = {"ceiling": servers[1][1].first_run["api_key"],
                **{label: s.first_run["api_key"] for label, s in servers}}

        def measure(label, tag, duration=None):
            server = targets[label]
            return ctx.load.wrk(server.base, server.proc.pid, "inbound", f"{INBOUND}?apiKey={keys[label]}",
                                ctx.salts.sid(f"cmp-{label}-{tag}"), 500, duration=duration)

        for label in targets:  # warm up: connections, caches, the contacts created on first sight
            measure(label, "warm", duration=2)
        runs = {label: [] for label in targets}
        rounds = []
        for rep in range(args.repeat):
            order = ("rev", "head") if rep % 2 == 0 else ("head", "rev")
            this = {"ceiling": measure("ceiling", rep)}
            for label in order:
                this[label] = measure(label, rep)
            for label, r in this.items():
                runs[label].append(r)
            rounds.append({label: round(this[label]["rps"] / this["ceiling"]["rps"], 3) for label in ("rev", "head")})
        result = {"commit": rev, "commit_described": described,
                  "head_commit": head + (" + uncommitted changes" if dirty else ""),
                  "rounds": rounds}
        for label in targets:
            result[label] = ctx.median_of(runs[label])
        for label in ("rev", "head"):
            result[f"{label}_ratio"] = round(result[label]["rps"] / result["ceiling"]["rps"], 3)
            result[label]["messages_stored"] = ctx.count_rows(
                targets[label].data_dir / "parley.db", "SELECT COUNT(*) FROM messages WHERE external_id LIKE ?",
                f"b{ctx.salts.stamp}-cmp-{label}%")
        if not args.no_profile:
            result["profiles"] = {}
            for label in ("rev", "head"):
                ctx.log(f"  profiling {label} with py-spy")
                spot = ctx.workdir / f"compare-profile-{label}"
                spot.mkdir()
                result["profiles"][label] = profile_inbound(ctx.load, targets[label], max(8, args.duration), spot)
        ceiling.stop()
        return result
    finally:
        for _, server in servers:
            server.stop()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
        shutil.rmtree(tree, ignore_errors=True)


def render(result):
    if "skipped" in result:
        return [f"Not run: {result['commit']} could not be checked out ({result['skipped']})."]
    lines = [f"{result['commit_described']} against the working tree ({result['head_commit']}); each round: the "
             "ceiling, then both servers in "
             "alternating order.", "",
             "| Inbound, 32 connections | ratio to ceiling | req/s | p50 ms | p99 ms | server CPU ms/request |"
             " cores (main) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for label, title in (("ceiling", "bare Tornado"), ("rev", result["commit"]), ("head", "working tree")):
        r = result[label]
        ratio = "1" if label == "ceiling" else f"{result[f'{label}_ratio']:.3f}"
        lines.append(f"| {title} | {ratio} | {r['rps']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
                     f"{r['server_cpu_ms_per_request']:.3f} | {r['server_cores']:.2f} ({r['main_process_cores']:.2f}) |")
    per_round = ", ".join(f"{r['rev']:.2f} / {r['head']:.2f}" for r in result["rounds"])
    lines += ["", f"Ratio per round ({result['commit']} / working tree): {per_round}."]
    for label, profile in (result.get("profiles") or {}).items():
        if profile:
            threads = profile["threads_percent"]
            top = ", ".join(f"{t['function']} {t['percent']}%" for t in profile["top_own"][:6])
            lines.append(f"Profile {label}: event loop {threads['event_loop']}%, writer {threads['writer_process']}% "
                         f"of samples; top own time: {top}.")
    return lines


def goals(result):
    from bench.report import goal
    if "skipped" in result:
        return [goal(f"inbound ratio >= {result['commit']}'s in the same run", None, None, None)]
    head, rev = result["head_ratio"], result["rev_ratio"]
    p99 = result["head"]["p99_ms"]
    return [goal(f"inbound ratio >= {result['commit']}'s ({rev}) in the same run", head, rev, head >= rev),
            # with --compare main: SQLite no more than 5 % slower than main (issue 19)
            goal(f"inbound ratio >= 0.95 x {result['commit']}'s in the same run", head, round(0.95 * rev, 3),
                 head >= 0.95 * rev),
            goal("inbound ratio >= 0.6 x ceiling (compare run)", head, 0.6, head >= 0.6),
            goal("inbound p99 <= 30 ms at 32 connections (compare run)", p99, 30, p99 <= 30)]
