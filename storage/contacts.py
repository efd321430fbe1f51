"""SQL for contacts. The *_in_tx functions are plain sync functions for composing transactions."""
from common.errors import NotFound
from storage.db import fetch_all, fetch_one, reads, writes
from storage.outbox import enqueue_notification_in_tx

_COLUMNS = "id, account_id, first_name, last_name, phone, email, opted_out, created_at"
FILLABLE = ("first_name", "last_name", "phone", "email")


def contact_not_found(contact_id):
    return NotFound(f"no contact with id {contact_id}", code="CONTACT_NOT_FOUND")


def public_contact(row):
    """The contact as the API and notifications show it: {id, firstName, lastName, phone, email, optedOut,
    createdAt}."""
    return {"id": row["id"], "firstName": row.get("first_name"), "lastName": row.get("last_name"),
            "phone": row.get("phone"), "email": row.get("email"), "optedOut": bool(row.get("opted_out")),
            "createdAt": row["created_at"]}


def emit_created_in_tx(cx, row):
    """Queue contact.created for a contact inserted in this transaction (only if the account listens)."""
    return enqueue_notification_in_tx(cx, row["account_id"], "contact.created", public_contact(row))


@reads
def get_contact(cx, account_id, contact_id):
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM contacts WHERE account_id = ? AND id = ?",
                     (account_id, contact_id))


@reads
def find_by_phone(cx, account_id, phone):
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM contacts WHERE account_id = ? AND phone = ?",
                     (account_id, phone))


@reads
def find_by_email(cx, account_id, email):
    """The oldest contact with this (case-folded) email."""
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM contacts WHERE account_id = ? AND email = ?"
                     " ORDER BY id LIMIT 1", (account_id, email))


def insert_contact_in_tx(cx, contact):
    cx.execute(f"INSERT INTO contacts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (contact["id"], contact["account_id"], contact.get("first_name"), contact.get("last_name"),
                contact.get("phone"), contact.get("email"), int(bool(contact.get("opted_out"))),
                contact["created_at"]))
    return contact


def fill_blanks_in_tx(cx, existing, values):
    """Set the existing contact's empty fields from values; never overwrite. Returns the updated row.
    A phone is only filled when no other contact of the account has it (the unique index holds)."""
    changes = {f: values[f] for f in FILLABLE if values.get(f) and not existing.get(f)}
    if "phone" in changes and find_by_phone.sync(cx, existing["account_id"], changes["phone"]):
        del changes["phone"]
    if changes:
        assignments = ", ".join(f"{f} = ?" for f in changes)
        cx.execute(f"UPDATE contacts SET {assignments} WHERE account_id = ? AND id = ?",
                   (*changes.values(), existing["account_id"], existing["id"]))
    return {**existing, **changes}


def find_or_create_in_tx(cx, contact):
    """Phone first, then (with no phone) email: returns (row, created). Runs inside the writer's
    transaction, so the check and the insert are atomic against every other write. A created contact
    queues contact.created in the same transaction."""
    existing = None
    if contact.get("phone"):
        existing = find_by_phone.sync(cx, contact["account_id"], contact["phone"])
    elif contact.get("email"):
        existing = find_by_email.sync(cx, contact["account_id"], contact["email"])
    if existing:
        return fill_blanks_in_tx(cx, existing, contact), False
    row = insert_contact_in_tx(cx, contact)
    emit_created_in_tx(cx, row)
    return row, True


find_or_create = writes(find_or_create_in_tx)


def search_clause(alias, text_like, digits_like):
    """SQL (and its arguments) matching a contact by name or email (text_like) or phone digits (digits_like):
    LIKE patterns made by the caller, with backslash as the escape character."""
    parts, args = [], []
    if text_like:
        parts += [f"(COALESCE({alias}.first_name, '') || ' ' || COALESCE({alias}.last_name, '')) LIKE ? ESCAPE '\\'",
                  f"{alias}.email LIKE ? ESCAPE '\\'"]
        args += [text_like, text_like]
    if digits_like:
        parts.append(f"{alias}.phone LIKE ? ESCAPE '\\'")
        args.append(digits_like)
    return ("(" + " OR ".join(parts) + ")", args) if parts else ("", [])


@reads
def page_contacts(cx, account_id, *, text_like=None, digits_like=None, before=None, limit=50):
    """Up to limit + 1 contacts, newest first, created before the contact ``before``, matching the search."""
    where, args = ["c.account_id = ?"], [account_id]
    if before:
        where.append("c.id < ?")
        args.append(before)
    search, search_args = search_clause("c", text_like, digits_like)
    if search:
        where.append(search)
        args += search_args
    columns = ", ".join("c." + c.strip() for c in _COLUMNS.split(","))
    return fetch_all(cx, f"SELECT {columns} FROM contacts c WHERE {' AND '.join(where)} ORDER BY c.id DESC LIMIT ?",
                     (*args, limit + 1))


@reads
def existing_phones_and_emails(cx, account_id, phones, emails):
    """(phones, emails): those of the given E.164 phones and case-folded emails that contacts of the account
    already have (the import's preview counts what would be matched)."""
    found = []
    for column, values in (("phone", sorted(set(phones))), ("email", sorted(set(emails)))):
        hits = set()
        for start in range(0, len(values), 500):
            chunk = values[start:start + 500]
            hits.update(r[0] for r in cx.execute(
                f"SELECT {column} FROM contacts WHERE account_id = ? AND {column} IN ({', '.join('?' * len(chunk))})",
                (account_id, *chunk)))
        found.append(hits)
    return tuple(found)


def set_opted_out_in_tx(cx, account_id, contact_id, opted_out):
    """Mark the contact opted out (True) or back in (False); True when that changed it."""
    return cx.execute("UPDATE contacts SET opted_out = ? WHERE account_id = ? AND id = ? AND opted_out != ?",
                      (int(opted_out), account_id, contact_id, int(opted_out))).rowcount == 1
