"""The inbound profile of `make bench`: py-spy samples the server (and its writer process) under wrk's inbound
load; own and inclusive time per function, split between the event loop, the reader thread and the writer."""
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import INBOUND, ROOT, log, wait_for_quiet


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
        if not frames or (in_writer and frames[-1] == "SocketIO.readinto (socket.py)"):
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
