"""SQL for searching message text (GET /v1/search, migration 0600): newest first, the account's messages only.

A query is (terms, digits): every term (2+ characters) must occur in the body, case-insensitively, as a substring
(so a prefix or a word inside a longer one matches); digits (a query that is a phone number in any spelling) must
occur in the body with the separators ' ()+-./' taken out. SQLite: the trigram FTS5 index, scoped by an account
column (0706), answers terms of 3+ characters and digits; a 2-character term is LIKE over the rows the index gave,
or over the account's messages when the query has nothing longer. The writer indexes messages in batches after
they are stored (index_pending, 0705_message_search_deferred.sql): the ones still pending are read by LIKE beside
the index. PostgreSQL: ILIKE, which the pg_trgm indexes serve.

A page's position is where the next one starts: SQLite's rowid (the index's order: the order messages were
stored in), PostgreSQL's message id (time-ordered)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from storage.db import fetch_all, reads
from storage.dialect import dialect_of, escape_like
from storage.interface import Connection, OwnConnection, Row

SEPARATORS = " ()+-./"  # taken out of a body for the digits index (0600 and 0696_message_search: the same characters)


def _fts_phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


@reads
def search_messages(cx: Connection, account_id: str, terms: Sequence[str], digits: str | None, before: str | None, limit: int) -> list[Row]:
    """Up to ``limit`` of the account's messages matching (terms, digits), newest first, from before the
    position ``before`` (None: from the newest). Rows: id, contact_id, body, created_at, position (text).
    ValueError for a position this database never gives."""
    if dialect_of(cx).name == "postgresql":
        return _search_postgres(cx, account_id, terms, digits, before, limit)
    return _search_sqlite(cx, account_id, terms, digits, before, limit)


# A query of 2-character terms only (no trigram to look up) in an account with fewer messages than this reads the
# account's messages by its index; in a larger one, the table newest first (stopping at the page). Counting up to
# it reads at most this many entries of messages_account_id.
SMALL_ACCOUNT = 20_000


def _without_separators(column: str) -> str:
    """SQLite's expression for column with SEPARATORS taken out (PostgreSQL has translate())."""
    for separator in SEPARATORS:
        column = f"replace({column}, '{separator}', '')"
    return column


# The index's account column for an account's code (message_search_accounts): three CJK characters, one trigram,
# the same width for every account (0706_message_search_accounts.sql writes the same expression).
ACCOUNT_TOKEN = "char(19968 + {c} / 400000000 % 20000, 19968 + {c} / 20000 % 20000, 19968 + {c} % 20000)"


def account_token_in_tx(cx: Connection, account_id: str) -> str | None:
    """The account's token in the index (ACCOUNT_TOKEN of its code), or None while none of its messages is indexed."""
    row = cx.execute(f"SELECT {ACCOUNT_TOKEN.format(c='code')} FROM message_search_accounts WHERE account_id = ?",
                     (account_id,)).fetchone()
    return row[0] if row else None


