"""SQL for contacts. The *_in_tx functions are plain sync functions for composing transactions."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, cast

from common.errors import Conflict, Invalid, NotFound
from common.ids import new_id
from storage.audit import record_by
from storage.db import fetch_all, fetch_one, reads, writes
from storage.dialect import dialect_of
from storage.interface import Connection, Row
from storage.outbox import enqueue_notification_in_tx
from storage.rows import ContactRow

COLUMNS = ("id", "account_id", "first_name", "last_name", "phone", "email", "opted_out", "opt_out_at",
           "opt_out_via", "opt_out_by", "created_at", "tags")
_COLUMNS = ", ".join(COLUMNS)
FILLABLE = ("first_name", "last_name", "phone", "email")
MAX_TAGS = 50  # per contact (issue 41; services/contact_fields.py normalize_tags)


def tags_text(tags: Iterable[str]) -> str:
    """Normalised tags (a sorted list) as the tags column holds them: compact JSON."""
    return json.dumps(sorted(tags), ensure_ascii=False, separators=(",", ":"))


def tags_of(row: Mapping[str, Any]) -> list[str]:
    """A contact row's tags as a list (a row built before its insert may have none)."""
    return json.loads(row.get("tags") or "[]")


def tag_like(tag: str) -> str:
    """A LIKE pattern (backslash escapes) matching the tags column of a contact that has this normalised tag: its
    JSON string element (tags hold no quote or backslash, so an element cannot match across two)."""
    escaped = json.dumps(tag, ensure_ascii=False).replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def contact_not_found(contact_id: str) -> NotFound:
    return NotFound(f"no contact with id {contact_id}", code="CONTACT_NOT_FOUND")


def public_contact(row: Mapping[str, Any]) -> dict[str, Any]:
    """The contact as the API and notifications show it: {id, firstName, lastName, phone, email, optedOut,
    optOutChange, tags, createdAt}; optOutChange says how optedOut last changed: {at, via: reply|user|api, by}."""
    change = {"at": row["opt_out_at"], "via": row.get("opt_out_via"), "by": row.get("opt_out_by")} \
        if row.get("opt_out_at") else None
    return {"id": row["id"], "firstName": row.get("first_name"), "lastName": row.get("last_name"),
            "phone": row.get("phone"), "email": row.get("email"), "optedOut": bool(row.get("opted_out")),
            "optOutChange": change, "tags": tags_of(row), "createdAt": row["created_at"]}


def emit_created_in_tx(cx: Connection, row: Mapping[str, Any]) -> str | None:
    """Queue contact.created for a contact inserted in this transaction (only if the account listens)."""
    return enqueue_notification_in_tx(cx, row["account_id"], "contact.created", public_contact(row))


@reads
def get_contact(cx: Connection, account_id: str, contact_id: str) -> ContactRow | None:
    return cast("ContactRow | None", fetch_one(cx, f"SELECT {_COLUMNS} FROM contacts WHERE account_id = ? AND id = ?",
                                               (account_id, contact_id)))


@reads
def find_by_phone(cx: Connection, account_id: str, phone: str) -> ContactRow | None:
    return cast("ContactRow | None", fetch_one(cx, f"SELECT {_COLUMNS} FROM contacts WHERE account_id = ? AND phone = ?",
                                               (account_id, phone)))


@reads
def find_by_email(cx: Connection, account_id: str, email: str) -> ContactRow | None:
    """The oldest contact with this (case-folded) email."""
    return cast("ContactRow | None", fetch_one(cx, f"SELECT {_COLUMNS} FROM contacts WHERE account_id = ? AND email = ?"
                                               " ORDER BY id LIMIT 1", (account_id, email)))


def insert_contact_in_tx(cx: Connection, contact: Mapping[str, Any]) -> Mapping[str, Any]:
    cx.execute("INSERT INTO contacts (id, account_id, first_name, last_name, phone, email, opted_out, created_at,"
               " tags) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (contact["id"], contact["account_id"], contact.get("first_name"), contact.get("last_name"),
                contact.get("phone"), contact.get("email"), int(bool(contact.get("opted_out"))),
                contact["created_at"], contact.get("tags") or "[]"))
    return contact


