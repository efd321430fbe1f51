"""Who is viewing which thread (issue 21: "alice@… is viewing"): a thread page says over its live socket which
conversation it shows; the others of the same account on that conversation are told who is there, again
whenever someone comes or goes (their page closing ends their socket). Kept in memory only: it is about the
sockets open now, never stored, and never crosses accounts (the map is per account)."""
from __future__ import annotations

import json
import re
from typing import Any, TYPE_CHECKING

from services.live import Frame

if TYPE_CHECKING:
    from services.live import Subscriber

CONTACT_ID = re.compile(r"ct_[0-9a-z]{1,40}")
MAX_MESSAGE_CHARS = 200  # what a page may send: {"type": "viewing", "contactId": "ct_…"}


def page_message(text: Any) -> tuple[str, str | None]:
    """(type, contact id) of what a page sends over /ws: {"type": "viewing", "contactId"} (None: it views none)
    or {"type": "typing", "contactId"} (its agent types a reply: services/typing.py); ValueError otherwise."""
    if not isinstance(text, str) or len(text) > MAX_MESSAGE_CHARS:
        raise ValueError("not a page's message")
    message = json.loads(text)
    kind = message.get("type") if isinstance(message, dict) else None
    if kind not in ("viewing", "typing"):
        raise ValueError("not a page's message")
    contact_id = message.get("contactId")
    if (contact_id is not None or kind == "typing") and not (isinstance(contact_id, str)
                                                             and CONTACT_ID.fullmatch(contact_id)):
        raise ValueError("contactId is no contact id")
    return kind, contact_id


def viewing_message(text: Any) -> str | None:
    """The contact id a page's message says it views, None for "none"; raises ValueError for anything else."""
    kind, contact_id = page_message(text)
    if kind != "viewing":
        raise ValueError("not a viewing message")
    return contact_id


class Presence:
    """account id -> contact id -> the subscribers (services.live.Subscriber, with .label: who they are) that
    show that conversation."""

    def __init__(self) -> None:
        self._viewing: dict[str, dict[str, set[Subscriber]]] = {}
        self._where: dict[Subscriber, str] = {}  # subscriber -> the contact id it views

    def view(self, subscriber: Subscriber, contact_id: str | None) -> None:
        """The subscriber's page shows this conversation now (None: none)."""
        if self._where.get(subscriber) == contact_id:
            return
        self.leave(subscriber)
        if contact_id is None or subscriber.closed:
            return
        self._where[subscriber] = contact_id
        self._viewing.setdefault(subscriber.account_id, {}).setdefault(contact_id, set()).add(subscriber)
        self._announce(subscriber.account_id, contact_id)

    def leave(self, subscriber: Subscriber) -> None:
        """The subscriber's page closed or shows another conversation: tell those left."""
        contact_id = self._where.pop(subscriber, None)
        if contact_id is None:
            return
        threads = self._viewing.get(subscriber.account_id, {})
        viewers = threads.get(contact_id, set())
        viewers.discard(subscriber)
        if not viewers:
            threads.pop(contact_id, None)
            if not threads:
                self._viewing.pop(subscriber.account_id, None)
            return
        self._announce(subscriber.account_id, contact_id)

    def viewers(self, account_id: str, contact_id: str) -> set[Subscriber]:
        return set(self._viewing.get(account_id, {}).get(contact_id, ()))

    def _announce(self, account_id: str, contact_id: str) -> None:
        viewers = self.viewers(account_id, contact_id)
        for subscriber in viewers:
            others = sorted({v.label for v in viewers if v.user_id != subscriber.user_id and v.label})
            subscriber.send(Frame(json.dumps({"type": "presence", "contactId": contact_id,
                                              "viewers": others}).encode()))
