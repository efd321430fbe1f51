"""What differs between SQLite and PostgreSQL SQL, in one place: storage code asks ``dialect_of(cx)`` for the
few fragments the two cannot agree on (JSON paths, index hints, LIKE's case, a row's physical id), never
``if sqlite:`` of its own. Everything else is SQL both accept (ON CONFLICT, RETURNING, COALESCE, IS DISTINCT
FROM)."""
from __future__ import annotations

from typing import Any

from storage.interface import Connection


class SqliteDialect:
    name = "sqlite"
    like = "LIKE"  # ASCII case-insensitive already

    @staticmethod
    def json_field(column: str, *path: Any) -> str:
        """The value at path in a JSON text column: JSON text for an object or list, the string for a string."""
        return f"json_extract({column}, '$.{'.'.join(path)}')"

    @staticmethod
    def json_field_param(column: str, *path: Any) -> str:
        """The value at path + [the text of the next ? parameter] (a key only known at run time)."""
        prefix = "".join(f".{p}" for p in path)
        return f"json_extract({column}, '${prefix}.\"' || ? || '\"')"

    @staticmethod
    def index_hint(name: str) -> str:
        """SQLite's INDEXED BY: without statistics its planner may pick a worse index."""
        return f" INDEXED BY {name}"

    @staticmethod
    def json_list(placeholder: str = "?") -> str:
        """A FROM item over the elements of a JSON list parameter, each as ``j.value`` (text)."""
        return f"json_each({placeholder}) AS j"

    @staticmethod
    def json_set(document: str, key: str, value: str) -> str:
        """The JSON text document with its top-level key set to value (an SQL text expression, or NULL)."""
        return f"json_set({document}, '$.{key}', {value})"

    # A read transaction whose statements all see one snapshot: SQLite's deferred BEGIN already does.
    begin_snapshot = "BEGIN"
    # The physical row id of a table without an integer key (batched deletes by age).
    row_id = "rowid"
    # Rows claimed by one of several processes (the outbox): SQLite has one writer, nothing to skip.
    skip_locked = ""
    # Rows a transaction is about to change or delete, locked before it reads them again (a merge): one writer.
    for_update = ""

    @staticmethod
    def greatest(a: str, b: str) -> str:
        return f"MAX({a}, {b})"

    @staticmethod
    def lock(cx: Connection, key: str) -> bool:
        """Serialize this transaction's check-then-insert on a natural key (a contact's phone, a fromId) with
        every other transaction's on the same key, until COMMIT. SQLite's one writer does that already:
        nothing to do, and False (nothing locked, so nothing to re-read)."""
        return False

    @staticmethod
    def notify(cx: Connection, channel: str) -> None:
        """Tell the other server processes, at COMMIT, that something of ``channel`` changed (one process on
        SQLite: nobody to tell)."""


class PostgresDialect:
    name = "postgresql"
    like = "ILIKE"  # SQLite's LIKE ignores ASCII case

    @staticmethod
    def json_field(column: str, *path: Any) -> str:
        return f"({column}::jsonb #>> '{{{','.join(path)}}}')"

    @staticmethod
    def json_field_param(column: str, *path: Any) -> str:
        head = "".join(f" -> '{p}'" for p in path)
        return f"({column}::jsonb{head} ->> ?)"

    @staticmethod
    def index_hint(name: str) -> str:
        return ""  # PostgreSQL's planner has statistics

    @staticmethod
    def json_list(placeholder: str = "?") -> str:
        return f"jsonb_array_elements_text({placeholder}::jsonb) AS j(value)"

    @staticmethod
    def json_set(document: str, key: str, value: str) -> str:
        value = "NULL::text" if value == "NULL" else value
        return f"(jsonb_set_lax(({document})::jsonb, '{{{key}}}', to_jsonb({value})))::text"

    # READ COMMITTED (the default) takes a new snapshot per statement: a commit between two reads shows.
    begin_snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    row_id = "ctid"
    # A row another transaction is claiming is left to it rather than waited for.
    skip_locked = " FOR UPDATE SKIP LOCKED"
    for_update = " FOR UPDATE"

    @staticmethod
    def greatest(a: str, b: str) -> str:
        return f"GREATEST({a}, {b})"

    @staticmethod
    def lock(cx: Connection, key: str) -> bool:
        """A transaction-scoped advisory lock on the key's hash: a second transaction asking for it waits for
        the first one's COMMIT, and its next statement (READ COMMITTED) then sees what that one stored."""
        cx.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (key,))
        return True

    @staticmethod
    def notify(cx: Connection, channel: str) -> None:
        """Delivered at COMMIT (never for a rollback) to every process LISTENing (storage/pg_listen.py)."""
        cx.execute("SELECT pg_notify(?, '')", (channel,))


SQLITE = SqliteDialect()
POSTGRESQL = PostgresDialect()


def dialect_of(cx: Connection) -> SqliteDialect | PostgresDialect:
    """The dialect of a connection (a plain sqlite3 connection is SQLite's)."""
    return getattr(cx, "dialect", SQLITE)


def escape_like(text: str) -> str:
    """text as a LIKE pattern that matches it literally (with ESCAPE '\\'), on either database."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
