#!/usr/bin/env python3
"""Instructions per inbound request in the server's event-loop process, counted by valgrind's callgrind
(deterministic where wall-clock figures on a shared 2-core VM drift 2x between runs; issue 23).

    .venv/bin/python bench/callgrind_inbound.py [--root CHECKOUT ...] [--seconds 20] [--runs 2]

For each checkout (default: this one): create-account with its own CLI, start its `server.py serve` under
callgrind (the writer process runs natively: it is counted apart, see bench/README.md), warm up with 10 s of
wrk's inbound load on one connection (the 500 contacts are created), zero the counters, run the load for
--seconds, dump. The same server left idle for --seconds gives what the background tasks cost per second
(delivery, campaigns, leases, reports polls), which is taken off in proportion to the measured run's length.
One connection: every request is handled alone, so the figure does not move with how requests batch.
Needs valgrind and wrk (apt-get install valgrind wrk); a run takes ~1.5 minutes per checkout.
"""
import argparse
import glob
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

INBOUND = "/v1/incoming_custom_channel_message"


def _wrapper(directory):
    """An executable that runs `serve` under callgrind and anything else (the ops CLI) as it is."""
    script = directory / "python-under-callgrind"
    script.write_text("#!/bin/bash\nfor a in \"$@\"; do if [ \"$a\" = serve ]; then exec valgrind --tool=callgrind "
                      f"--callgrind-out-file={directory}/callgrind.out.%p {sys.executable} \"$@\"; fi; done\n"
                      f"exec {sys.executable} \"$@\"\n")
    script.chmod(0o755)
    return script


def _wrk(base, key, seconds, salt):
    out = subprocess.run(["wrk", "-t1", "-c1", f"-d{seconds}s", "--timeout", "30s", "-s", str(ROOT / "bench" / "load.lua"),
                          base, "--", "inbound", f"{INBOUND}?apiKey={key}", str(salt), "500"],
                         capture_output=True, text=True, check=True)
    line = next(line for line in out.stdout.splitlines() if line.startswith("WRKJSON "))
    return json.loads(line[len("WRKJSON "):])


def _counted(directory, pid, label):
    """Instructions in the dump named label of process pid."""
    for path in glob.glob(f"{directory}/callgrind.out.{pid}*"):
        text = Path(path).read_text(errors="replace")
        if f"Trigger: dump {label}" in text:
            return int(re.search(r"^summary: (\d+)", text, re.M).group(1))
    raise RuntimeError(f"no callgrind dump {label} for {pid}")


def measure(root, seconds, work):
    """{instructions per request, idle instructions per second, requests} for the checkout at root."""
    from tests import parley_process
    data = work / "data"
    data.mkdir(parents=True)
    created = parley_process.run_cli(data, "create-account", "--name", "Bench", "--email", "cg@bench.example",
                                     "--password", "bench-callgrind-password", root=root)
    key, real = created["api_key"], sys.executable
    sys.executable = str(_wrapper(work))
    try:
        server = parley_process.ParleyProcess(data, "--rate-limit", "100000000", "--log-level", "warning",
                                              http=False, root=root)
        server.start(timeout=600)
    finally:
        sys.executable = real
    pid = server.proc.pid

    def control(*args):
        subprocess.run(["callgrind_control", *args, str(pid)], capture_output=True, check=True)

    try:
        _wrk(server.base, key, 10, 1)  # warm-up: contacts created, caches filled
        control("-z")
        started = time.monotonic()
        run = _wrk(server.base, key, seconds, 2)
        elapsed = time.monotonic() - started
        control("-d", "load")
        control("-z")
        time.sleep(seconds)
        control("-d", "idle")
        time.sleep(1)
    finally:
        server.stop(timeout=120)
    loaded, idle = _counted(work, pid, "load"), _counted(work, pid, "idle")
    per_second_idle = idle / seconds
    return {"requests": run["requests"], "instructions_per_request": round((loaded - per_second_idle * elapsed)
                                                                           / run["requests"]),
            "idle_instructions_per_second": round(per_second_idle)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", action="append", type=Path, help="a checkout to measure (repeatable)")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    for root in args.root or [ROOT]:
        for n in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="parley-callgrind-") as work:
                result = measure(root.resolve(), args.seconds, Path(work))
            print(json.dumps({"root": str(root), "run": n + 1, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
