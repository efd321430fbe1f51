"""A conversation's status (open, pending, resolved, snoozed until a time) and assignee (a user of the account, or
nobody), changed for one conversation or many at once (issue 21); the snooze presets the UI offers; and the
SnoozeWaker that reopens snoozed conversations when their time comes. No HTTP, no SQL."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from common.errors import Invalid, NotFound
from common.ids import iso, now_iso, parse_iso, utcnow
from services import assignment, messaging
from services.context import JSONObject, Services
from services.worker_loop import WorkerLoop
from storage import conversation_status as store
from storage import conversations as conversation_store
from storage.conversations import STATUSES
from storage.interface import Row
from storage.rows import ConversationRow

log = logging.getLogger("parley.inbox")

MAX_BULK = 100  # conversations changed in one request at most
# The UI's snooze choices, in the viewer's own time zone: an hour from now, tomorrow at 9:00, next Monday 9:00.
SNOOZE_PRESETS = {"1h": "For an hour", "tomorrow": "Until tomorrow 9:00", "next_week": "Until next week"}
UNSET: Final[Any] = object()  # a field the change leaves alone (None means "clear" for the assignee)


def snooze_until(preset: str, now: datetime | None = None, utc_offset_minutes: int = 0) -> datetime:
    """The UTC time a snooze preset ends, for a viewer whose local time is UTC + utc_offset_minutes (the page
    sends it; without a script the presets count in UTC). Invalid naming the field for an unknown preset."""
    now = now or utcnow()
    if preset == "1h":
        return now + timedelta(hours=1)
    if preset not in SNOOZE_PRESETS:
        raise Invalid(f"snooze must be one of {', '.join(SNOOZE_PRESETS)}", field="snooze")
    zone = timezone(timedelta(minutes=max(-14 * 60, min(14 * 60, utc_offset_minutes))))
    local = now.astimezone(zone)
    days = 1 if preset == "tomorrow" else 7 - local.weekday()  # next_week: the coming Monday
    nine = datetime.combine(local.date() + timedelta(days=days), datetime.min.time(), zone).replace(hour=9)
    return nine.astimezone(timezone.utc)


def _changes(status: str, snoozed_until: datetime | None, assignee_user_id: str | None,
             now: datetime) -> dict[str, str | None]:
    """The stored fields a change sets; Invalid naming the API's field when it is wrong."""
    changes: dict[str, str | None] = {}
    if snoozed_until is not UNSET and snoozed_until is not None:
        if status is UNSET:
            status = "snoozed"  # a time alone snoozes
        elif status != "snoozed":
            raise Invalid("snoozedUntil goes only with status snoozed", field="snoozedUntil")
        if snoozed_until <= now:
            raise Invalid("snoozedUntil must be in the future", field="snoozedUntil")
    if status is not UNSET:
        if status not in STATUSES:
            raise Invalid(f"status must be one of {', '.join(STATUSES)}", field="status")
        if status == "snoozed" and (snoozed_until is UNSET or snoozed_until is None):
            raise Invalid("snoozedUntil is required with status snoozed (when the conversation opens again)",
                          field="snoozedUntil")
        changes["status"] = status
        # a snooze without a time was refused above
        changes["snoozed_until"] = iso(snoozed_until) if status == "snoozed" and snoozed_until is not None else None
    if assignee_user_id is not UNSET:
        changes["assignee_user_id"] = assignee_user_id
    if not changes:
        raise Invalid("nothing to change: give status, snoozedUntil or assigneeUserId")
    return changes


