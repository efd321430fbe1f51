"""The storage seam both backends share: the errors a write can end in, the @reads/@writes decorators that make
a sync ``fn(cx, ...)`` awaitable as ``fn(db, ...)``, how a write function is named across a process boundary,
and the row helpers. Nothing here knows which database is behind ``db``."""
import contextvars
import functools
import importlib
import json
import sqlite3
import sys

from common.errors import Conflict as _ConflictError
from common.errors import Unavailable


class StorageUnavailable(Unavailable):
    """503 UNAVAILABLE: nothing of this write was stored (the disk is full, the database read-only,
    locked or failing, too many writes are waiting, the writer stopped before its COMMIT, the database
    is closing); the client may retry it as it is."""


class StoredResultLost(Unavailable):
    """503 UNAVAILABLE: the write IS stored (its transaction committed), but the writer process stopped
    before its answer arrived, so its result is unknown. A retry with the same Idempotency-Key returns
    the stored answer; services that can re-read the result catch this and answer normally."""


class WriteOutcomeUnknown(Unavailable):
    """503 UNAVAILABLE: whether the write is stored cannot be known (the writer process could not be
    confirmed gone, or its batch record could not be read). docs/design.md#api-decisions "Idempotency"."""


def database_errors():
    """The drivers' own error classes (what a write may raise besides the errors above): for code that
    retries any storage failure without knowing the database."""
    psycopg = sys.modules.get("psycopg")
    return (sqlite3.Error,) if psycopg is None else (sqlite3.Error, psycopg.Error)


class Conflict(_ConflictError):
    """A unique key of the data already holds this value (another request stored it first): raised by
    storage in place of the driver's integrity error, so services need not know the database."""


def function_reference(fn):
    """(module, qualname) of a module-level function: how a write names its function to the writer
    process. Closures and lambdas cannot cross a process boundary: TypeError, at the call."""
    reference = _references.get(fn)
    if reference is None:
        if "<locals>" in fn.__qualname__ or fn.__name__ == "<lambda>":
            raise TypeError(f"Database.write needs a module-level function, not {fn.__qualname__}: "
                            "it runs in the writer process")
        reference = _references[fn] = (fn.__module__, fn.__qualname__)
    return reference


_references: dict = {}
_functions: dict = {}
# The Idempotency-Key claim of the request being served, if any (storage/idempotency.py sets it; write()
# hands the request's first write to it). Tasks copy the context, so it never leaks across requests.
idempotency_claim = contextvars.ContextVar("idempotency_claim", default=None)


def resolve(module, qualname):
    """The sync function a (module, qualname) reference names (function_reference's inverse, used in the
    writer process); a @writes/@reads wrapper gives its .sync."""
    key = (module, qualname)
    fn = _functions.get(key)
    if fn is None:
        fn = importlib.import_module(module)
        for part in qualname.split("."):
            fn = getattr(fn, part)
        fn = _functions[key] = getattr(fn, "sync", fn)
    return fn


def _as_dict(row, json_columns):
    out = dict(row)
    for column in json_columns:
        out[column] = json.loads(out[column]) if out[column] else None
    return out


def fetch_one(cx, sql, params=(), json_columns=()):
    """The first row as a dict (JSON text columns decoded), or None."""
    row = cx.execute(sql, params).fetchone()
    return None if row is None else _as_dict(row, json_columns)


def fetch_all(cx, sql, params=(), json_columns=()):
    """Every row as a dict (JSON text columns decoded)."""
    return [_as_dict(row, json_columns) for row in cx.execute(sql, params)]


def reads(fn):
    """Make a sync storage function ``fn(cx, ...)`` awaitable as ``fn(db, ...)`` on the reader.
    The sync form stays reachable as ``fn.sync`` so transactions can compose storage functions."""
    @functools.wraps(fn)
    async def run(db, *args, **kwargs):
        return await db.read(fn, *args, **kwargs)
    run.sync = fn
    return run


def writes(fn):
    """Like ``reads``, but the call goes through the group-committing writer."""
    @functools.wraps(fn)
    async def run(db, *args, **kwargs):
        return await db.write(fn, *args, **kwargs)
    run.sync = fn
    return run


# Rows per multi-row statement (values_rows): 500 rows of 19 columns stay under SQLite's 32,766 parameters.
VALUES_ROWS = 500


def values_rows(rows):
    """Multi-row statements (one statement for a batch, not one per row; on PostgreSQL one Bind/Execute, not
    hundreds): yields (the VALUES list "(?, ?), (?, ?), ...", its parameters) for each chunk of at most
    VALUES_ROWS rows, all rows tuples of one width. In FROM, ``(VALUES ...) AS v`` names its columns
    v.column1, v.column2, ... on both databases."""
    rows = list(rows)
    for start in range(0, len(rows), VALUES_ROWS):
        chunk = rows[start:start + VALUES_ROWS]
        row_sql = f"({', '.join('?' * len(chunk[0]))})"
        yield ", ".join([row_sql] * len(chunk)), [value for row in chunk for value in row]


def execute_later(cx, sql, params=()):
    """A write whose result the transaction does not read (no rows, no rowcount, no lastrowid): on PostgreSQL
    it travels with the next statement or the COMMIT (storage/pg_adapter.py), on SQLite it runs now."""
    getattr(cx, "execute_later", cx.execute)(sql, params)


def execute_at_commit(cx, sql, params=()):
    """Like execute_later, but on PostgreSQL sent only with the COMMIT: for a write whose row lock other
    transactions wait for (an account's live-event counter), held then for no round trip."""
    getattr(cx, "execute_at_commit", cx.execute)(sql, params)
