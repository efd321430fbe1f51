"""Canned replies (issue 21): an account's saved replies, each with a short code (typed as /code in the
thread's reply box) and a body whose {{firstName}}-style placeholders are a campaign's: the same parser
refuses the same unknown placeholders, the same renderer fills them in for one contact."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from common.errors import Invalid
from common.ids import new_id, now_iso
from common.placeholders import compile_body, render
from storage import canned_replies as store, contacts as contact_store
from storage.interface import Store

CODE = re.compile(r"[A-Za-z0-9_-]{1,40}")
MAX_BODY_LENGTH = 4000
CODE_RULE = "code must be 1 to 40 letters, digits, - or _ (typed as /code in the reply box)"


def _code(code: Any) -> str:
    if not CODE.fullmatch(code or ""):
        raise Invalid(CODE_RULE, field="code")
    return code


def _body(body: Any) -> str:
    if body is None or not body.strip():
        raise Invalid("body is required and cannot be blank", field="body")
    if len(body) > MAX_BODY_LENGTH:
        raise Invalid(f"body is longer than {MAX_BODY_LENGTH} characters", field="body")
    compile_body(body)  # Invalid naming the field for an unknown placeholder
    return body


async def create(db: Store, account_id: str, *, code: Any, body: Any, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A new canned reply: Invalid naming the field, Conflict when the account has the code already."""
    row = {"id": new_id("cr"), "account_id": account_id, "code": _code(code), "body": _body(body),
           "created_at": now_iso()}
    return await store.insert_canned_reply(db, row, by)


async def list_all(db: Store, account_id: str) -> dict[str, Any]:
    """{data: [...]} every canned reply of the account, by code."""
    return {"data": [store.public_canned_reply(r) for r in await store.list_canned_replies(db, account_id)]}


async def get(db: Store, account_id: str, reply_id: str) -> dict[str, Any]:
    row = await store.get_canned_reply(db, account_id, reply_id)
    if row is None:
        raise store.canned_reply_not_found(reply_id)
    return store.public_canned_reply(row)


async def update(db: Store, account_id: str, reply_id: str, *, code: Any = None, body: Any = None, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Change the code and/or the body (None: unchanged); at least one of them."""
    changes = {}
    if code is not None:
        changes["code"] = _code(code)
    if body is not None:
        changes["body"] = _body(body)
    if not changes:
        raise Invalid("give code or body (or both) to change")
    return await store.update_canned_reply(db, account_id, reply_id, changes, now_iso(), by)


async def delete(db: Store, account_id: str, reply_id: str, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return await store.delete_canned_reply(db, account_id, reply_id, by)


async def rendered_for_contact(db: Store, account_id: str, contact_id: str) -> list[dict[str, Any]]:
    """[{id, code, body}] every canned reply with its placeholders filled in for this contact (the reply box's
    /code picker inserts these). CONTACT_NOT_FOUND unless the contact is the account's."""
    contact = await contact_store.get_contact(db, account_id, contact_id)
    if contact is None:
        raise contact_store.contact_not_found(contact_id)
    return [{"id": r["id"], "code": r["code"], "body": render(compile_body(r["body"]), contact)}
            for r in await store.list_canned_replies(db, account_id)]
