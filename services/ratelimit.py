"""Per-key request limits with GCRA: one float per key, O(1) memory and time."""
import math
import time


class RateLimiter:
    def __init__(self, clock=time.monotonic, window=60.0):
        self.clock = clock
        self.window = window
        self._tat = {}  # key -> theoretical arrival time of the next request

    def hit(self, key, limit):
        """Count one request. Returns (allowed, headers) with the IETF draft and X-RateLimit-* headers."""
        now = self.clock()
        interval = self.window / limit
        tat = max(self._tat.get(key, now), now)
        new_tat = tat + interval
        allowed = new_tat - now <= self.window + 1e-9
        if allowed:
            self._tat[key] = new_tat
            remaining = int((now + self.window - new_tat) // interval + 1e-9)
            reset = new_tat - now
            retry_after = 0
        else:
            remaining = 0
            retry_after = max(1, math.ceil(new_tat - self.window - now))
            reset = tat - now
        reset = max(0, math.ceil(reset))
        headers = {
            "RateLimit-Policy": f'"default";q={limit};w={int(self.window)}',
            "RateLimit": f'"default";r={remaining};t={retry_after if not allowed else reset}',
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": str(reset),
        }
        if not allowed:
            headers["Retry-After"] = str(retry_after)
        return allowed, headers

    def prune(self):
        """Forget keys whose budget is full again; they behave exactly as unseen keys."""
        now = self.clock()
        stale = [key for key, tat in self._tat.items() if tat <= now]
        for key in stale:
            del self._tat[key]
        return len(stale)

    def __len__(self):
        return len(self._tat)
