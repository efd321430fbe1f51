"""Normalizing contact fields with the field's own libraries: phonenumbers (E.164), email-validator.
The API (POST /v1/contacts) and the bulk import both go through normalize_contact."""
from __future__ import annotations

import functools
import re
from typing import Any

import phonenumbers
from email_validator import EmailNotValidError, validate_email

from common.errors import Invalid
from common.validation import no_control_characters

# Longest accepted values (the API's request model declares the same limits from these).
MAX_NAME_LENGTH = 200
MAX_PHONE_LENGTH = 64
MAX_EMAIL_LENGTH = 320


def _international_text(raw: str | None) -> str:
    """The phone as typed, trimmed; a leading space stands for a "+" that arrived unencoded in a query string."""
    text = (raw or "").strip()
    return "+" + text if raw and raw.startswith(" ") and text[:1].isdigit() else text


def is_national(raw: str | None) -> bool:
    """A phone typed without its country code ("030 1234567"): only such a number needs a default country."""
    text = _international_text(raw)
    return bool(text) and not text.startswith("+")


def normalize_phone(raw: str | None, field: str = "phone", region: str | None = None) -> str:
    """E.164 or Invalid(INVALID_PHONE). A country code is required: the number must start with "+",
    unless a default region (ISO 3166 code, e.g. "DE") says which country a national number is in."""
    text = _international_text(raw)
    if not text.startswith("+") and region is None:
        raise Invalid(f"{field} must include the country code in international form, e.g. +14155552671 (or set "
                      "the account's default country, defaultCountry in Settings, to read national numbers)",
                      code="INVALID_PHONE", field=field)
    try:
        number = phonenumbers.parse(text, None if text.startswith("+") else region)
    except phonenumbers.NumberParseException:
        number = None
    if number is None or not phonenumbers.is_valid_number(number):
        where = "with a country code" if region is None else f"with a country code or for region {region}"
        raise Invalid(f"{field} is not a valid phone number {where}", code="INVALID_PHONE", field=field)
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def region_code(text: Any, field: str = "defaultCountry") -> str:
    """A default region for national numbers ("de" -> "DE"), or Invalid naming the field unless it is an ISO 3166
    alpha-2 code phonenumbers knows."""
    code = text.strip().upper() if isinstance(text, str) else ""
    if code not in phonenumbers.SUPPORTED_REGIONS:
        raise Invalid(f"{field} {text!r} is not an ISO 3166 country code (two letters) that phonenumbers knows, "
                      "e.g. US, DE", field=field)
    return code


@functools.lru_cache(maxsize=4096)  # the same fromIds arrive again and again; parsing is the cost
def looks_like_phone(text: str | None) -> str | None:
    try:
        return normalize_phone(text) if text and text.strip().startswith("+") else None
    except Invalid:
        return None


def normalize_email(raw: str | None, field: str = "email") -> str:
    """Validated, case-folded email, or Invalid(INVALID_EMAIL). No DNS lookups (keeps the loop free)."""
    try:
        result = validate_email((raw or "").strip(), check_deliverability=False)
    except EmailNotValidError as exc:
        raise Invalid(f"{field} is not a valid email address: {exc}", code="INVALID_EMAIL", field=field) from None
    return result.normalized.casefold()


@functools.lru_cache(maxsize=4096)
def looks_like_email(text: str | None) -> str | None:
    try:
        return normalize_email(text) if text and "@" in text else None
    except Invalid:
        return None


def blank_to_none(value: str | None) -> str | None:
    value = value.strip() if isinstance(value, str) else value
    return value or None


def check_length(value: str | None, field: str, limit: int) -> None:
    if value is not None and len(value) > limit:
        raise Invalid(f"{field} is longer than {limit} characters", field=field)
    no_control_characters(value, field)  # type: ignore[arg-type]  # None passes: nothing to check. The API's models check it too; imported rows only here


def normalize_contact(*, first_name: str | None = None, last_name: str | None = None, phone: str | None = None, email: str | None = None, region: str | None = None) -> dict[str, str | None]:
    """The contact fields as stored ({first_name, last_name, phone, email}: blanks as None, the phone E.164,
    the email case-folded), or Invalid naming the field (docs/api.md#contacts: phone or email required).
    region: a default region for phones without "+" (the import's option; the API passes none)."""
    first_name, last_name = blank_to_none(first_name), blank_to_none(last_name)
    phone, email = blank_to_none(phone), blank_to_none(email)
    if phone is None and email is None:
        raise Invalid("phone or email is required: give at least one of them")
    for value, field, limit in ((first_name, "firstName", MAX_NAME_LENGTH), (last_name, "lastName", MAX_NAME_LENGTH),
                                (phone, "phone", MAX_PHONE_LENGTH), (email, "email", MAX_EMAIL_LENGTH)):
        check_length(value, field, limit)
    return {"first_name": first_name, "last_name": last_name,
            "phone": normalize_phone(phone, region=region) if phone else None,
            "email": normalize_email(email) if email else None}


MAX_TAGS = 50  # per contact (issue 41)
MAX_TAG_LENGTH = 50
# Stored as a JSON array and matched as its '"tag"' element (storage/contacts.py tag_like): a quote or a
# backslash would be escaped inside the JSON and could match across elements; a comma separates tags in the UI.
_TAG_REFUSED = re.compile(r'["\\,]')


def normalize_tag(raw: Any, field: str = "tag") -> str:
    """A tag as stored: trimmed, inner spaces collapsed to one, case-folded ("  VIP  Customer" -> "vip customer");
    Invalid naming the field when blank, longer than MAX_TAG_LENGTH, or holding a quote, backslash, comma or
    control character."""
    if not isinstance(raw, str):
        raise Invalid(f"{field} must be a string", field=field)
    tag = " ".join(raw.split()).casefold()
    if not tag:
        raise Invalid(f"{field} cannot be blank", field=field)
    if len(raw) > MAX_TAG_LENGTH:  # as sent (the OpenAPI document's maxLength), spaces too
        raise Invalid(f"{field} is longer than {MAX_TAG_LENGTH} characters", field=field)
    if _TAG_REFUSED.search(tag):
        raise Invalid(f"{field} must not contain a quote, backslash or comma", field=field)
    no_control_characters(tag, field)
    return tag


def normalize_tags(raw: Any, field: str = "tags") -> list[str]:
    """A contact's tags as stored: each normalize_tag'ed, duplicates dropped, sorted; Invalid naming the field (and
    the tag's index) for a bad one or more than MAX_TAGS."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise Invalid(f"{field} must be a list of strings", field=field)
    tags = sorted({normalize_tag(tag, f"{field}[{i}]") for i, tag in enumerate(raw)})
    if len(tags) > MAX_TAGS:
        raise Invalid(f"{field} holds {len(tags)} tags; a contact has at most {MAX_TAGS}", field=field)
    return tags


def split_tags(text: str | None, field: str = "tags") -> list[str]:
    """Tags typed in one box, comma-separated (the UI's form): normalize_tags of the non-blank parts, an error
    naming the box (field) and the tag at fault."""
    parts = [part for part in (text or "").split(",") if part.strip()]
    for part in parts:
        try:
            normalize_tag(part, field)
        except Invalid as exc:
            raise Invalid(f"{exc.message} (“{part.strip()[:MAX_TAG_LENGTH]}”)", field=field) from None
    return normalize_tags(parts, field)