def fill_blanks_in_tx(cx: Connection, existing: Mapping[str, Any], values: Mapping[str, Any]) -> Mapping[str, Any]:
    """Set the existing contact's empty fields from values; never overwrite. Returns the updated row and queues
    contact.updated when anything was filled. A phone or email is only filled when no other contact of the
    account has it (one rule with update_contact's: a phone or email names one contact). Tags are added to the
    existing ones (Invalid, nothing written, beyond MAX_TAGS)."""
    account_id = existing["account_id"]
    changes = {f: values[f] for f in FILLABLE if values.get(f) and not existing.get(f)}
    tags = set(tags_of(existing)) | set(tags_of(values))
    if len(tags) > len(tags_of(existing)):
        if len(tags) > MAX_TAGS:
            raise Invalid(f"tags: the contact would have {len(tags)} tags; a contact has at most {MAX_TAGS}",
                          field="tags")
        changes["tags"] = tags_text(tags)
    for column in ("phone", "email"):
        if column in changes:
            lock_in_tx(cx, account_id, column, changes[column])
            if _holder_of(cx, account_id, column, changes[column], existing["id"]):
                del changes[column]
    if not changes:
        return existing
    assignments = ", ".join(f"{f} = ?" for f in changes)
    cx.execute(f"UPDATE contacts SET {assignments} WHERE account_id = ? AND id = ?",
               (*changes.values(), account_id, existing["id"]))
    filled = {**existing, **changes}
    enqueue_notification_in_tx(cx, account_id, "contact.updated", public_contact(filled))
    return filled


def lock_in_tx(cx: Connection, account_id: str, column: str, value: str) -> bool:
    """Hold the account's phone or email (column) value until COMMIT, so that the check-then-insert (or
    update) that follows is atomic against every other transaction's on the same value (storage/dialect.py
    lock: SQLite's single writer needs none). True when a lock was taken."""
    return dialect_of(cx).lock(cx, f"contact:{account_id}:{column}:{value}")


def find_or_create_in_tx(cx: Connection, contact: Mapping[str, Any], *, refuse_taken_email: bool = True) -> tuple[Mapping[str, Any], bool]:
    """Phone first, then (with no phone) email: returns (row, created). The check and the insert are
    atomic against every other write (lock_in_tx). A created contact queues contact.created in the same
    transaction. A new contact's email that another contact has is refused as update_contact refuses it
    (Conflict naming the holder), or with refuse_taken_email False (an import's row) left out of the new
    contact, as fill_blanks_in_tx leaves out a taken phone."""
    existing = None
    account_id = contact["account_id"]
    key = "phone" if contact.get("phone") else "email" if contact.get("email") else None
    if key:
        lock_in_tx(cx, account_id, key, contact[key])
    if contact.get("phone"):
        existing = find_by_phone.sync(cx, account_id, contact["phone"])
    elif contact.get("email"):
        existing = find_by_email.sync(cx, account_id, contact["email"])
    if existing:
        return fill_blanks_in_tx(cx, existing, contact), False
    if key == "phone" and contact.get("email"):
        contact = without_taken_email_in_tx(cx, contact, refuse=refuse_taken_email)
    row = insert_contact_in_tx(cx, contact)
    emit_created_in_tx(cx, row)
    return row, True


def without_taken_email_in_tx(cx: Connection, contact: Mapping[str, Any], *, refuse: bool) -> Mapping[str, Any]:
    """The new contact as given when no contact of the account has its email; else Conflict naming the one
    that has it (refuse), or the contact without the email."""
    lock_in_tx(cx, contact["account_id"], "email", contact["email"])
    holder = _holder_of(cx, contact["account_id"], "email", contact["email"], contact["id"])
    if holder is None:
        return contact
    if refuse:
        raise Conflict(f"{holder} already has this email", existing_id=holder, field="email")
    return {**contact, "email": None}


find_or_create = writes(find_or_create_in_tx)


def take_reply_sequences_in_tx(cx: Connection, account_id: str, counts: Mapping[str, int]) -> dict[str, int]:
    """The next reply sequence numbers of contacts ({contact id: how many replies}), taken in this transaction
    (the row lock orders concurrent writers: numbers rise in commit order). Returns {contact id: the last
    number taken}; the replies of one contact number up to it."""
    taken: dict[str, int] = {}
    by_count: dict[int, list[str]] = {}
    for contact_id, count in counts.items():
        by_count.setdefault(count, []).append(contact_id)
    for count, ids in by_count.items():  # a batch: one statement (every contact once is the usual case)
        taken.update(cx.execute(f"UPDATE contacts SET reply_sequence = reply_sequence + ? WHERE account_id = ?"
                                f" AND id IN ({', '.join('?' for _ in ids)}) RETURNING id, reply_sequence",
                                (count, account_id, *ids)).fetchall())
    return taken


