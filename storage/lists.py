"""SQL for contact lists and their members; adding a member queues contact.tagged in the same transaction."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from common.errors import Conflict, NotFound
from storage.audit import record_by
from storage.contacts import COLUMNS as CONTACT_COLUMNS, contact_not_found, get_contact, public_contact
from storage.db import fetch_one, reads, writes
from storage.interface import Connection, Row
from storage.outbox import enqueue_notification_in_tx

_COLUMNS = "id, account_id, name, contact_count, created_at"
_CONTACT_COLUMNS = ", ".join("c." + c for c in CONTACT_COLUMNS)
# A deleted list keeps its row (campaigns refer to it) but is no list of the account's any more.
_LIVE = "deleted_at IS NULL"


def name_key(name: str) -> str:
    """What list names are compared by (unique per account): without surrounding spaces and case."""
    return name.strip().casefold()


def list_not_found(list_id: str) -> NotFound:
    return NotFound(f"no list with id {list_id}", code="LIST_NOT_FOUND")


def public_list(row: Mapping[str, Any]) -> dict[str, Any]:
    """The list as the API and notifications show it: {id, name, contactCount, createdAt}."""
    return {"id": row["id"], "name": row["name"], "contactCount": row["contact_count"],
            "createdAt": row["created_at"]}


def _check_name_free(cx: Connection, account_id: str, name: str, list_id: str | None = None) -> None:
    """Conflict naming the account's other list that has this name (compared by name_key), if one does."""
    other = cx.execute("SELECT id, name FROM lists WHERE account_id = ? AND name_key = ? AND id != ?",
                       (account_id, name_key(name), list_id or "")).fetchone()
    if other is not None:
        raise Conflict(f"list {other[0]} is already named {other[1]!r}", existing_id=other[0], field="name")


@writes
def insert_list(cx: Connection, row: Mapping[str, Any]) -> dict[str, Any]:
    """Insert a list; Conflict (naming it) when the account has a list of this name."""
    _check_name_free(cx, row["account_id"], row["name"])
    cx.execute("INSERT INTO lists (id, account_id, name, name_key, contact_count, created_at)"
               " VALUES (?, ?, ?, ?, 0, ?)",
               (row["id"], row["account_id"], row["name"], name_key(row["name"]), row["created_at"]))
    return {**row, "contact_count": 0}


@reads
def get_list(cx: Connection, account_id: str, list_id: str) -> Row | None:
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM lists WHERE account_id = ? AND id = ? AND {_LIVE}",
                     (account_id, list_id))


def _live_list_in_tx(cx: Connection, account_id: str, list_id: str) -> Row:
    lst = get_list.sync(cx, account_id, list_id)
    if lst is None:
        raise list_not_found(list_id)
    return lst


@writes
def rename_list(cx: Connection, account_id: str, list_id: str, name: str) -> dict[str, Any]:
    """Rename the account's list (LIST_NOT_FOUND, Conflict naming the list that has the name); the list."""
    lst = _live_list_in_tx(cx, account_id, list_id)
    _check_name_free(cx, account_id, name, list_id)
    cx.execute("UPDATE lists SET name = ?, name_key = ? WHERE account_id = ? AND id = ?",
               (name, name_key(name), account_id, list_id))
    return {**lst, "name": name}


@writes
def delete_list(cx: Connection, account_id: str, list_id: str, now: str, by: Mapping[str, Any] | None = None) -> int:
    """Delete the account's list and its memberships, never its contacts; the row stays, marked deleted and
    its name freed, because campaigns refer to it (their recipients were fixed when they started). Conflict
    while a draft or scheduled campaign, which has not fixed its recipients yet, is to send to it. Returns the
    number of memberships removed."""
    _live_list_in_tx(cx, account_id, list_id)
    scheduled = cx.execute("SELECT id, status FROM campaigns WHERE account_id = ? AND list_id = ?"
                           " AND status IN ('draft', 'scheduled') ORDER BY id LIMIT 1", (account_id, list_id)).fetchone()
    if scheduled is not None:
        what = "a draft that sends" if scheduled[1] == "draft" else "scheduled to send"
        raise Conflict(f"campaign {scheduled[0]} is {what} to this list: cancel it or let it start first",
                       existing_id=scheduled[0])
    removed = cx.execute("DELETE FROM list_members WHERE list_id = ?", (list_id,)).rowcount
    cx.execute("UPDATE lists SET deleted_at = ?, name_key = NULL, contact_count = 0 WHERE account_id = ? AND id = ?",
               (now, account_id, list_id))
    record_by(cx, by, account_id=account_id, action="list.deleted", subject_id=list_id,
              detail={"membersRemoved": removed})
    return removed


