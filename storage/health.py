"""SQL for the health check."""
from __future__ import annotations

from storage.db import reads
from storage.interface import Connection


@reads
def ping(cx: Connection) -> bool:
    """One round trip to the database."""
    return cx.execute("SELECT 1").fetchone()[0] == 1
