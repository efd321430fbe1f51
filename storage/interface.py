"""The storage seam both backends share: the errors a write can end in, the @reads/@writes decorators that make
a sync ``fn(cx, ...)`` awaitable as ``fn(db, ...)``, how a write function is named across a process boundary,
and the row helpers. Nothing here knows which database is behind ``db``; the types of both (Connection, Store) are structural, so
that neither backend needs importing to name them."""
from __future__ import annotations

import contextvars
import functools
import importlib
import json
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from common.errors import Conflict as _ConflictError
from common.errors import Unavailable


# Parameters of a statement: positional (``?``) or, rarely, named.
Params = Sequence[Any] | Mapping[str, Any]
# A row as fetch_one/fetch_all give it: column name -> value (storage/rows.py types the rows that cross layers).
Row = dict[str, Any]
P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Cursor(Protocol):
    """What storage asks of a cursor, sqlite3's or storage/pg_adapter.py's. A fetched row is sqlite3.Row-like
    (``row[0]``, ``row["col"]``, ``dict(row)``); typed Any as typeshed types sqlite3's, since both drivers'
    row classes answer the same way and fetchone's None is for the caller to expect or not."""
    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """The connection every storage function ``fn(cx, ...)`` is given: storage/sqlite_db.py's SqliteConnection
    or storage/pg_adapter.py's PgConnection (``execute_later``/``execute_at_commit`` are optional: see below)."""
    def execute(self, sql: str, params: Params = ..., /) -> Cursor: ...
    def executemany(self, sql: str, seq_of_params: Iterable[Params], /) -> Cursor: ...
    def savepoint(self) -> AbstractContextManager[Any]: ...
    @property
    def in_transaction(self) -> bool: ...


class OwnConnection(Connection, Protocol):
    """A connection opened for its own use (migrations, ops commands), never one a write is given: it runs whole
    scripts and its own transactions."""
    def execute_script(self, script: str, /) -> None: ...
    def transaction(self) -> AbstractContextManager[Any]: ...


class Store(Protocol):
    """What services and handlers hold as ``db``: storage/sqlite_db.py's Database or storage/postgres_db.py's
    PostgresDatabase."""
    async def read(self, fn: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs) -> R: ...
    async def write(self, fn: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs) -> R: ...
    async def write_background(self, fn: Callable[Concatenate[Connection, P], R], *args: P.args,
                               **kwargs: P.kwargs) -> R: ...


class StorageFunction(Protocol[P, R_co]):
    """A storage function after @reads or @writes: awaited as ``fn(db, ...)``, composed in a transaction as
    ``fn.sync(cx, ...)``."""
    @property
    def sync(self) -> Callable[Concatenate[Connection, P], R_co]: ...
    def __call__(self, db: Store, /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R_co]: ...


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


def database_errors() -> tuple[type[Exception], ...]:
    """The drivers' own error classes (what a write may raise besides the errors above): for code that
    retries any storage failure without knowing the database."""
    psycopg = sys.modules.get("psycopg")
    return (sqlite3.Error,) if psycopg is None else (sqlite3.Error, psycopg.Error)


class Conflict(_ConflictError):
    """A unique key of the data already holds this value (another request stored it first): raised by
    storage in place of the driver's integrity error, so services need not know the database."""


def function_reference(fn: Callable[..., Any]) -> tuple[str, str]:
    """(module, qualname) of a module-level function: how a write names its function to the writer
    process. Closures and lambdas cannot cross a process boundary: TypeError, at the call."""
    reference = _references.get(fn)
    if reference is None:
        if "<locals>" in fn.__qualname__ or fn.__name__ == "<lambda>":
            raise TypeError(f"Database.write needs a module-level function, not {fn.__qualname__}: "
                            "it runs in the writer process")
        reference = _references[fn] = (fn.__module__, fn.__qualname__)
    return reference