def search_clause(cx: Connection, alias: str, text_like: str | None, digits_like: str | None) -> tuple[str, list[str]]:
    """SQL (and its arguments) matching a contact by name or email (text_like, ASCII case ignored) or phone
    digits (digits_like): LIKE patterns made by the caller, with backslash as the escape character."""
    parts, args = [], []
    like = dialect_of(cx).like
    if text_like:
        parts += [f"(COALESCE({alias}.first_name, '') || ' ' || COALESCE({alias}.last_name, '')) {like} ? ESCAPE '\\'",
                  f"{alias}.email {like} ? ESCAPE '\\'"]
        args += [text_like, text_like]
    if digits_like:
        parts.append(f"{alias}.phone LIKE ? ESCAPE '\\'")
        args.append(digits_like)
    return ("(" + " OR ".join(parts) + ")", args) if parts else ("", [])


def _filters(tag: str | None, list_id: str | None) -> tuple[str, list[str], list[str], list[str]]:
    """(join, join_args, where, where_args): the JOIN and WHERE parts of a contact listing narrowed to a normalised
    tag and/or a list (whose account the caller checked)."""
    join, join_args = (" JOIN list_members m ON m.contact_id = c.id AND m.list_id = ?", [list_id]) if list_id \
        else ("", [])
    where, where_args = (["c.tags LIKE ? ESCAPE '\\'"], [tag_like(tag)]) if tag else ([], [])
    return join, join_args, where, where_args


@reads
def page_contacts(cx: Connection, account_id: str, *, text_like: str | None = None, digits_like: str | None = None, tag: str | None = None, before: str | None = None, limit: int = 50) -> list[Row]:
    """Up to limit + 1 contacts, newest first, created before the contact ``before``, matching the search and the
    tag."""
    _, _, where, args = _filters(tag, None)
    where, args = ["c.account_id = ?", *where], [account_id, *args]
    if before:
        where.append("c.id < ?")
        args.append(before)
    search, search_args = search_clause(cx, "c", text_like, digits_like)
    if search:
        where.append(search)
        args += search_args
    columns = ", ".join("c." + c for c in COLUMNS)
    return fetch_all(cx, f"SELECT {columns} FROM contacts c WHERE {' AND '.join(where)} ORDER BY c.id DESC"
                         " LIMIT ?", (*args, limit + 1))


@reads
def page_by_id(cx: Connection, account_id: str, after: str | None, limit: int, *, tag: str | None = None, list_id: str | None = None) -> list[Row]:
    """Up to limit contacts of the account with id > after, in id order, having the tag and in the list when
    given (GET /v1/contacts and its CSV export)."""
    join, join_args, where, where_args = _filters(tag, list_id)
    columns = ", ".join("c." + c for c in COLUMNS)
    return fetch_all(cx, f"SELECT {columns} FROM contacts c{join} WHERE c.account_id = ? AND c.id > ?"
                         f"{''.join(' AND ' + w for w in where)} ORDER BY c.id LIMIT ?",
                     (*join_args, account_id, after or "", *where_args, limit))


@reads
def existing_phones_and_emails(cx: Connection, account_id: str, phones: Iterable[str], emails: Iterable[str]) -> tuple[set[str], ...]:
    """(phones, emails): those of the given E.164 phones and case-folded emails that contacts of the account
    already have (the import's preview counts what would be matched)."""
    found = []
    for column, values in (("phone", sorted(set(phones))), ("email", sorted(set(emails)))):
        hits: set[str] = set()
        for start in range(0, len(values), 500):
            chunk = values[start:start + 500]
            hits.update(r[0] for r in cx.execute(
                f"SELECT {column} FROM contacts WHERE account_id = ? AND {column} IN ({', '.join('?' * len(chunk))})",
                (account_id, *chunk)))
        found.append(hits)
    return tuple(found)