async def change(services: Services, account_id: str, contact_ids: Iterable[str], *, status: str = UNSET,
                 snoozed_until: datetime | None = UNSET, assignee_user_id: str | None = UNSET,
                 now: datetime | None = None, by: Mapping[str, Any] | None = None) -> None:
    """Change the status and/or assignee of the account's conversations with these contacts (conversation ids
    are contact ids), all or none. snoozed_until: an aware datetime. assignee_user_id: a user of this account,
    or None (unassigned). Invalid (naming the field) or NotFound change nothing. Each conversation that changed
    emits conversation.updated, and a snooze wakes the SnoozeWaker to count its time. by: who changes it (the
    audit's actor): an assignee is emailed about it (services/agent_mail.py) unless it is their own doing."""
    contact_ids = list(dict.fromkeys(contact_ids))
    if not contact_ids:
        raise Invalid("choose at least one conversation", field="conversationIds")
    if len(contact_ids) > MAX_BULK:
        raise Invalid(f"at most {MAX_BULK} conversations at once", field="conversationIds")
    now = now or utcnow()
    changes = _changes(status, snoozed_until, assignee_user_id, now)
    missing, asked = await services.db.write(store.change_in_tx, account_id, contact_ids, changes,
                                             services.settings.base_url, iso(now), (by or {}).get("actor"))
    if missing:
        raise NotFound(f"no conversation with id {missing[0]}", code="CONVERSATION_NOT_FOUND")
    if asked:
        messaging.wake_delivery(services)  # a CSAT ask's link goes out through the outbox
    if changes.get("status") == "snoozed" and getattr(services, "snoozes", None) is not None:
        services.snoozes.notify()
    assignment.wake(services)  # a resolve, snooze or reassignment may free an agent; a reopen may wait for one


STATUS_LABELS = {"open": "Open", "pending": "Pending", "resolved": "Resolved", "snoozed": "Snoozed"}


def ui_action(action: str | None, *, assignee: str = "", snooze: str = "", utc_offset_minutes: int = 0,
              now: datetime | None = None) -> dict[str, Any]:
    """A form's action as change()'s keywords: assign (assignee: a user id, empty for nobody), resolve, reopen,
    pending, snooze (snooze: a SNOOZE_PRESETS key); "assign:<id>" and "snooze:<preset>" carry their value in
    one field (the inbox's bulk action menu). Invalid naming the field for an unknown one."""
    action, _, value = (action or "").partition(":")
    if action == "assign":
        return {"assignee_user_id": (value or assignee or "").strip() or None}
    if action in ("resolve", "reopen", "pending"):
        return {"status": {"resolve": "resolved", "reopen": "open"}.get(action, action)}
    if action == "snooze":
        return {"status": "snoozed", "snoozed_until": snooze_until(value or snooze, now, utc_offset_minutes)}
    raise Invalid("action must be assign, resolve, reopen, pending or snooze", field="action")


def public_conversation(row: ConversationRow) -> JSONObject:
    """A conversation as the API shows it (its id is its contact's)."""
    return {"id": row["contact_id"], "contactId": row["contact_id"], "status": row["status"],
            "snoozedUntil": row["snoozed_until"], "assigneeUserId": row["assignee_user_id"],
            "lastMessageId": row["last_message_id"], "lastMessageAt": row["last_message_at"],
            "lastDirection": row["last_direction"], "unreadCount": row["unread_count"], "channel": row["channel"],
            "slaDueAt": row["sla_due_at"], "slaBreached": bool(row["sla_breached"])}


async def get_conversation(services: Services, account_id: str, contact_id: str) -> JSONObject:
    """The account's conversation with this contact, for the API; NotFound for none (or another account's)."""
    row = await conversation_store.get(services.db, account_id, contact_id, now_iso())
    if row is None:
        raise NotFound(f"no conversation with id {contact_id}", code="CONVERSATION_NOT_FOUND")
    return public_conversation(row)


async def assignable_users(services: Services, account_id: str) -> list[Row]:
    """[{id, email, name}] of the account: whom the inbox offers as an assignee."""
    return await store.assignable_users(services.db, account_id)


class SnoozeWaker(WorkerLoop):
    """Reopens snoozed conversations when their time comes (each with its conversation.updated, so open pages
    move them between views): a round wakes what is due and sleeps until the next snooze ends (at most
    poll_seconds; a new snooze notifies it)."""

    name = "snoozes"
    poll_seconds = 60.0
    batch = 500

    def __init__(self, services: Services, clock: Callable[[], datetime] = utcnow) -> None:
        super().__init__()
        self.services, self.clock = services, clock

    async def round(self) -> float | None:

        now = self.clock()
        woken = await store.wake_snoozed(self.services.db, iso(now), self.batch)
        if woken:
            assignment.wake(self.services)  # the unassigned ones may wait for an agent
        if woken == self.batch:
            return 0
        if woken:
            log.info("snoozes: %d conversation(s) opened again", woken)
        following = await store.next_wake(self.services.db)
        if following is None:
            return None
        return max(0.0, min(self.poll_seconds, (parse_iso(following) - self.clock()).total_seconds()))
