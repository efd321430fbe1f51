"""SQL for canned replies: an account's saved replies, each with a code unique per account without case."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.errors import Conflict, NotFound
from storage.audit import record_by
from storage.db import fetch_all, fetch_one, reads, writes
from storage.interface import Connection, Row

_COLUMNS = "id, account_id, code, body, created_at, updated_at"


def canned_reply_not_found(reply_id: str) -> NotFound:
    return NotFound(f"no canned reply with id {reply_id}")


def public_canned_reply(row: Mapping[str, Any]) -> dict[str, Any]:
    """A canned reply as the API shows it: {id, code, body, createdAt, updatedAt}."""
    return {"id": row["id"], "code": row["code"], "body": row["body"], "createdAt": row["created_at"],
            "updatedAt": row["updated_at"]}


def _check_code_free(cx: Connection, account_id: str, code: str, reply_id: str = "") -> None:
    """Conflict naming the account's other canned reply with this code (compared without case)."""
    other = cx.execute("SELECT id, code FROM canned_replies WHERE account_id = ? AND code_key = ? AND id != ?",
                       (account_id, code.lower(), reply_id)).fetchone()
    if other is not None:
        raise Conflict(f"canned reply {other[0]} already has the code {other[1]!r}", existing_id=other[0],
                       field="code")


@writes
def insert_canned_reply(cx: Connection, row: Mapping[str, Any], by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Insert {id, account_id, code, body, created_at}; Conflict when the code is taken. Returns the public form."""
    _check_code_free(cx, row["account_id"], row["code"])
    cx.execute("INSERT INTO canned_replies (id, account_id, code, code_key, body, created_at, updated_at)"
               " VALUES (?, ?, ?, ?, ?, ?, ?)", (row["id"], row["account_id"], row["code"], row["code"].lower(),
                                                  row["body"], row["created_at"], row["created_at"]))
    record_by(cx, by, account_id=row["account_id"], action="canned_reply.created", subject_id=row["id"],
              detail={"code": row["code"]})
    return public_canned_reply({**row, "updated_at": row["created_at"]})


@reads
def get_canned_reply(cx: Connection, account_id: str, reply_id: str) -> Row | None:
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM canned_replies WHERE account_id = ? AND id = ?",
                     (account_id, reply_id))


@reads
def list_canned_replies(cx: Connection, account_id: str) -> list[Row]:
    """Every canned reply of the account, by code (an account keeps tens, not thousands)."""
    return fetch_all(cx, f"SELECT {_COLUMNS} FROM canned_replies WHERE account_id = ? ORDER BY code_key",
                     (account_id,))


@writes
def update_canned_reply(cx: Connection, account_id: str, reply_id: str, changes: Mapping[str, Any], now: str, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Change code and/or body (changes: {code?, body?}); NotFound, Conflict on a taken code. The public form."""
    row = get_canned_reply.sync(cx, account_id, reply_id)
    if row is None:
        raise canned_reply_not_found(reply_id)
    row = {**row, **changes, "updated_at": now}
    if "code" in changes:
        _check_code_free(cx, account_id, row["code"], reply_id)
    cx.execute("UPDATE canned_replies SET code = ?, code_key = ?, body = ?, updated_at = ? WHERE account_id = ?"
               " AND id = ?", (row["code"], row["code"].lower(), row["body"], now, account_id, reply_id))
    record_by(cx, by, account_id=account_id, action="canned_reply.updated", subject_id=reply_id,
              detail={"code": row["code"], "changed": sorted(changes)})
    return public_canned_reply(row)


@writes
def delete_canned_reply(cx: Connection, account_id: str, reply_id: str, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Delete the account's canned reply; NotFound unless there was one. Returns {deleted, id}."""
    if cx.execute("DELETE FROM canned_replies WHERE account_id = ? AND id = ?", (account_id, reply_id)).rowcount == 0:
        raise canned_reply_not_found(reply_id)
    record_by(cx, by, account_id=account_id, action="canned_reply.deleted", subject_id=reply_id)
    return {"deleted": True, "id": reply_id}
