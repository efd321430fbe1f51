"""GCRA rate limiting: per key per minute, O(1) memory per key, stale keys pruned (docs/design.md#api-decisions)."""
from services.ratelimit import RateLimiter


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_limit_then_refill():
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    results = [limiter.hit("k", 10)[0] for _ in range(11)]
    assert results == [True] * 10 + [False]
    allowed, headers = limiter.hit("k", 10)
    assert not allowed and headers["Retry-After"] == "6"  # one slot every 6 s at 10/min
    clock.now += 6
    assert limiter.hit("k", 10)[0]
    assert not limiter.hit("k", 10)[0]


def test_keys_are_independent_and_pruned():
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    for i in range(1000):
        limiter.hit(f"key{i}", 60)
    assert len(limiter) == 1000
    assert limiter.hit("other", 1)[0]
    clock.now += 61
    assert limiter.prune() == 1001
    assert len(limiter) == 0


def test_headers_count_down():
    limiter = RateLimiter(clock=Clock())
    remaining = [int(limiter.hit("k", 3)[1]["X-RateLimit-Remaining"]) for _ in range(3)]
    assert remaining == [2, 1, 0]
