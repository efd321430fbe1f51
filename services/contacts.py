"""Contacts: create-or-return by normalized phone (else case-folded email), lookups by phone, email or id."""
from services.contact_fields import blank_to_none, normalize_contact, normalize_email, normalize_phone
from common.errors import Invalid, NotFound
from common.ids import new_id, now_iso
from storage import contacts as store

public_contact = store.public_contact


def not_found(message="contact not found"):
    return NotFound(message, code="CONTACT_NOT_FOUND")


async def create_contact(db, account_id, *, first_name=None, last_name=None, phone=None, email=None):
    """Spec §2 rules 1-2: phone or email required; an existing phone (or, without a phone, email) is
    returned rather than duplicated, its blank fields filled. Returns (contact, created)."""
    row = {"id": new_id("ct"), "account_id": account_id, "created_at": now_iso(),
           **normalize_contact(first_name=first_name, last_name=last_name, phone=phone, email=email)}
    contact, created = await store.find_or_create(db, row)
    return public_contact(contact), created


async def get_contact(db, account_id, contact_id):
    contact = await store.get_contact(db, account_id, contact_id)
    if contact is None:
        raise not_found(f"no contact with id {contact_id}")
    return public_contact(contact)


async def lookup_contact(db, account_id, *, phone_number=None, email=None):
    """GET /contacts?phoneNumber=|email=: normalized the same way as on creation. With both, the phone
    is tried first, then the email."""
    # A "+" sent unencoded arrives as a space; normalize_phone reads a leading space as "+".
    phone_number = phone_number if phone_number and phone_number.strip() else None
    email = blank_to_none(email)
    if phone_number is None and email is None:
        raise Invalid("phoneNumber or email query parameter is required")
    phone = normalize_phone(phone_number, field="phoneNumber") if phone_number else None
    email = normalize_email(email, field="email") if email else None
    contact = await store.find_by_phone(db, account_id, phone) if phone else None
    if contact is None and email:
        contact = await store.find_by_email(db, account_id, email)
    if contact is None:
        raise not_found("no contact with " + " or ".join(
            f"{name} {value}" for name, value in (("phone", phone), ("email", email)) if value))
    return public_contact(contact)