_references: dict[Callable[..., Any], tuple[str, str]] = {}
_functions: dict[tuple[str, str], Callable[..., Any]] = {}
# The Idempotency-Key claim of the request being served, if any (storage/idempotency.py sets it; write()
# hands the request's first write to it). Tasks copy the context, so it never leaks across requests.
idempotency_claim: contextvars.ContextVar[Any] = contextvars.ContextVar("idempotency_claim", default=None)


def resolve(module: str, qualname: str) -> Callable[..., Any]:
    """The sync function a (module, qualname) reference names (function_reference's inverse, used in the
    writer process); a @writes/@reads wrapper gives its .sync."""
    key = (module, qualname)
    fn = _functions.get(key)
    if fn is None:
        target: Any = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        fn = _functions[key] = getattr(target, "sync", target)
    return fn


def _as_dict(row: Any, json_columns: Iterable[str]) -> Row:
    out = dict(row)
    for column in json_columns:
        out[column] = json.loads(out[column]) if out[column] else None
    return out


def fetch_one(cx: Connection, sql: str, params: Params = (), json_columns: Iterable[str] = ()) -> Row | None:
    """The first row as a dict (JSON text columns decoded), or None."""
    row = cx.execute(sql, params).fetchone()
    return None if row is None else _as_dict(row, json_columns)


def fetch_all(cx: Connection, sql: str, params: Params = (), json_columns: Iterable[str] = ()) -> list[Row]:
    """Every row as a dict (JSON text columns decoded)."""
    return [_as_dict(row, json_columns) for row in cx.execute(sql, params)]


def reads(fn: Callable[Concatenate[Connection, P], R]) -> StorageFunction[P, R]:
    """Make a sync storage function ``fn(cx, ...)`` awaitable as ``fn(db, ...)`` on the reader.
    The sync form stays reachable as ``fn.sync`` so transactions can compose storage functions."""
    @functools.wraps(fn)
    async def run(db: Store, *args: P.args, **kwargs: P.kwargs) -> R:
        return await db.read(fn, *args, **kwargs)
    run.sync = fn  # type: ignore[attr-defined]
    return cast("StorageFunction[P, R]", run)


def writes(fn: Callable[Concatenate[Connection, P], R]) -> StorageFunction[P, R]:
    """Like ``reads``, but the call goes through the group-committing writer."""
    @functools.wraps(fn)
    async def run(db: Store, *args: P.args, **kwargs: P.kwargs) -> R:
        return await db.write(fn, *args, **kwargs)
    run.sync = fn  # type: ignore[attr-defined]
    return cast("StorageFunction[P, R]", run)


# Rows per multi-row statement (values_rows): 500 rows of 19 columns stay under SQLite's 32,766 parameters.
VALUES_ROWS = 500


def values_rows(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[str, list[Any]]]:
    """Multi-row statements (one statement for a batch, not one per row; on PostgreSQL one Bind/Execute, not
    hundreds): yields (the VALUES list "(?, ?), (?, ?), ...", its parameters) for each chunk of at most
    VALUES_ROWS rows, all rows tuples of one width. In FROM, ``(VALUES ...) AS v`` names its columns
    v.column1, v.column2, ... on both databases."""
    rows = list(rows)
    for start in range(0, len(rows), VALUES_ROWS):
        chunk = rows[start:start + VALUES_ROWS]
        row_sql = f"({', '.join('?' * len(chunk[0]))})"
        yield ", ".join([row_sql] * len(chunk)), [value for row in chunk for value in row]


def execute_later(cx: Connection, sql: str, params: Params = ()) -> None:
    """A write whose result the transaction does not read (no rows, no rowcount, no lastrowid): on PostgreSQL
    it travels with the next statement or the COMMIT (storage/pg_adapter.py), on SQLite it runs now."""
    getattr(cx, "execute_later", cx.execute)(sql, params)


def execute_at_commit(cx: Connection, sql: str, params: Params = ()) -> None:
    """Like execute_later, but on PostgreSQL sent only with the COMMIT: for a write whose row lock other
    transactions wait for (an account's live-event counter), held then for no round trip."""
    getattr(cx, "execute_at_commit", cx.execute)(sql, params)
