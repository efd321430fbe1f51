"""SQL for retention (services/retention.py): each function deletes at most ``limit`` rows older than
``before`` in one short write, and returns how many it deleted (fewer than limit: nothing older is left)."""
from __future__ import annotations

import re
from datetime import datetime

from storage.db import writes
from storage.dialect import dialect_of
from storage.interface import Connection

_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


@writes
def prune_older(cx: Connection, before: str, limit: int, table: str, column: str) -> int:
    """The oldest rows of a rowid table whose ``column`` (ISO text, indexed) is before ``before``."""
    if not (_NAME.match(table) and _NAME.match(column)):
        raise ValueError(f"not a table and column name: {table}.{column}")
    row_id = dialect_of(cx).row_id
    return cx.execute(f"DELETE FROM {table} WHERE {row_id} IN (SELECT {row_id} FROM {table} WHERE {column} < ?"
                      f" ORDER BY {column} LIMIT ?)", (before, limit)).rowcount


@writes
def prune_writer_batches(cx: Connection, before: str, limit: int) -> int:
    """Batch records of writers (Database instances) that last committed before ``before``: servers and
    ops commands that ended. A live writer's row is rewritten by its next commit."""
    cutoff = int(datetime.fromisoformat(before.replace("Z", "+00:00")).timestamp())
    return cx.execute("DELETE FROM writer_batches WHERE writer IN (SELECT writer FROM writer_batches"
                      " WHERE at < ? LIMIT ?)", (cutoff, limit)).rowcount
