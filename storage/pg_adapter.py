"""A psycopg 3 connection that speaks like the sqlite3 one storage code was written for: ``execute(sql, params)``
with ``?`` placeholders, cursors with fetchone/fetchall/iteration/rowcount, rows like sqlite3.Row (``row[0]``,
``row["col"]``, ``dict(row)``, ``.keys()``), executemany, savepoint(), and Python bools stored as the
schema's INTEGER 0/1."""
from __future__ import annotations

import contextlib
import functools
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any

import psycopg
from psycopg.adapt import Dumper

from storage.dialect import POSTGRESQL
from storage.interface import Params, VALUES_ROWS


class Row(tuple):
    """A result row like sqlite3.Row: a tuple that also answers to column names."""
    __slots__ = ()
    _index: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


@functools.lru_cache(maxsize=512)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    return type("Row", (Row,), {"__slots__": (), "_index": {name: i for i, name in enumerate(names)}})


def row_factory(cursor: Any) -> Callable[..., Any]:
    # The names straight from the result: cursor.description makes a Column object per column per statement.
    res = cursor.pgresult
    if res is None or not res.nfields:
        return tuple
    return _row_class(tuple(res.fname(i).decode() for i in range(res.nfields)))


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """sqlite3's ``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled), outside quoted text and
    comments. Cached per SQL string: storage's statements are mostly constants."""
    out, i, n = [], 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            j = sql.find(c, i + 1)
            while j != -1 and j + 1 < n and sql[j + 1] == c:  # a doubled quote inside the literal
                j = sql.find(c, j + 2)
            j = n if j == -1 else j + 1
            out.append(sql[i:j].replace("%", "%%"))
            i = j
            continue
        if c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j == -1 else j
            out.append(sql[i:j].replace("%", "%%"))
            i = j
            continue
        out.append("%s" if c == "?" else "%%" if c == "%" else c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def numbered(sql: str) -> str:
    """sqlite3's ``?`` placeholders as PostgreSQL's own ``$1``, ``$2``, ... (outside quoted text and comments),
    for a RawCursor: psycopg then parses nothing. Cached per SQL string (a batch's few shapes)."""
    numbers = itertools.count(1)
    return re.sub(r"%%|%s", lambda m: "%" if m.group() == "%%" else f"${next(numbers)}", translate(sql))


# psycopg parses a statement with more parameters than this (psycopg._queries.MAX_CACHED_STATEMENT_PARAMS) for
# its placeholders in Python on every call, uncached: a campaign batch's multi-row statements (thousands of
# parameters) spent more time there than PostgreSQL took to run them. Those go through a RawCursor instead.
_PARSED_PARAMS = 50


def _no_rows(cursor: Any) -> bool:
    """Whether the statement returns no rows (an UPDATE, a DELETE): description's test, without its Columns."""
    res = cursor.pgresult
    return not res or not (res.nfields or res.status in _ROW_STATUSES)


_ROW_STATUSES = (psycopg.pq.ExecStatus.TUPLES_OK, psycopg.pq.ExecStatus.SINGLE_TUPLE)


class Cursor(psycopg.Cursor):
    """sqlite3's cursor gives no rows, not an error, for a statement that returns none (an UPDATE, a DELETE)."""

    def fetchone(self) -> Any:
        return None if _no_rows(self) else super().fetchone()

    def fetchall(self) -> list[Any]:
        return [] if _no_rows(self) else super().fetchall()

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        return iter(()) if _no_rows(self) else super().__iter__()


class RawCursor(Cursor, psycopg.RawCursor):
    """Cursor's rules for a statement written with $1, $2, ... (numbered()), which psycopg does not parse."""


class IntBoolDumper(Dumper):
    """True/False as 1/0: the schema keeps flags as INTEGER (as on SQLite)."""
    oid = psycopg.adapters.types["int8"].oid

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


def configure(raw: psycopg.Connection[Any]) -> None:
    """Per pooled connection, once."""
    raw.adapters.register_dumper(bool, IntBoolDumper)
    raw.row_factory = row_factory
    raw.cursor_factory = Cursor


# INSERT INTO t (columns) VALUES (?, ...), and nothing after it (no ON CONFLICT: a key twice in one statement
# would fail there; no RETURNING)
_multirow = re.compile(r"^\s*(INSERT INTO \w+ \([^()]*\))\s+VALUES\s+(\((?:\s*\?\s*,)*\s*\?\s*\))\s*$", re.I | re.S)


class PgConnection:
    """The adapter over one checked-out psycopg connection (not thread-safe, like the connection)."""
    dialect = POSTGRESQL
    _savepoints = itertools.count(1)

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw
        self._later: list[tuple[str, Params]] = []  # execute_later's statements not sent yet
        self._at_commit: list[tuple[str, Params]] = []  # execute_at_commit's, sent with the COMMIT
        self._marks: list[int] = []  # len(_at_commit) at each open SAVEPOINT

    def execute(self, sql: str, params: Params = ()) -> psycopg.Cursor[Any]:
        if sql[:1] in "SRsr":
            self._track_savepoint(sql)
        if self._later or self._starts_transaction():
            return self._pipelined(sql, params)
        return self._send(sql, params)

    def _send(self, sql: str, params: Params) -> psycopg.Cursor[Any]:
        """Execute on a new cursor (in the pipeline, if one is open): big statements unparsed by psycopg."""
        if not params:
            cursor = self.raw.cursor()
            cursor.execute(sql)
        elif len(params) > _PARSED_PARAMS:
            cursor = RawCursor(self.raw)
            cursor.execute(numbered(sql), params)
        else:
            cursor = self.raw.cursor()
            cursor.execute(translate(sql), params)
        return cursor

    def execute_later(self, sql: str, params: Params = ()) -> None:
        """A write whose result nobody reads (no rows, no rowcount): sent with the next statement or with the
        COMMIT, in one round trip (psycopg's pipeline), not on its own. Its error, if any, is raised there."""
        if self.raw.autocommit:
            self.execute(sql, params)
        else:
            if sql[:1] in "SRsr":
                self._track_savepoint(sql)
            self._later.append((sql, params))

    def execute_at_commit(self, sql: str, params: Params = ()) -> None:
        """Like execute_later, but sent only with the COMMIT, after everything else: for a statement whose lock
        others wait for (an account's event counter), so that it is held for no round trip. Dropped with a
        SAVEPOINT rolled back to."""
        if self.raw.autocommit:
            self.execute(sql, params)
        else:
            self._at_commit.append((sql, params))

    def send_at_commit_now(self) -> None:
        """What execute_at_commit holds goes with the next statement instead (which must come after it)."""
        self._later += self._at_commit
        self._at_commit, self._marks = [], [0] * len(self._marks)  # what an open SAVEPOINT covers is sent

    def _track_savepoint(self, sql: str) -> None:
        head = sql[:12].upper()
        if head.startswith("SAVEPOINT "):
            self._marks.append(len(self._at_commit))
        elif head.startswith("ROLLBACK TO") and self._marks:
            del self._at_commit[self._marks[-1]:]
        elif head.startswith("RELEASE ") and self._marks:
            self._marks.pop()

    def _starts_transaction(self) -> bool:
        # psycopg sends the BEGIN of a transaction as a round trip of its own, except in a pipeline
        return not self.raw.autocommit and self.raw.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE

    def _send_later(self) -> None:
        later, self._later = self._later, []
        for sql, params in later:
            self._send(sql, params)

    def _pipelined(self, sql: str, params: Params) -> psycopg.Cursor[Any]:
        """The statements left for later, then this one, in one round trip; the cursor has its results."""
        with self.raw.pipeline():
            self._send_later()
            cursor = self._send(sql, params)
        return cursor

    def flush(self) -> None:
        """Send what execute_later holds now (before the caller uses the raw connection)."""
        if self._later:
            with self.raw.pipeline():
                self._send_later()

    def executemany(self, sql: str, seq_of_params: Iterable[Params]) -> psycopg.Cursor[Any]:
        self.flush()
        rows = list(seq_of_params)
        values = _multirow.match(sql)
        if values and len(rows) > 1:
            # A plain INSERT of many rows as INSERT ... VALUES (...), (...), ...: one statement for each chunk
            # (VALUES_ROWS rows), not one execution per row (a campaign's batch inserts hundreds of messages and
            # deliveries); psycopg leaves such statements unparsed (_send).
            head, row_sql = values.group(1), values.group(2)
            count = 0
            with self.raw.pipeline():
                for start in range(0, len(rows), VALUES_ROWS):
                    chunk = rows[start:start + VALUES_ROWS]
                    cursor = self._send(f"{head} VALUES {', '.join([row_sql] * len(chunk))}",
                                        [value for row in chunk for value in row])
                    count += len(chunk)
            cursor._rowcount = count
            return cursor
        cursor = self.raw.cursor()
        cursor.executemany(translate(sql), rows)
        return cursor

    def execute_script(self, script: str) -> None:
        """Several statements, no parameters (a migration file)."""
        self.flush()
        self.raw.execute(script)

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[PgConnection]:
        """A nested transaction: what fails inside it rolls back alone, and the transaction goes on (on
        PostgreSQL an error aborts the whole transaction otherwise)."""
        name = f"sp{next(self._savepoints)}"
        self.execute(f"SAVEPOINT {name}")
        try:
            yield self
        except BaseException:
            self._later = []  # rolled back with the rest: never sent
            self.execute(f"ROLLBACK TO SAVEPOINT {name}")
            self.execute(f"RELEASE SAVEPOINT {name}")
            raise
        self.execute(f"RELEASE SAVEPOINT {name}")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """BEGIN ... COMMIT (ROLLBACK on an exception), on a connection outside a transaction."""
        self.flush()
        try:
            with self.raw.transaction():
                yield self
                self._later += self._at_commit
                self._at_commit = []
                self.flush()
        finally:
            self._forget()

    def commit(self) -> None:
        """COMMIT, with what execute_later and execute_at_commit hold sent in the same round trip."""
        self._later += self._at_commit
        self._at_commit, self._marks = [], []
        if self._later:
            with self.raw.pipeline():
                self._send_later()
                self.raw.commit()
        else:
            self.raw.commit()

    def _forget(self) -> None:
        self._later, self._at_commit, self._marks = [], [], []

    def rollback(self) -> None:
        self._forget()
        self.raw.rollback()

    def close(self) -> None:
        self._forget()
        self.raw.close()

    def __enter__(self) -> PgConnection:  # like sqlite3's: commit on success, roll back on an exception
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None) -> None:
        if kind is None:
            self.commit()
        else:
            self.rollback()

    @property
    def in_transaction(self) -> bool:
        # Statements held by execute_later belong to the transaction they will open when sent.
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE or bool(self._later)