def _search_sqlite(cx: Connection, account_id: str, terms: Sequence[str], digits: str | None, before: str | None, limit: int) -> list[Row]:
    if before is not None and not (before.isascii() and before.isdigit() and len(before) < 19):
        raise ValueError("position")
    columns = "m.id, m.contact_id, m.body, m.created_at"
    indexed = [f"body : {_fts_phrase(t)}" for t in terms if len(t) >= 3]
    if digits:
        # The digits column holds only bodies where separators join digits (0696_message_search_digits.sql); any
        # other body's digit runs are in its body column as they are.
        indexed.append(f"(digits : {_fts_phrase(digits)} OR body : {_fts_phrase(digits)})")
    if not indexed:
        # Only 2-character terms, with no trigram to look up: a small account's messages by its index; a larger
        # one's, the table newest first, stopping at the page (a common pair costs little, a rare one a walk over the
        # whole table; "+" keeps the planner from reading the account's every message by its index and sorting
        # them). Messages not indexed yet are in the table too.
        small = cx.execute("SELECT COUNT(*) FROM (SELECT 1 FROM messages WHERE account_id = ? LIMIT ?)",
                           (account_id, SMALL_ACCOUNT)).fetchone()[0] < SMALL_ACCOUNT
        select, args = _read_by_like("messages m", "m.rowid", terms, None, account_id, before, account_index=small)
        return _page(cx, f"SELECT {columns}, m.rowid AS position FROM {select} ORDER BY m.rowid DESC LIMIT ?",
                     (*args, limit))
    # The messages the writer has not indexed yet (index_pending: a few hundred at most) are read by LIKE beside the
    # index, so that a message is found from its own commit on. CROSS JOIN: SQLite's planner then reads the pending
    # rows first, not the account's messages.
    select, args = _read_by_like("message_search_pending p CROSS JOIN messages m ON m.rowid = p.message_rowid",
                                 "p.message_rowid", terms, digits, account_id, before, account_index=False)
    sql = f"SELECT {columns}, m.rowid AS position FROM {select}"
    token = account_token_in_tx(cx, account_id)
    if token is not None:
        # FTS5 intersects the account's entries with the words' and walks the matches by rowid, newest first,
        # stopping at the limit: a common word costs no more than a rare one, and other accounts' matches are
        # never walked.
        match = " AND ".join([f"account : {_fts_phrase(token)}", *indexed])
        fts, fts_args = _read_by_like("message_search s JOIN messages m ON m.rowid = s.rowid", "s.rowid",
                                      [t for t in terms if len(t) < 3], None, account_id, before, match=match)
        sql = (f"SELECT * FROM (SELECT {columns}, s.rowid AS position FROM {fts} ORDER BY s.rowid DESC LIMIT ?)"
               f" UNION ALL {sql}")
        args = [*fts_args, limit, *args]
    return _page(cx, f"{sql} ORDER BY position DESC LIMIT ?", (*args, limit))


def _read_by_like(source: str, position: str, terms: Sequence[str], digits: str | None, account_id: str,
                  before: str | None, account_index: bool = True, match: str | None = None) -> tuple[str, list[Any]]:
    """``source WHERE ...``: the account's rows of source whose message body holds every term (LIKE) and the digits
    (with SEPARATORS taken out), before the position; and its arguments. account_index False: the account's
    index (messages_account_id) must not drive the read, source does. match: an FTS5 expression message_search
    (in source) must match as well."""
    where: list[str] = [] if match is None else ["message_search MATCH ?"]
    args: list[Any] = [] if match is None else [match]
    where.append("m.account_id = ?" if account_index else "+m.account_id = ?")
    args.append(account_id)
    for term in terms:
        where.append("m.body LIKE ? ESCAPE '\\'")
        args.append(f"%{escape_like(term)}%")
    if digits:
        where.append(f"{_without_separators('m.body')} LIKE ?")
        args.append(f"%{digits}%")
    if before is not None:
        where.append(f"{position} < ?")
        args.append(int(before))
    return f"{source} WHERE {' AND '.join(where)}", args


def _page(cx: Connection, sql: str, args: Sequence[Any]) -> list[Row]:
    rows = fetch_all(cx, sql, args)
    for row in rows:
        row["position"] = str(row["position"])
    return rows


