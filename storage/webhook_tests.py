"""SQL for the webhook test's outbound slots (services/webhook_ping.py): the account's tests in flight and its
deliveries in flight (outbox rows claimed and not lapsed, storage/delivery.py claim()) share one per-account
bound, across every process of the database."""
from __future__ import annotations

from storage.dialect import dialect_of
from storage.interface import Connection, writes


@writes
def take_slot(cx: Connection, account_id: str, slot_id: str, now: str, until: str, limit: int) -> bool:
    """Take a slot for a test when fewer than ``limit`` of the account's tests and deliveries are in flight;
    returns whether it was taken. Serialized per account (PostgreSQL: an advisory lock until COMMIT; SQLite's one
    writer already is), so two processes never both take the last slot."""
    dialect_of(cx).lock(cx, f"webhook-test-slots:{account_id}")
    cx.execute("DELETE FROM webhook_test_slots WHERE account_id = ? AND until < ?", (account_id, now))
    tests = cx.execute("SELECT COUNT(*) FROM webhook_test_slots WHERE account_id = ?", (account_id,)).fetchone()[0]
    deliveries = cx.execute("SELECT COUNT(*) FROM outbox WHERE account_id = ? AND claimed_until IS NOT NULL"
                            " AND claimed_until >= ? AND status = 'pending'", (account_id, now)).fetchone()[0]
    if tests + deliveries >= limit:
        return False
    cx.execute("INSERT INTO webhook_test_slots (id, account_id, until) VALUES (?, ?, ?)", (slot_id, account_id, until))
    return True


@writes
def release_slot(cx: Connection, slot_id: str) -> None:
    cx.execute("DELETE FROM webhook_test_slots WHERE id = ?", (slot_id,))