def set_opted_out_in_tx(cx: Connection, account_id: str, contact_id: str, opted_out: bool, *, via: str, by: str | None, at: str) -> Row | None:
    """Mark the contact opted out (True) or back in (False), keeping who did it and when (via: reply, user or
    api; by: the keyword, the user's email, None). Returns the contact's row as the change left it, or None
    when it was so already (or is not the account's)."""
    changed = fetch_one(cx, "UPDATE contacts SET opted_out = ?, opt_out_at = ?, opt_out_via = ?, opt_out_by = ?"
                        f" WHERE account_id = ? AND id = ? AND opted_out != ? RETURNING {_COLUMNS}",
                        (int(opted_out), at, via, by, account_id, contact_id, int(opted_out)))
    if changed:  # the Reports' opt-outs per day (contacts keep only the latest change)
        cx.execute("INSERT INTO opt_out_changes (id, account_id, contact_id, opted_out, via, at)"
                   " VALUES (?, ?, ?, ?, ?, ?)", (new_id("ooc"), account_id, contact_id, int(opted_out), via, at))
    return changed


def set_opted_out_by_reply_in_tx(cx: Connection, account_id: str, contact_id: str, opted_out: bool, *, by: str | None, at: str) -> None:
    """The contact replied an opt-out (opt-in) keyword (by: as written): set_opted_out_in_tx, and when that
    changed it contact.updated with the contact, as a PATCH of optedOut queues it."""
    changed = set_opted_out_in_tx(cx, account_id, contact_id, opted_out, via="reply", by=by, at=at)
    if changed:
        enqueue_notification_in_tx(cx, account_id, "contact.updated", public_contact(changed))


def _holder_of(cx: Connection, account_id: str, column: str, value: str, contact_id: str) -> str | None:
    """The oldest other contact of the account whose phone or email (column) is value, or None."""
    row = cx.execute(f"SELECT id FROM contacts WHERE account_id = ? AND {column} = ? AND id != ? ORDER BY id LIMIT 1",
                     (account_id, value, contact_id)).fetchone()
    return row[0] if row else None


@writes
def update_contact(cx: Connection, account_id: str, contact_id: str, changes: Mapping[str, Any], opt_out: Mapping[str, Any] | None, now: str, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Change the contact's fields (changes: any of FILLABLE, None clears) and opt-out (opt_out: None, or
    {opted_out, via, by}) in one transaction, queueing contact.updated when anything changed. CONTACT_NOT_FOUND;
    Invalid when neither phone nor email would be left; Conflict naming the other contact of the account that
    has the new phone or email. Nothing is written on an error. Returns the contact as the API shows it."""
    contact: Mapping[str, Any] | None = get_contact.sync(cx, account_id, contact_id)
    if contact is None:
        raise contact_not_found(contact_id)
    changes = {f: v for f, v in changes.items() if v != contact[f]}
    merged = {**contact, **changes}
    if not merged["phone"] and not merged["email"]:
        raise Invalid("phone or email is required: a contact cannot be left with neither")
    for column, label in (("phone", "phone"), ("email", "email")):
        if changes.get(column):
            lock_in_tx(cx, account_id, column, changes[column])
        holder = changes.get(column) and _holder_of(cx, account_id, column, changes[column], contact_id)
        if holder:
            raise Conflict(f"{holder} already has this {label}", existing_id=holder, field=column)
    if changes:
        assignments = ", ".join(f"{f} = ?" for f in changes)
        cx.execute(f"UPDATE contacts SET {assignments} WHERE account_id = ? AND id = ?",
                   (*changes.values(), account_id, contact_id))
    opted = opt_out is not None and set_opted_out_in_tx(cx, account_id, contact_id, opt_out["opted_out"],
                                                        via=opt_out["via"], by=opt_out["by"], at=now)
    if not changes and not opted:
        return public_contact(contact)
    # opted: the row after both changes; else the contact read above, changed
    updated = cast("Mapping[str, Any]", opted or get_contact.sync(cx, account_id, contact_id))
    if changes:  # which fields, never their values (the audit outlives an erasure)
        record_by(cx, by, account_id=account_id, action="contact.updated", subject_id=contact_id,
                  detail={"fields": sorted(changes)})
    if opted and opt_out is not None:  # opted only with an opt_out
        record_by(cx, by, account_id=account_id, action="contact.opted_out" if opt_out["opted_out"]
                  else "contact.opted_in", subject_id=contact_id)
    enqueue_notification_in_tx(cx, account_id, "contact.updated", public_contact(updated))
    return public_contact(updated)
