"""SQL for searching message text (GET /v1/search, migration 0600): newest first, the account's messages only.

A query is (terms, digits): every term (2+ characters) must occur in the body, case-insensitively, as a substring
(so a prefix or a word inside a longer one matches); digits (a query that is a phone number in any spelling) must
occur in the body with the separators ' ()+-./' taken out. SQLite: the trigram FTS5 index answers terms of 3+
characters and digits; a 2-character term is LIKE over the rows the index gave, or over the account's messages
when the query has nothing longer; an account of fewer than SMALL_ACCOUNT messages is read by LIKE alone (the index
holds every account's messages). PostgreSQL: ILIKE, which the pg_trgm indexes serve.

A page's position is where the next one starts: SQLite's rowid (the index's order: the order messages were
stored in), PostgreSQL's message id (time-ordered)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from storage.db import fetch_all, reads
from storage.dialect import dialect_of, escape_like
from storage.interface import Connection, Row

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


# An account with fewer messages than this is searched by reading its own messages (its index, then LIKE): the
# FTS5 index holds every account's messages, so a small account's search for a word other accounts use a lot would
# walk all of theirs before finding none of its own (100 messages beside another account's 300,000: 61 ms for
# "refund", growing with the file). Counting up to it reads at most this many entries of messages_account_id.
SMALL_ACCOUNT = 20_000


def _without_separators(column: str) -> str:
    """SQLite's expression for column with SEPARATORS taken out (PostgreSQL has translate())."""
    for separator in SEPARATORS:
        column = f"replace({column}, '{separator}', '')"
    return column


def _search_sqlite(cx: Connection, account_id: str, terms: Sequence[str], digits: str | None, before: str | None, limit: int) -> list[Row]:
    if before is not None and not (before.isascii() and before.isdigit() and len(before) < 19):
        raise ValueError("position")
    small = cx.execute("SELECT COUNT(*) FROM (SELECT 1 FROM messages WHERE account_id = ? LIMIT ?)",
                       (account_id, SMALL_ACCOUNT)).fetchone()[0] < SMALL_ACCOUNT
    indexed = [] if small else [f"body : {_fts_phrase(t)}" for t in terms if len(t) >= 3]
    if digits and not small:
        # The digits column holds only bodies where separators join digits (0696_message_search_digits.sql); any
        # other body's digit runs are in its body column as they are.
        indexed.append(f"(digits : {_fts_phrase(digits)} OR body : {_fts_phrase(digits)})")
    args: list[Any]  # text, and the FTS rowid bound
    where, args = ["m.account_id = ?"], [account_id]
    for term in (terms if small else [t for t in terms if len(t) < 3]):
        where.append("m.body LIKE ? ESCAPE '\\'")
        args.append(f"%{escape_like(term)}%")
    if digits and small:
        where.append(f"{_without_separators('m.body')} LIKE ?")
        args.append(f"%{digits}%")
    if indexed:
        # FTS5 walks its matches by rowid, newest first, and stops at the limit: a common word costs no more
        # than a rare one.
        select = ("SELECT m.id, m.contact_id, m.body, m.created_at, s.rowid AS position FROM message_search s"
                  " JOIN messages m ON m.rowid = s.rowid WHERE message_search MATCH ?")
        args.insert(0, " AND ".join(indexed))
        order = "s.rowid"
    else:
        # A small account: its messages by its index. Otherwise only 2-character terms, with no trigram to look up:
        # the table newest first, stopping at the page (a common pair costs little, a rare one a walk over the whole
        # table); "+" keeps the planner from reading the account's every message by its index and sorting them.
        select = "SELECT m.id, m.contact_id, m.body, m.created_at, m.rowid AS position FROM messages m WHERE 1 = 1"
        if not small:
            where[0] = "+m.account_id = ?"
        order = "m.rowid"
    if before is not None:
        where.append(f"{order} < ?")
        args.append(int(before))
    rows = fetch_all(cx, f"{select} AND {' AND '.join(where)} ORDER BY {order} DESC LIMIT ?", (*args, limit))
    for row in rows:
        row["position"] = str(row["position"])
    return rows


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
