"""Contact lists: creation, keyset-paginated listing of lists and members, idempotent membership."""
from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from common.errors import Invalid
from common.ids import new_id, now_iso
from storage import lists as store
from storage.contacts import public_contact
from storage.interface import Store

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_NAME_LENGTH = 200
_CURSOR_PREFIX = "k1:"  # versioned so the cursor's content can change without breaking old clients

public_list = store.public_list
list_not_found = store.list_not_found


def encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode((_CURSOR_PREFIX + last_id).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    """The id after which the next page starts, or None for the first page; Invalid for a bad cursor."""
    if not cursor:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, ValueError):
        text = ""
    if not text.startswith(_CURSOR_PREFIX) or len(text) == len(_CURSOR_PREFIX):
        raise Invalid("cursor is not valid: pass the nextCursor of a previous page unchanged")
    return text[len(_CURSOR_PREFIX):]


def parse_limit(text: str | None) -> int:
    """?limit= absent is the default; anything but an integer 1-200 in ASCII digits is Invalid (an empty
    value too: the OpenAPI document says integer; int() alone would also take "+5", "1_0" or "٣")."""
    if text is None:
        return DEFAULT_LIMIT
    try:
        limit = int(text) if text.isascii() and text.isdigit() else 0
    except ValueError:  # more digits than int() converts
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise Invalid(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return limit


async def keyset_page(fetch: Callable[[Any, int], Awaitable[Sequence[Mapping[str, Any]]]], limit_text: str | None, cursor: str | None, shape: Callable[[Any], Any], *, integer_ids: bool = False) -> dict[str, Any]:
    """One page as {data, nextCursor}: fetch(after_id, n) is asked for one row more than the limit.
    integer_ids: the rows' ids are integers (a cursor that does not hold one is Invalid)."""
    limit = parse_limit(limit_text)
    after: str | int | None
    after = decode_cursor(cursor)
    if integer_ids and after is not None:
        if not (after.isascii() and after.isdigit() and len(after) < 19):
            raise Invalid("cursor is not valid: pass the nextCursor of a previous page unchanged")
        after = int(after)
    rows = await fetch(after, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return {"data": [shape(r) for r in rows],
            "nextCursor": encode_cursor(str(rows[-1]["id"])) if more else None}


def _valid_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise Invalid("name is required and cannot be blank", field="name")
    if len(name) > MAX_NAME_LENGTH:
        raise Invalid(f"name is longer than {MAX_NAME_LENGTH} characters", field="name")
    return name


async def create_list(db: Store, account_id: str, name: str) -> dict[str, Any]:
    """A new list; Conflict naming the account's list that already has this name (compared without case and
    surrounding spaces)."""
    name = _valid_name(name)
    row = await store.insert_list(db, {"id": new_id("lst"), "account_id": account_id, "name": name,
                                       "created_at": now_iso()})
    return public_list(row)


async def get_list(db: Store, account_id: str, list_id: str) -> dict[str, Any]:
    row = await store.get_list(db, account_id, list_id)
    if row is None:
        raise list_not_found(list_id)
    return public_list(row)


async def list_lists(db: Store, account_id: str, *, limit: str | None = None, cursor: str | None = None) -> dict[str, Any]:
    return await keyset_page(lambda after, n: store.page_lists(db, account_id, after, n), limit, cursor, public_list)


async def list_members(db: Store, account_id: str, list_id: str, *, limit: str | None = None, cursor: str | None = None) -> dict[str, Any]:
    await get_list(db, account_id, list_id)
    return await keyset_page(lambda after, n: store.page_members(db, account_id, list_id, after, n),
                       limit, cursor, public_contact)


async def add_contact(db: Store, account_id: str, list_id: str, contact_id: str) -> dict[str, Any]:
    """Spec §4.3: add an existing contact to an existing list; adding again changes nothing (added: false)."""
    contact_id = (contact_id or "").strip()
    if not contact_id:
        raise Invalid("contactId is required")
    added = await store.add_member(db, account_id, list_id, contact_id, now_iso())
    return {"success": True, "listId": list_id, "contactId": contact_id, "added": added}


async def lists_of_contact(db: Store, account_id: str, contact_id: str) -> list[dict[str, Any]]:
    """The account's lists this contact belongs to, as the API shows lists."""
    return [public_list(row) for row in await store.lists_of_contact(db, account_id, contact_id)]


async def rename_list(db: Store, account_id: str, list_id: str, name: str) -> dict[str, Any]:
    """Rename a list; LIST_NOT_FOUND, or Conflict naming the list that already has the name."""
    return public_list(await store.rename_list(db, account_id, list_id, _valid_name(name)))


async def delete_list(db: Store, account_id: str, list_id: str, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Delete a list and its memberships (never its contacts): {deleted: true, id, removedMemberships}."""
    removed = await store.delete_list(db, account_id, list_id, now_iso(), by)
    return {"deleted": True, "id": list_id, "removedMemberships": removed}


async def remove_contacts(db: Store, account_id: str, list_id: str, contact_ids: Sequence[str]) -> int:
    """Take these contacts off the list (those not on it are skipped); the number removed."""
    return await store.remove_members(db, account_id, list_id, sorted(set(contact_ids)))


async def remove_contact(db: Store, account_id: str, list_id: str, contact_id: str) -> dict[str, Any]:
    """DELETE /lists/{id}/contacts/{contactId}: {success, listId, contactId, removed} (false when it was not a
    member: idempotent)."""
    removed = await remove_contacts(db, account_id, list_id, [contact_id])
    return {"success": True, "listId": list_id, "contactId": contact_id, "removed": removed == 1}
