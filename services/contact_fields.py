"""Normalizing contact fields with the field's own libraries: phonenumbers (E.164), email-validator."""
import functools

import phonenumbers
from email_validator import EmailNotValidError, validate_email

from common.errors import Invalid


def normalize_phone(raw, field="phone"):
    """E.164 or Invalid(INVALID_PHONE). A country code is required: the number must start with "+".
    A leading space stands for a "+" that arrived unencoded in a query string."""
    text = (raw or "").strip()
    if raw and raw.startswith(" ") and text[:1].isdigit():
        text = "+" + text
    if not text.startswith("+"):
        raise Invalid(f"{field} must include the country code in international form, e.g. +14155552671",
                      code="INVALID_PHONE")
    try:
        number = phonenumbers.parse(text, None)
    except phonenumbers.NumberParseException:
        number = None
    if number is None or not phonenumbers.is_valid_number(number):
        raise Invalid(f"{field} is not a valid phone number with a country code", code="INVALID_PHONE")
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


@functools.lru_cache(maxsize=4096)  # the same fromIds arrive again and again; parsing is the cost
def looks_like_phone(text):
    try:
        return normalize_phone(text) if text and text.strip().startswith("+") else None
    except Invalid:
        return None


def normalize_email(raw, field="email"):
    """Validated, case-folded email, or Invalid(INVALID_EMAIL). No DNS lookups (keeps the loop free)."""
    try:
        result = validate_email((raw or "").strip(), check_deliverability=False)
    except EmailNotValidError as exc:
        raise Invalid(f"{field} is not a valid email address: {exc}", code="INVALID_EMAIL") from None
    return result.normalized.casefold()


@functools.lru_cache(maxsize=4096)
def looks_like_email(text):
    try:
        return normalize_email(text) if text and "@" in text else None
    except Invalid:
        return None
