"""Private notes (issue 21): notes the team writes in a contact's thread. Never sent, never a message (their
own table: no outbox row, no conversation counter, no reply webhook), shown in the thread's timeline by
time, live to the account's other open pages (note.created, note.deleted). Deleted by their author or an
admin (an API key acts as the account: it may delete any note)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from common.errors import Invalid
from common.ids import new_id, now_iso
from services.lists import keyset_page
from services.users import author_name
from storage import notes as store
from storage.contacts import contact_not_found, get_contact
from storage.interface import Store

MAX_BODY_LENGTH = 4000
THREAD_NOTES_LIMIT = 500  # notes shown among one page of messages at most
ADMIN_ROLES = ("owner", "admin")


def _body(body: Any) -> str:
    if body is None or not body.strip():
        raise Invalid("body is required and cannot be blank", field="body")
    if len(body) > MAX_BODY_LENGTH:
        raise Invalid(f"body is longer than {MAX_BODY_LENGTH} characters", field="body")
    return body


async def add(db: Store, account_id: str, contact_id: str, body: Any, *, user: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A note in the contact's thread, by this UI user (None: the API). CONTACT_NOT_FOUND unless the
    contact is the account's. The note {id, contactId, body, author, authorEmail, createdAt}."""
    row = {"id": new_id("note"), "account_id": account_id, "contact_id": contact_id, "body": _body(body),
           "author": "user" if user else "api", "author_user_id": user["id"] if user else None,
           "created_at": now_iso()}
    return await store.insert_note(db, row)


async def list_page(db: Store, account_id: str, contact_id: str, *, limit: str | None = None, cursor: str | None = None) -> dict[str, Any]:
    """{data: notes newest first, nextCursor}; CONTACT_NOT_FOUND for another account's contact."""
    if await get_contact(db, account_id, contact_id) is None:
        raise contact_not_found(contact_id)
    return await keyset_page(lambda before, n: store.page(db, account_id, contact_id, before=before, limit=n),
                             limit, cursor, store.public_note)


def may_delete_any(user: Mapping[str, Any]) -> bool:
    """Whether a UI user may delete others' notes: an admin or owner. Before roles exist every user is the
    account's owner (no role key)."""
    return user.get("role", "owner") in ADMIN_ROLES


async def delete(db: Store, account_id: str, contact_id: str, note_id: str, *, user: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Delete a note: by its author or an admin (user None: the API key, the account itself). Forbidden
    otherwise; NOT_FOUND unless the note is in this contact's thread."""
    only = None if user is None or may_delete_any(user) else user["id"]
    return await store.delete_note(db, account_id, contact_id, note_id, only_author_user_id=only)


def note_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """A note shaped for the thread page (templates/_note_item.html)."""
    return {"kind": "note", "id": row["id"], "body": row["body"], "created_at": row["created_at"],
            "author_user_id": row["author_user_id"],
            "author_label": (f"Note by {author_name(row['author_email'], row['author_as'], row['author_user_name'])}"
                             if row.get("author_email") else "Note by API")}


async def get_view(db: Store, account_id: str, contact_id: str, note_id: str) -> dict[str, Any]:
    row = await store.get_note(db, account_id, note_id)
    if row is None or row["contact_id"] != contact_id:
        raise store.note_not_found(note_id)
    return note_view(row)


def _time_digits(item_id: str) -> str:
    """The time-ordered part of a message or note id (after the prefix): ids of both sort together by it."""
    return item_id.partition("_")[2]


async def with_notes(db: Store, account_id: str, contact_id: str, messages: Sequence[Mapping[str, Any]], *, has_earlier: bool, before: str | None) -> list[Any]:
    """A page of thread messages (oldest first) with the contact's notes of the same stretch of time merged in
    by time: from the page's oldest message (from the start when no page is earlier) up to ``before`` (the
    message id the page stops at; None: up to now)."""
    low = "note_" + _time_digits(messages[0]["id"]) if has_earlier and messages else None
    high = "note_" + _time_digits(before) if before else None
    rows = await store.between(db, account_id, contact_id, low, high, THREAD_NOTES_LIMIT)
    timeline = list(messages) + [note_view(r) for r in rows]
    timeline.sort(key=lambda item: _time_digits(item["id"]))
    return timeline
