"""SQL for the outbox: every webhook delivery is a row written in the transaction that caused it."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from common.ids import new_id, new_ids, now_iso
from storage.db import reads
from storage.dialect import dialect_of
from storage.events import emit_at_commit_in_tx
from storage.interface import Connection, Row


def enqueue_in_tx(cx: Connection, *, account_id: str, kind: str, payload: Any, event_type: str | None = None, message_id: str | None = None, webhook_id: str | None = None,
                  campaign_id: str | None = None) -> str:
    """One delivery (enqueue_many_in_tx's keys as arguments); returns its webhook id."""
    return enqueue_many_in_tx(cx, [{"account_id": account_id, "kind": kind, "payload": payload,
                                    "event_type": event_type, "message_id": message_id, "webhook_id": webhook_id,
                                    "campaign_id": campaign_id}])[0]


def enqueue_many_in_tx(cx: Connection, deliveries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Queue deliveries, due now, in one statement: dicts with account_id, kind, payload (JSON-able) and
    optionally event_type, message_id, webhook_id (made here when missing), campaign_id (the campaign,
    campaigns.id, a reply belongs to: its delivery goes in the campaign lane) and due_at (when it is due, if not
    now). Returns their webhook ids."""
    now = now_iso()
    rows, webhook_ids = [], []
    for d, made in zip(deliveries, new_ids("wh", len(deliveries))):
        webhook_id = d.get("webhook_id") or made
        webhook_ids.append(webhook_id)
        rows.append((d["account_id"], d["kind"], d.get("event_type"), d.get("message_id"), webhook_id,
                     json.dumps(d["payload"]), d.get("due_at") or now, now, d.get("campaign_id")))
    cx.executemany("INSERT INTO outbox (account_id, kind, event_type, message_id, webhook_id, payload,"
                   " next_attempt_at, created_at, campaign_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return webhook_ids


def enqueue_notification_in_tx(cx: Connection, account_id: str, event_type: str, data: Any, event_without_url: bool = True) -> str | None:
    """Queue a notification when the account has a URL for this event now; returns its webhook id or None.
    Body per docs/design.md#api-decisions: {event, id, occurredAt, accountId, data}. The same type with the
    same data goes on the account's event stream (GET /v1/events) in this transaction, with a URL or without
    (event_without_url=False: only with one, for a notification that is asked again until it is queued)."""
    url = dialect_of(cx).json_field_param("settings", "notificationUrls")
    row = cx.execute(f"SELECT {url} FROM accounts WHERE id = ?", (event_type, account_id)).fetchone()
    if event_without_url or (row and row[0]):
        emit_at_commit_in_tx(cx, account_id, event_type, data)
    if not row or not row[0]:
        return None
    webhook_id = new_id("evt")
    return enqueue_in_tx(cx, account_id=account_id, kind="notification", event_type=event_type,
                         payload=notification_payload(event_type, webhook_id, account_id, data), webhook_id=webhook_id)


def notification_payload(event_type: str, webhook_id: str, account_id: str, data: Any) -> dict[str, Any]:
    """A notification's body (docs/design.md#api-decisions): {event, id, occurredAt, accountId, data}."""
    return {"event": event_type, "id": webhook_id, "occurredAt": now_iso(), "accountId": account_id, "data": data}


@reads
def list_outbox(cx: Connection, account_id: str, kind: str | None = None) -> list[Row]:
    sql = "SELECT * FROM outbox WHERE account_id = ?" + (" AND kind = ?" if kind else "") + " ORDER BY id"
    return [dict(r) for r in cx.execute(sql, (account_id, kind) if kind else (account_id,))]
