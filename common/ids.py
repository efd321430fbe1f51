"""Prefixed, time-ordered, random ids (ct_…, lst_…, msg_…, acc_…) and UTC timestamps."""
import os
import time
from datetime import datetime, timezone

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
# Every 10-bit value as its two digits: an id is 13 lookups instead of 26 divisions (it is made on
# every write, on the event loop).
_PAIRS = [high + low for high in _ALPHABET for low in _ALPHABET]
_MS_SHIFTS = (40, 30, 20, 10, 0)
# (value, its text), replaced as one tuple so that threads making ids at once never pair them wrongly.
_ms_cache = (None, "")
_second_cache = (None, "")
_window_cache = (None, "")


def _ms_digits():
    """The 10 digits of the current millisecond (kept while it lasts)."""
    global _ms_cache
    ms = time.time_ns() // 1_000_000
    cached_ms, ms_digits = _ms_cache
    if ms != cached_ms:
        ms_digits = "".join([_PAIRS[(ms >> shift) & 1023] for shift in _MS_SHIFTS])
        _ms_cache = (ms, ms_digits)
    return ms_digits


def _id(prefix, ms_digits, r, p=_PAIRS):
    # spelled out: a comprehension is a call in 3.11
    return (f"{prefix}_{ms_digits}{p[r >> 70 & 1023]}{p[r >> 60 & 1023]}{p[r >> 50 & 1023]}{p[r >> 40 & 1023]}"
            f"{p[r >> 30 & 1023]}{p[r >> 20 & 1023]}{p[r >> 10 & 1023]}{p[r & 1023]}")


def new_id(prefix):
    """prefix + 10 digits of milliseconds + 16 random digits (80 bits): sorts by creation time.
    The 26 digits are the base-32 value of (milliseconds << 80 | random)."""
    return _id(prefix, _ms_digits(), int.from_bytes(os.urandom(10), "big"))


def new_ids(prefix, n):
    """n ids like new_id's, with one read of the random source for all (a campaign's batch makes hundreds)."""
    ms_digits, random = _ms_digits(), os.urandom(10 * n)
    return [_id(prefix, ms_digits, int.from_bytes(random[i:i + 10], "big")) for i in range(0, 10 * n, 10)]


def first_id_at(prefix, dt):
    """The smallest id new_id(prefix) can make at datetime dt: ids >= it were made at dt or later."""
    ms = int(dt.timestamp() * 1000)
    return prefix + "_" + "".join([_PAIRS[(ms >> shift) & 1023] for shift in _MS_SHIFTS]) + "0" * 16


def utcnow():
    return datetime.now(timezone.utc)


def iso(dt):
    """ISO 8601 UTC with milliseconds and a Z: sorts as text."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def now_iso():
    """iso(utcnow()), without a datetime: the text of the current second is kept (every write stamps one)."""
    global _second_cache
    second, ms = divmod(time.time_ns() // 1_000_000, 1000)
    cached_second, text = _second_cache
    if second != cached_second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
        _second_cache = (second, text)
    return f"{text}{ms:03d}Z"


def iso_of_second(second):
    """The ISO text of a whole epoch second (…:SS.000Z), kept while the same second is asked for: a window
    measured back from now (every inbound message asks for one) changes once a second."""
    global _window_cache
    cached_second, text = _window_cache
    if second != cached_second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(second))
        _window_cache = (second, text)
    return text


def parse_iso(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
