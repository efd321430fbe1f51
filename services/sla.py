"""The SLA (issue 40): settings sla {firstResponseMinutes, nextResponseMinutes}, counted in business minutes
(common/business_hours.py; every minute when the account has no business hours). The contact's message starts a
wait for a person's answer (the first response's target until a person has answered the conversation once, the
next response's after), a person's reply ends it, putting the conversation away (resolved, snoozed, pending)
drops it; the SlaWatcher breaches the waits whose time passed, each once (conversation.sla_breached), sleeping
until the next due time. The outside-hours message is decided here too: both are what a contact's message
does when the account keeps business hours (in its transaction: storage/sla.py on_contact_message_in_tx). No HTTP,
no SQL."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from common.errors import Invalid
from common.ids import iso, parse_iso, utcnow
from services.context import JSONObject, Services
from services.users import author_name
from services.worker_loop import WorkerLoop
from storage import sla as store
from storage.sla import KEY as KEY, KINDS  # KEY: the settings page reads it here
from storage.interface import Store

log = logging.getLogger("parley.sla")

MAX_MINUTES = 525_600  # a year; the API's model says the same
DUE_SOON_MINUTES = 60  # the inbox's Due soon: answers due within this, or overdue


def clock(services: Services) -> Callable[[], datetime]:
    """The services' clock (tests move it), else the real one."""
    return getattr(services, "clock", None) or utcnow


def due_soon_before(services: Services) -> str:
    return iso(clock(services)() + timedelta(minutes=DUE_SOON_MINUTES))


def validate(value: Mapping[str, Any] | None) -> dict[str, int] | None:
    """PATCH /v1/account/settings' sla (the model checked the types): null removes it; an object with neither
    target is no SLA either."""
    if value is None:
        return None
    kept = {field: value[field] for field in KINDS if value.get(field) is not None}
    return kept or None


def form_minutes(form: Mapping[str, str]) -> dict[str, int] | None:
    """The Settings page's SLA fields (whole minutes, empty for none) as the sla setting; Invalid naming the
    field otherwise."""
    value: dict[str, int] = {}
    for field in KINDS:
        text = form.get(field, "").strip()
        if not text:
            continue
        if not text.isdigit() or not 1 <= int(text) <= MAX_MINUTES:
            raise Invalid(f"sla.{field} must be a whole number of minutes from 1 to {MAX_MINUTES}",
                          field=f"sla.{field}")
        value[field] = int(text)
    return value or None


class SlaWatcher(WorkerLoop):
    """Breaches the waits whose due time passed (conversation.sla_breached, once each) and sleeps until the next
    due time (at most poll_seconds: another process's new wait is seen by then; this process's notify it).
    clock: the services' (tests move it; no test sleeps for minutes)."""

    name = "sla"
    poll_seconds = 30.0
    batch = 500

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services

    async def round(self) -> float | None:
        now = clock(self.services)()
        breached = await store.breach_due(self.services.db, iso(now), self.batch)
        if breached:
            log.info("sla: %d conversation(s) breached their SLA", breached)
            delivery = getattr(self.services, "delivery", None)
            if delivery is not None:
                delivery.notify()  # the notifications queued
        if breached == self.batch:
            return 0
        following = await store.next_due(self.services.db)
        if following is None:
            return None
        return max(0.0, min(self.poll_seconds, (parse_iso(following) - clock(self.services)()).total_seconds()))


NO_AGENT = "No agent (the API, or unassigned)"


async def report(db: Store, account_ids: Sequence[str], first_day: date, last_day: date) -> JSONObject:
    """Within SLA per day and per agent over [first_day, last_day] (dates; days in UTC), of the waits answered
    or breached: {"days": {day: [waits, met]}, "agents": {user id or None: [name, waits, met]}}."""
    rows = await store.report_rows(db, account_ids, first_day.isoformat(),
                                   (last_day + timedelta(days=1)).isoformat())
    days: dict[str, list[int]] = {}
    agents: dict[str | None, list[Any]] = {}
    for day, user_id, label, name, met in rows:
        counted = days.setdefault(day, [0, 0])
        counted[0], counted[1] = counted[0] + 1, counted[1] + met
        agent = agents.setdefault(user_id, [author_name(label, name=name) if label else NO_AGENT, 0, 0])
        agent[1], agent[2] = agent[1] + 1, agent[2] + met
    return {"days": days, "agents": agents}


def percent(met: int, total: int) -> float | None:

    return round(100 * met / total, 1) if total else None
