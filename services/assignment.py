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

Several processes: an agent is claimed under their users row's lock with the capacity checked on the row as
committed (storage/assignment.py), so no two transactions give them more than it; the Assigner runs in one
process at a time (its lease) and its rounds hold the account's lock. Who has a live page is shared through
users.last_seen_at, which every process's SeenBeat writes for its own open sockets."""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from common.errors import Invalid
from common.ids import iso, utcnow
from services.context import JSONObject, Services
from services.worker_loop import WorkerLoop
from storage import mail as mail_store
from storage import assignment as store
from storage.interface import Connection

log = logging.getLogger("parley.assignment")

MODES = ("off", "round_robin", "balanced")
ON = store.ON
DEFAULT_AWAY_AFTER_MINUTES = 30
MAX_AWAY_AFTER_MINUTES = 7 * 24 * 60
MAX_CAPACITY = 10_000
AUTOMATIC = {"actor": "assignment", "actor_label": "Automatic assignment"}  # who the audit names
BATCH = 100  # conversations assigned in one transaction at most
Setting = tuple[str, int | None]  # setting_of's (mode, awayAfterMinutes or None)


def setting_of(value: str | Mapping[str, Any] | None) -> Setting:
    """(mode, awayAfterMinutes or None) of a stored assignment setting (a dict, its JSON text, or None)."""
    config: Mapping[str, Any] = (json.loads(value) if isinstance(value, str) else value) or {}
    return config.get("mode", "off"), config.get("awayAfterMinutes", DEFAULT_AWAY_AFTER_MINUTES)


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


def reason(mode: str, chosen: Mapping[str, Any]) -> str:
    """Why the claimed agent (storage.assignment.claim_agent_in_tx's {id, capacity, load}) got the conversation:
    the audit entry's words."""
    rule = "balanced: fewest open conversations" if mode == "balanced" else \
        "round robin: longest since an automatic assignment"
    capacity = "no limit" if chosen["capacity"] is None else chosen["capacity"]
    return f"{rule} ({chosen['load']} open, capacity {capacity})"


def _seen_since(now: datetime, away_after: int | None) -> str | None:
    """Agents seen with a live page before this are away (None: nobody is away for idleness)."""
    return iso(now - timedelta(minutes=away_after)) if away_after else None


def _detail(mode: str, chosen: Mapping[str, Any], queued_at: str | None) -> JSONObject:
    return {"assigneeUserId": chosen["id"], "mode": mode, "reason": reason(mode, chosen), "openBefore": chosen["load"],
            "capacity": chosen["capacity"], "queuedAt": queued_at}


def claim_for_new_in_tx(cx: Connection, account_id: str, setting: Setting, now: datetime) -> dict[str, Any] | None:
    """A message from a new contact opens a conversation while assignment is on (setting: setting_of's (mode,
    awayAfterMinutes)): the agent it goes to, claimed, when one may take it and nothing else waits (the message's
    upsert names them as the assignee: no statement more); else None (it waits in the queue).
    assigned_new_in_tx follows in the same transaction."""
    mode, away_after = setting
    return store.claim_agent_in_tx(cx, account_id, mode, _seen_since(now, away_after), contact_id="")


def assigned_new_in_tx(cx: Connection, account_id: str, contact_id: str, setting: Setting,
                       chosen: Mapping[str, Any]) -> None:
    """The event and audit entry of claim_for_new_in_tx's assignment, once the conversation is written."""
    store.assigned_in_tx(cx, account_id, contact_id, chosen["id"], AUTOMATIC, _detail(setting[0], chosen, None))
    mail_store.agents_assigned_in_tx(cx, account_id, [(contact_id, chosen["id"])])


def assign_reopened_in_tx(cx: Connection, account_id: str, contact_id: str, setting: Setting, now: datetime) -> bool:
    """A message to a known contact was stored in this transaction while assignment is on: when the conversation
    waits (the message opened it again, or it waited already) and nothing else does, it goes to an agent who may
    take it now. Returns whether it waits still (for the Assigner). A message to a conversation that does not
    wait costs one read by its key."""
    queued_at = store.waiting_since_in_tx(cx, account_id, contact_id)
    if queued_at is None:
        return False
    mode, away_after = setting
    chosen = store.claim_agent_in_tx(cx, account_id, mode, _seen_since(now, away_after), contact_id=contact_id)
    if chosen is None or not store.assign_in_tx(cx, account_id, contact_id, chosen["id"], AUTOMATIC,
                                                _detail(mode, chosen, queued_at)):
        return True
    mail_store.agents_assigned_in_tx(cx, account_id, [(contact_id, chosen["id"])])
    return False


def assign_queued_in_tx(cx: Connection, account_id: str, now: datetime, limit: int = BATCH,
                        by: Mapping[str, Any] = AUTOMATIC) -> list[tuple[str, str]]:
    """In one write transaction under the account's lock: give up to limit waiting conversations, oldest first,
    to the agents who may take them now, each claimed in turn. Returns [(contact id, user id)] assigned. With the
    mode off, the queue is emptied instead (nothing waits for an assignment that will not come)."""
    store.lock_account_in_tx(cx, account_id)
    mode, away_after = setting_of(store.setting_in_tx(cx, account_id))
    if mode not in ON:
        store.clear_queue_in_tx(cx, account_id)
        return []
    seen_since = _seen_since(now, away_after)
    chosen = store.claim_agent_in_tx(cx, account_id, mode, seen_since)
    if chosen is None:
        return []  # nobody may take one: the queue is not read
    assigned: list[tuple[str, str]] = []
    for contact_id, queued_at in store.queue_head_in_tx(cx, account_id, limit):
        chosen = chosen or store.claim_agent_in_tx(cx, account_id, mode, seen_since)
        if chosen is None:
            break
        if store.assign_in_tx(cx, account_id, contact_id, chosen["id"], by, _detail(mode, chosen, queued_at)):
            assigned.append((contact_id, chosen["id"]))
            chosen = None  # their load and turn moved: the next is chosen again
    mail_store.agents_assigned_in_tx(cx, account_id, assigned, actor=by.get("actor"))
    return assigned


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
