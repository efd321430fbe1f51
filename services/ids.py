"""Prefixed, time-ordered, random ids (ct_…, lst_…, msg_…, acc_…) and UTC timestamps."""
import os
import time
from datetime import datetime, timezone

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def new_id(prefix):
    """prefix + 10 chars of milliseconds + 16 random chars (80 bits): sorts by creation time."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return f"{prefix}_{''.join(reversed(chars))}"


def utcnow():
    return datetime.now(timezone.utc)


def iso(dt):
    """ISO 8601 UTC with milliseconds and a Z: sorts as text."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def now_iso():
    return iso(utcnow())


def parse_iso(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
