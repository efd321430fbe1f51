"""SQL for facts every process of one database agrees on (the secret key's fingerprint)."""
from __future__ import annotations

from storage.db import writes
from storage.interface import Connection


@writes
def agree(cx: Connection, name: str, value: str) -> str:
    """Store ``value`` under ``name`` unless a value is there; returns the stored value (ours or the first)."""
    cx.execute("INSERT INTO shared_facts (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", (name, value))
    return cx.execute("SELECT value FROM shared_facts WHERE name = ?", (name,)).fetchone()[0]
