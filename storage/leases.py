"""SQL for worker leases: one row per background job, held by one process until its `until`."""
from __future__ import annotations

from storage.db import reads, writes
from storage.interface import Connection


@writes
def take(cx: Connection, name: str, owner: str, now: str, until: str) -> bool:
    """Take or renew the lease ``name`` for ``owner`` until ``until`` when it is free, lapsed (its until before
    ``now``) or already ours. Returns True when ``owner`` holds it now. One statement: two processes asking at
    once cannot both win (the primary key and the conditional DO UPDATE decide)."""
    row = cx.execute("INSERT INTO worker_leases (name, owner, until) VALUES (?, ?, ?)"
                     " ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until"
                     " WHERE worker_leases.owner = excluded.owner OR worker_leases.until < ?"
                     " RETURNING owner", (name, owner, until, now)).fetchone()
    return row is not None


@writes
def release(cx: Connection, name: str, owner: str) -> None:
    """Give the lease up (a clean stop): the next process takes it at once instead of after it lapses."""
    cx.execute("DELETE FROM worker_leases WHERE name = ? AND owner = ?", (name, owner))


@writes
def expire(cx: Connection, name: str) -> None:
    """Tests: make the lease lapse now, as if its owner had died long ago."""
    cx.execute("UPDATE worker_leases SET until = '' WHERE name = ?", (name,))


@reads
def owners(cx: Connection) -> list[str]:
    """Every process that holds a lease or a claim on an outbox row now (services/leases.py release_dead_owners)."""
    return [row[0] for row in cx.execute(
        "SELECT owner FROM worker_leases UNION SELECT claimed_by FROM outbox"
        " WHERE claimed_until IS NOT NULL AND claimed_by IS NOT NULL").fetchall()]


@writes
def release_owners(cx: Connection, owners: list[str]) -> None:
    """Free what these processes (known dead) held: their leases go, their outbox rows' claims lapse now."""
    marks = ", ".join("?" for _ in owners)
    cx.execute(f"DELETE FROM worker_leases WHERE owner IN ({marks})", owners)
    cx.execute(f"UPDATE outbox SET claimed_by = NULL, claimed_until = NULL WHERE claimed_until IS NOT NULL"
               f" AND claimed_by IN ({marks})", owners)
