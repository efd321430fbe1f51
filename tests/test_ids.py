"""Ids and timestamps (docs/design.md#api-decisions "Ids: prefixed, time-ordered, random"): the fast encodings made on
every write give exactly the text of the plain definitions."""
import random
import time
from datetime import datetime, timedelta, timezone

from common import ids


def _reference_id(prefix, ms, random_bits):
    """The definition: 26 Crockford base-32 digits of (milliseconds << 80 | 80 random bits)."""
    value, digits = (ms << 80) | random_bits, []
    for _ in range(26):
        value, digit = divmod(value, 32)
        digits.append(ids._ALPHABET[digit])
    return f"{prefix}_{''.join(reversed(digits))}"


def test_new_id_is_the_base32_of_time_and_randomness(monkeypatch):
    rng = random.Random(7)
    for _ in range(2000):
        ms, random_bits = rng.randrange(2**48), rng.randrange(2**80)
        monkeypatch.setattr(ids.time, "time_ns", lambda: ms * 1_000_000 + 999_999)
        monkeypatch.setattr(ids.os, "urandom", lambda n: random_bits.to_bytes(n, "big"))
        assert ids.new_id("msg") == _reference_id("msg", ms, random_bits)


def test_new_ids_sort_by_creation_time_and_do_not_repeat():
    made = []
    for _ in range(5):
        made += [ids.new_id("ct") for _ in range(200)]
        time.sleep(0.002)
    assert len(set(made)) == len(made)
    later = made[200::200]
    assert later == sorted(later) and all(len(i) == len("ct_") + 26 for i in made)


def test_now_iso_is_iso_of_the_current_utc_time(monkeypatch):
    epoch, rng = datetime(1970, 1, 1, tzinfo=timezone.utc), random.Random(11)
    for _ in range(2000):
        us = rng.randrange(4_000_000_000_000_000)
        monkeypatch.setattr(ids.time, "time_ns", lambda: us * 1000)
        assert ids.now_iso() == ids.iso(epoch + timedelta(microseconds=us))