# The search index is written off the messages' own transactions (0705_message_search_deferred.sql): the writer
# indexes the pending messages between its batches once there are this many, in one transaction (FTS5's cost per
# COMMIT then falls on a batch, not on every group commit). A search reads the pending ones by LIKE meanwhile.
INDEX_BATCH = 128
# At most this many in one transaction (a backlog, after a writer that failed to index): every write queued behind
# the writer waits for it (~20 us a message).
INDEX_MOST = 1024
# The body with SEPARATORS taken out goes into the digits column only where separators join digits (0696).
_JOINED_DIGITS = ("*[0-9][ ()+./-][0-9]*", "*[0-9][ ()+./-][ ()+./-][0-9]*", "*[0-9][ ()+./-][ ()+./-][ ()+./-][0-9]*")
# The pending messages up to a rowid. CROSS JOIN: the pending rows drive the join. A plain JOIN let SQLite carry
# "<= ?" over to messages' rowid and walk every message from the first, so that the step's cost grew with the table
# (tests/test_search.py checks the plans).
_PENDING = "message_search_pending p CROSS JOIN messages m ON m.rowid = p.message_rowid"
_CODE_ACCOUNTS = ("INSERT OR IGNORE INTO message_search_accounts (account_id)"
                  f" SELECT DISTINCT m.account_id FROM {_PENDING} WHERE p.message_rowid <= ?")
_INDEX = ("INSERT INTO message_search (rowid, body, digits, account) SELECT m.rowid, m.body, CASE WHEN"
          f" {' OR '.join(f'm.body GLOB {pattern!r}' for pattern in _JOINED_DIGITS)} THEN {_without_separators('m.body')}"
          f" ELSE '' END, {ACCOUNT_TOKEN.format(c='a.code')} FROM {_PENDING}"
          " JOIN message_search_accounts a ON a.account_id = m.account_id WHERE p.message_rowid <= ?")
INDEX_STATEMENTS = (_CODE_ACCOUNTS, _INDEX)  # each takes the highest rowid to index


def index_pending(cx: Connection, most: int = INDEX_MOST) -> int:
    """In the caller's transaction: index up to ``most`` of the messages waiting in message_search_pending, oldest
    first (an account's first gets its code), and take them off it. Returns how many. The expressions are the
    delete trigger's (0706): a contentless FTS5 delete must name the values that were indexed."""
    top = cx.execute("SELECT max(message_rowid) FROM (SELECT message_rowid FROM message_search_pending"
                     " ORDER BY message_rowid LIMIT ?)", (most,)).fetchone()[0]
    if top is None:
        return 0
    for statement in INDEX_STATEMENTS:
        cx.execute(statement, (top,))
    return int(cx.execute("DELETE FROM message_search_pending WHERE message_rowid <= ?", (top,)).rowcount)


def index_pending_batch(cx: OwnConnection) -> int:
    """The writer's step between its batches (SQLite, its own transaction): index_pending once INDEX_BATCH messages
    may be waiting (their rowids' spread, read from the two ends of the table: at least their number). Returns how
    many it indexed."""
    # Two subqueries: min() and max() in one SELECT would read the whole table, each alone is one seek.
    low, high = cx.execute("SELECT (SELECT min(message_rowid) FROM message_search_pending),"
                           " (SELECT max(message_rowid) FROM message_search_pending)").fetchone()
    if high is None or high - low + 1 < INDEX_BATCH:
        return 0
    with cx.transaction():
        return index_pending(cx)


def _search_postgres(cx: Connection, account_id: str, terms: Sequence[str], digits: str | None, before: str | None, limit: int) -> list[Row]:
    if before is not None and not (before.startswith("msg_") and before[4:].isascii() and before[4:].isalnum()):
        raise ValueError("position")
    where, args = ["m.account_id = ?"], [account_id]
    for term in terms:
        where.append("m.body ILIKE ? ESCAPE '\\'")
        args.append(f"%{escape_like(term)}%")
    if digits:
        # The expression and the predicate of the partial index messages_digits_trgm.
        where.append(f"m.body ~ '[0-9]' AND translate(m.body, '{SEPARATORS}', '') LIKE ?")
        args.append(f"%{digits}%")
    if before is not None:
        where.append("m.id < ?")
        args.append(before)
    rows = fetch_all(cx, "SELECT m.id, m.contact_id, m.body, m.created_at, m.id AS position FROM messages m"
                         f" WHERE {' AND '.join(where)} ORDER BY m.id DESC LIMIT ?", (*args, limit))
    return rows
