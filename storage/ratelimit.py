"""SQL for the API rate limit shared by every process of a PostgreSQL database (services/ratelimit.py)."""
from __future__ import annotations

from storage.interface import Connection

EPSILON = 1e-6  # seconds: float rounding at epoch magnitudes


def hit(cx: Connection, key: str, interval: float, window: float) -> tuple[bool, float, float]:
    """GCRA in one atomic statement on the key's row, with PostgreSQL's clock (one clock for every process, on
    any host): the request is allowed when the theoretical arrival time it would push to is at most ``window``
    ahead of now, and the row then keeps that time. Returns (allowed, the TAT after, now) in seconds.
    PostgreSQL only: statement_timestamp() and GREATEST (SQLite's one process keeps its limiter in memory)."""
    now = "EXTRACT(EPOCH FROM statement_timestamp())::float8"
    pushed = "GREATEST(rate_limits.tat + ?, excluded.tat)"  # max(tat, now) + interval (excluded.tat = now + interval)
    fits = f"{pushed} - excluded.tat <= ?"  # pushed - now <= window
    row = cx.execute(
        f"INSERT INTO rate_limits (key, tat, allowed) VALUES (?, {now} + ?, 1) ON CONFLICT (key) DO UPDATE SET"
        f" allowed = CASE WHEN {fits} THEN 1 ELSE 0 END,"
        f" tat = CASE WHEN {fits} THEN {pushed} ELSE rate_limits.tat END"
        f" RETURNING allowed, tat, {now}",
        (key, interval, interval, window - interval + EPSILON, interval, window - interval + EPSILON, interval)
    ).fetchone()
    return bool(row[0]), row[1], row[2]


def prune(cx: Connection) -> int:
    """Forget keys whose budget is full again (their TAT passed): they behave as unseen keys."""
    return cx.execute("DELETE FROM rate_limits WHERE tat < EXTRACT(EPOCH FROM statement_timestamp())").rowcount
