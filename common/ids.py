"""Prefixed, time-ordered, random ids (ct_…, lst_…, msg_…, acc_…) and UTC timestamps."""
import os
import time
from collections.abc import Callable
from datetime import datetime, timezone

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
# Every 10-bit value as its two digits: an id is 13 lookups instead of 26 divisions (it is made on
# every write, on the event loop).
_PAIRS = [high + low for high in _ALPHABET for low in _ALPHABET]
_MS_SHIFTS = (40, 30, 20, 10, 0)


def kept_text(format: Callable[[int], str]) -> Callable[[int], str]:
    """format(value) for a value asked for many times in a row (the current millisecond or second: ids,
    timestamps, the Date header are made on every request), made once per value. The (value, text) pair is
    replaced as one tuple, so that threads asking at once never pair them wrongly."""
    cache: list[tuple[int | None, str]] = [(None, "")]

    def text(value: int) -> str:
        cached, made = cache[0]
        if value != cached:
            made = format(value)
            cache[0] = (value, made)
        return made
    return text


# The 10 digits of a millisecond (of ids made in it).
_ms_text = kept_text(lambda ms: "".join([_PAIRS[(ms >> shift) & 1023] for shift in _MS_SHIFTS]))


def _ms_digits() -> str:
    """The 10 digits of the current millisecond."""
    return _ms_text(time.time_ns() // 1_000_000)


def _id(prefix: str, ms_digits: str, r: int, p: list[str] = _PAIRS) -> str:
    # spelled out: a comprehension is a call in 3.11
    return (f"{prefix}_{ms_digits}{p[r >> 70 & 1023]}{p[r >> 60 & 1023]}{p[r >> 50 & 1023]}{p[r >> 40 & 1023]}"
            f"{p[r >> 30 & 1023]}{p[r >> 20 & 1023]}{p[r >> 10 & 1023]}{p[r & 1023]}")


def new_id(prefix: str) -> str:
    """prefix + 10 digits of milliseconds + 16 random digits (80 bits): sorts by creation time.
    The 26 digits are the base-32 value of (milliseconds << 80 | random)."""
    return _id(prefix, _ms_digits(), int.from_bytes(os.urandom(10), "big"))


def new_ids(prefix: str, n: int) -> list[str]:
    """n ids like new_id's, with one read of the random source for all (a campaign's batch makes hundreds)."""
    ms_digits, random = _ms_digits(), os.urandom(10 * n)
    return [_id(prefix, ms_digits, int.from_bytes(random[i:i + 10], "big")) for i in range(0, 10 * n, 10)]


def first_id_at(prefix: str, dt: datetime) -> str:
    """The smallest id new_id(prefix) can make at datetime dt: ids >= it were made at dt or later."""
    ms = int(dt.timestamp() * 1000)
    return prefix + "_" + "".join([_PAIRS[(ms >> shift) & 1023] for shift in _MS_SHIFTS]) + "0" * 16


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso(dt: datetime) -> str:
    """ISO 8601 UTC with milliseconds and a Z: sorts as text."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


_second_text = kept_text(lambda second: time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second)))


def now_iso() -> str:
    """iso(utcnow()), without a datetime: the text of the current second is kept (every write stamps one)."""
    second, ms = divmod(time.time_ns() // 1_000_000, 1000)
    return f"{_second_text(second)}{ms:03d}Z"


# The ISO text of a whole epoch second (…:SS.000Z): a window measured back from now (every inbound message asks
# for one) changes once a second.
iso_of_second = kept_text(lambda second: time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(second)))


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
