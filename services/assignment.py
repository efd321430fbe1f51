"""Automatic assignment with capacity (issue 40). Account settings ``assignment: {mode, awayAfterMinutes}``:
mode off, round_robin (the agent whose last automatic assignment is the oldest) or balanced (the fewest open and
pending conversations, then round robin). A new or reopened conversation that nobody is assigned goes to an agent
who may take one now: an active user who accepted the invitation, is available (their own away switch), had a
live page within awayAfterMinutes (null: never away for that), and has fewer open conversations than their
capacity (null: no limit). It happens in the transaction of the message that opens it (one claim of the agent,
their load read from a counter, users.open_load), unless older conversations wait: then, or when nobody may take
it, it waits in the account's queue (conversations.queued_at, written with the message: storage/conversations.py)
and the Assigner gives it out, oldest first, the moment someone frees up (a resolve, a snooze, a raised capacity,
an agent back). A person's own assignment, unassignment or status change takes the conversation out of the queue:
it is left alone. Every automatic assignment is audited (conversation.assigned, with its reason) and emits
conversation.updated.

The decisions are made in the writer's transactions (storage/assignment.py). Several processes: an agent is
claimed under their users row's lock with the capacity checked on the row as
committed (storage/assignment.py), so no two transactions give them more than it; the Assigner runs in one
process at a time (its lease) and its rounds hold the account's lock. Who has a live page is shared through
users.last_seen_at, which every process's SeenBeat writes for its own open sockets."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from common.errors import Invalid
from common.ids import iso, utcnow
from services.context import JSONObject, Services
from services.worker_loop import WorkerLoop
from storage import assignment as store
from storage.assignment import BATCH, DEFAULT_AWAY_AFTER_MINUTES, assign_queued_in_tx, setting_of

log = logging.getLogger("parley.assignment")

MODES = ("off", "round_robin", "balanced")
MAX_AWAY_AFTER_MINUTES = 7 * 24 * 60
MAX_CAPACITY = 10_000


def public_setting(value: str | Mapping[str, Any] | None) -> JSONObject:
    mode, away = setting_of(value)
    return {"mode": mode, "awayAfterMinutes": away}


def validate_setting(value: object) -> JSONObject | None:
    """The assignment setting to store, from the API's or the settings form's value (None removes it: off).
    Invalid naming assignment.mode or assignment.awayAfterMinutes."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Invalid("assignment must be an object {mode, awayAfterMinutes}", field="assignment")
    unknown = sorted(set(value) - {"mode", "awayAfterMinutes"})
    if unknown:
        raise Invalid(f"assignment has no field {unknown[0]}", field=f"assignment.{unknown[0]}")
    mode = value.get("mode", "off")
    if mode not in MODES:
        raise Invalid(f"assignment.mode must be one of {', '.join(MODES)}", field="assignment.mode")
    away = value.get("awayAfterMinutes", DEFAULT_AWAY_AFTER_MINUTES)
    if away is not None and (isinstance(away, bool) or not isinstance(away, int)
                             or not 1 <= away <= MAX_AWAY_AFTER_MINUTES):
        raise Invalid(f"assignment.awayAfterMinutes must be a whole number of minutes from 1 to "
                      f"{MAX_AWAY_AFTER_MINUTES}, or null (never away for idleness)", field="assignment.awayAfterMinutes")
    return {"mode": mode, "awayAfterMinutes": away}


def capacity_of(value: object) -> int | None:
    """A user's capacity as sent: a whole number 0..MAX_CAPACITY, or None (no limit). Invalid naming it."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_CAPACITY):
        raise Invalid(f"capacity must be a whole number from 0 to {MAX_CAPACITY}, or null (no limit)",
                      field="capacity")
    return value


def wake(services: Services) -> None:
    """Something that may let a waiting conversation be assigned committed (a conversation queued, an agent
    freed or back): the Assigner of this process runs a round (another process's learns it from the commit's
    wake-up: server.py)."""
    assigner = getattr(services, "assigner", None)
    if assigner is not None:
        assigner.notify()


class Assigner(WorkerLoop):
    """Assigns each account's waiting conversations whenever woken (wake()), and every poll_seconds as a
    backstop. One process runs it at a time (its lease)."""

    name = "assignment"
    poll_seconds = 30.0
    gather_seconds = 0.02  # a burst of new conversations is assigned in one transaction, not one each

    def __init__(self, services: Services, clock: Callable[[], datetime] = utcnow) -> None:
        super().__init__()
        self.services, self.clock = services, clock

    async def round(self) -> float | None:
        await asyncio.sleep(self.gather_seconds)
        more = False
        for account_id in await store.queued_accounts(self.services.db):
            assigned = await self.services.db.write(assign_queued_in_tx, account_id, self.clock(), BATCH)
            if assigned:
                log.debug("assignment: %d conversation(s) of %s assigned", len(assigned), account_id)
                if getattr(self.services, "delivery", None) is not None:
                    self.services.delivery.notify()  # an assignee's mail may be queued
            more = more or len(assigned) == BATCH
        return 0 if more else None


class SeenBeat(WorkerLoop):
    """Every process tells the database who has a live page open on it (users.last_seen_at), every
    period_seconds and at once when someone arrives: automatic assignment counts an agent without one for
    awayAfterMinutes as away. No lease: each process beats for its own sockets."""

    name = "seen"
    poll_seconds = 30.0  # well under awayAfterMinutes' least (1 minute)

    def __init__(self, services: Services, clock: Callable[[], datetime] = utcnow) -> None:
        super().__init__()
        self.services, self.clock = services, clock
        self._written: set[str] = set()  # the users written by the last beat

    def arrived(self, user_id: str) -> None:
        """A live page of the user opened here: written now unless this process wrote them in the last beat."""
        if user_id not in self._written:
            self.notify()

    async def round(self) -> float | None:
        users = sorted(self.services.hub.connected_users())
        now = self.clock()
        written = await store.mark_seen(self.services.db, users, iso(now),
                                        iso(now - timedelta(seconds=self.poll_seconds / 2)))
        if set(written) - self._written:
            wake(self.services)  # someone is back: conversations may wait for them
        self._written = set(users)
        return None