@writes
def remove_members(cx: Connection, account_id: str, list_id: str, contact_ids: Sequence[str]) -> int:
    """Remove these contacts from the account's list (LIST_NOT_FOUND); those not on it are skipped.
    Returns the number removed."""
    _live_list_in_tx(cx, account_id, list_id)
    removed = 0
    for start in range(0, len(contact_ids), 500):
        chunk = contact_ids[start:start + 500]
        removed += cx.execute(f"DELETE FROM list_members WHERE list_id = ? AND contact_id IN"
                              f" ({', '.join('?' * len(chunk))})", (list_id, *chunk)).rowcount
    if removed:
        cx.execute("UPDATE lists SET contact_count = contact_count - ? WHERE account_id = ? AND id = ?",
                   (removed, account_id, list_id))
    return removed


@reads
def page_lists(cx: Connection, account_id: str, after_id: str | None, limit: int) -> list[Row]:
    """Up to ``limit`` lists with id > after_id (keyset on the time-ordered id), oldest first."""
    return [dict(r) for r in cx.execute(
        f"SELECT {_COLUMNS} FROM lists WHERE account_id = ? AND id > ? AND {_LIVE} ORDER BY id LIMIT ?",
        (account_id, after_id or "", limit))]


@reads
def page_members(cx: Connection, account_id: str, list_id: str, after_contact_id: str | None, limit: int) -> list[Row]:
    """Up to ``limit`` contacts of the list with contact id > after_contact_id, in contact-id order."""
    return [dict(r) for r in cx.execute(
        f"SELECT {_CONTACT_COLUMNS} FROM list_members m JOIN contacts c ON c.id = m.contact_id"
        " WHERE m.list_id = ? AND m.contact_id > ? AND c.account_id = ? ORDER BY m.contact_id LIMIT ?",
        (list_id, after_contact_id or "", account_id, limit))]


@reads
def lists_of_contact(cx: Connection, account_id: str, contact_id: str) -> list[Row]:
    """The account's lists the contact is a member of, oldest list first."""
    return [dict(r) for r in cx.execute(
        "SELECT l.id, l.account_id, l.name, l.contact_count, l.created_at FROM list_members m"
        " JOIN lists l ON l.id = m.list_id WHERE m.contact_id = ? AND l.account_id = ? AND l.deleted_at IS NULL"
        " ORDER BY l.id",
        (contact_id, account_id))]


@reads
def count_memberships(cx: Connection, list_id: str, contact_id: str) -> int:
    return cx.execute("SELECT COUNT(*) FROM list_members WHERE list_id = ? AND contact_id = ?",
                      (list_id, contact_id)).fetchone()[0]


@writes
def add_member(cx: Connection, account_id: str, list_id: str, contact_id: str, now: str) -> bool:
    """Add the contact to the list unless already there; returns whether it was added. NotFound
    (LIST_NOT_FOUND, CONTACT_NOT_FOUND) when either is not this account's: nothing is written."""
    lst = _live_list_in_tx(cx, account_id, list_id)
    contact = get_contact.sync(cx, account_id, contact_id)
    if contact is None:
        raise contact_not_found(contact_id)
    return add_member_in_tx(cx, account_id, lst, contact, now)[0]


def add_member_in_tx(cx: Connection, account_id: str, lst: Mapping[str, Any], contact: Mapping[str, Any], now: str) -> tuple[bool, Mapping[str, Any]]:
    """Add a contact row to a list row, both this account's, unless already there: a new membership bumps
    the list's count and queues contact.tagged, in this transaction. Returns (added, the list now)."""
    inserted = cx.execute("INSERT INTO list_members (list_id, contact_id, added_at) VALUES (?, ?, ?)"
                          " ON CONFLICT (list_id, contact_id) DO NOTHING",
                          (lst["id"], contact["id"], now)).rowcount == 1
    if inserted:
        cx.execute("UPDATE lists SET contact_count = contact_count + 1 WHERE account_id = ? AND id = ?",
                   (account_id, lst["id"]))
        lst = {**lst, "contact_count": lst["contact_count"] + 1}
        enqueue_notification_in_tx(cx, account_id, "contact.tagged", {
            "contact": public_contact(contact), "list": {"id": lst["id"], "name": lst["name"]},
            "addedAt": now})
    return inserted, lst
