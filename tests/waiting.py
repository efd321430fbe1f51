"""Waiting in tests for something another task or process does: a deadline to give up at, never a timing
assertion."""
import asyncio
import time


async def until(condition, seconds=10):
    """True as soon as condition() is true (checked every 20 ms), False if it is not within seconds."""
    for _ in range(int(seconds / 0.02)):
        if condition():
            return True
        await asyncio.sleep(0.02)
    return False


async def until_read(read, seconds=10):
    """until() for a condition that must be awaited (a read of the database): its value once truthy, else None."""
    for _ in range(int(seconds / 0.02)):
        value = await read()
        if value:
            return value
        await asyncio.sleep(0.02)
    return None


def until_sync(condition, seconds=10):
    """until() for tests that are not async (a server process, a receiver thread)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def wait_until(check, timeout=30.0):
    """Poll until check() returns something truthy; a deadline, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


class Clock:
    """A clock a test moves (services.clock: business hours and the SLA read it): set .now."""

    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now
