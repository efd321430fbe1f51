"""SQL for private notes: the team's notes in a contact's thread, in a table of their own (never messages, so
never in the outbox or a conversation's counts); each insert and delete emits its live event in its own
transaction."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from common.errors import Forbidden, NotFound
from storage.contacts import contact_not_found
from storage.db import fetch_all, fetch_one, reads, writes
from storage.events import NOTE_CREATED, NOTE_DELETED, emit_in_tx
from storage.interface import Connection, Row
from storage.users import author_sql

_AUTHOR, _AUTHOR_JOINS = author_sql("n")
_SELECT = ("SELECT n.id, n.account_id, n.contact_id, n.body, n.author, n.author_user_id, n.created_at,"
           f" {_AUTHOR} FROM notes n{_AUTHOR_JOINS}")


def note_not_found(note_id: str) -> NotFound:
    return NotFound(f"no note with id {note_id}")


def public_note(row: Mapping[str, Any]) -> dict[str, Any]:
    """A note as the API shows it: {id, contactId, body, author, authorEmail, createdAt}."""
    return {"id": row["id"], "contactId": row["contact_id"], "body": row["body"], "author": row["author"],
            "authorEmail": row.get("author_email"), "createdAt": row["created_at"]}


def _get_in_tx(cx: Connection, account_id: str, note_id: str) -> Row | None:
    return fetch_one(cx, f"{_SELECT} WHERE n.account_id = ? AND n.id = ?", (account_id, note_id))


get_note = reads(_get_in_tx)


@writes
def insert_note(cx: Connection, row: Mapping[str, Any]) -> dict[str, Any]:
    """Insert {id, account_id, contact_id, body, author, author_user_id, created_at} and emit note.created;
    CONTACT_NOT_FOUND unless the contact is the account's. Returns the public form."""
    if cx.execute("SELECT 1 FROM contacts WHERE account_id = ? AND id = ?",
                  (row["account_id"], row["contact_id"])).fetchone() is None:
        raise contact_not_found(row["contact_id"])
    cx.execute("INSERT INTO notes (id, account_id, contact_id, body, author, author_user_id, created_at)"
               " VALUES (?, ?, ?, ?, ?, ?, ?)", (row["id"], row["account_id"], row["contact_id"], row["body"],
                                                 row["author"], row["author_user_id"], row["created_at"]))
    emit_in_tx(cx, row["account_id"], NOTE_CREATED, {"noteId": row["id"], "contactId": row["contact_id"]})
    return public_note(cast(Row, _get_in_tx(cx, row["account_id"], row["id"])))  # inserted just above


def _thread_notes(cx: Connection, account_id: str, contact_id: str, bounds: Sequence[tuple[str, str]], order: str, limit: int) -> list[Row]:
    """The contact's notes within bounds [(SQL condition on n.id, value)], in order, at most limit. Bounds are
    left out rather than stood in for by sentinel ids, whose order depends on PostgreSQL's collation."""
    where = "".join(f" AND n.id {condition} ?" for condition, _ in bounds)
    return fetch_all(cx, f"{_SELECT} WHERE n.account_id = ? AND n.contact_id = ?{where} ORDER BY n.id {order}"
                         " LIMIT ?", (account_id, contact_id, *[value for _, value in bounds], limit))


def all_of_contact_in_tx(cx: Connection, account_id: str, contact_id: str) -> list[Row]:
    """Every note of the contact's thread, oldest first (a person's data export)."""
    return fetch_all(cx, f"{_SELECT} WHERE n.account_id = ? AND n.contact_id = ? ORDER BY n.id",
                     (account_id, contact_id))


@reads
def page(cx: Connection, account_id: str, contact_id: str, *, before: str | None = None, limit: int) -> list[Row]:
    """Up to ``limit`` notes of the contact's thread, newest first, older than the note id ``before``."""
    return _thread_notes(cx, account_id, contact_id, [("<", before)] if before else [], "DESC", limit)


@reads
def between(cx: Connection, account_id: str, contact_id: str, low: str | None, high: str | None, limit: int) -> list[Row]:
    """The contact's notes with low <= id < high (note ids; None: unbounded), oldest first, at most limit: the
    stretch of the timeline a page of messages covers (ids are time-ordered, as message ids are)."""
    bounds = [(">=", low)] if low else []
    return _thread_notes(cx, account_id, contact_id, bounds + ([("<", high)] if high else []), "ASC", limit)


@writes
def delete_note(cx: Connection, account_id: str, contact_id: str, note_id: str, *, only_author_user_id: str | None = None) -> dict[str, Any]:
    """Delete a note of the contact's thread and emit note.deleted. only_author_user_id: the caller may delete
    only a note written by this user (Forbidden otherwise; None: any note). Returns {deleted, id}."""
    note = _get_in_tx(cx, account_id, note_id)
    if note is None or note["contact_id"] != contact_id:
        raise note_not_found(note_id)
    if only_author_user_id is not None and note["author_user_id"] != only_author_user_id:
        raise Forbidden("only the note's author or an admin can delete it")
    cx.execute("DELETE FROM notes WHERE account_id = ? AND id = ?", (account_id, note_id))
    emit_in_tx(cx, account_id, NOTE_DELETED, {"noteId": note_id, "contactId": contact_id})
    return {"deleted": True, "id": note_id}
