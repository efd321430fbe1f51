"""SQL for credit balances (integer hundredths on accounts), their history, and the auto-recharge trigger
that runs inside every spend."""
from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from common.errors import Invalid, NotFound
from common.ids import new_id
from storage.audit import record_by
from storage.db import fetch_one, reads, writes
from storage.dialect import dialect_of
from storage.interface import Connection, Row
from storage.outbox import enqueue_notification_in_tx

SCALE = 100  # balances and amounts are stored as integer hundredths of a credit
DEFAULT_PRICE = 1 * SCALE  # a sub-account's bot reply, unless its agency set accounts.credits_per_reply
MAX_BALANCE = 10 ** 12 * SCALE  # the migration's CHECK; < 2^53, so every balance is an exact JSON number


def as_number(hundredths: int) -> int | float:
    """Hundredths as the API shows them: 150 -> 1.5, 200 -> 2 (an int when whole, else the float whose
    shortest repr is the exact decimal, e.g. 30 -> 0.3)."""
    whole, rest = divmod(hundredths, SCALE)
    return whole if rest == 0 else float(Decimal(hundredths) / SCALE)


def grant_response(sub_account_id: str, amount: int, balance: int) -> dict[str, Any]:
    """The body of POST /v1/subaccounts/credits (docs/api.md#sub-account-credits-agency-accounts), amounts in hundredths."""
    return {"success": True, "sub_account_id": sub_account_id, "credits_added": as_number(amount),
            "new_balance": as_number(balance)}


def _insert_transaction(cx: Connection, tx: Mapping[str, Any]) -> None:
    cx.execute("INSERT INTO credit_transactions (account_id, kind, amount, balance_after, description,"
               " granted_by, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (tx["account_id"], tx["kind"], tx["amount"], tx["balance_after"],
                tx.get("description"), tx.get("granted_by"), tx.get("idempotency_key"), tx["created_at"]))


def _find_subaccount(cx: Connection, agency_id: str, email: str) -> Row | None:
    return fetch_one(cx, "SELECT id, credit_hundredths FROM accounts WHERE email = ? AND type = 'subaccount'"
                     " AND parent_agency_id = ?", (email, agency_id))


AUTO_RECHARGE_EVENT = "subaccount.auto_recharge"


def close_recharge_episode_in_tx(cx: Connection, account_id: str) -> None:
    """End the account's auto-recharge episode (no notification outstanding) when its balance is at least
    the threshold again, or auto-recharge is off; the next spend below the threshold notifies anew."""
    cx.execute("UPDATE accounts SET auto_recharge_key = NULL, auto_recharge_notified_at = NULL"
               " WHERE id = ? AND auto_recharge_key IS NOT NULL"
               " AND (auto_recharge_threshold IS NULL OR credit_hundredths >= auto_recharge_threshold)",
               (account_id,))


def _auto_recharge_in_tx(cx: Connection, account: Mapping[str, Any], now: str) -> dict[str, Any] | None:
    """After a spend (account: its row as it is now): when the balance is below the sub-account's
    threshold and no notification of this episode is outstanding, queue subaccount.auto_recharge to the
    agency's notificationUrls with a fresh idempotency_key and open the episode. A spend that takes the
    balance from >= threshold to < threshold is such a spend; so is the first spend of a sub-account that
    was already below the threshold when auto-recharge was set. Returns {webhook_id, idempotency_key} or
    None (nothing to do, or the agency has no URL for the event: then the next spend asks again)."""
    threshold = account["auto_recharge_threshold"]
    if (threshold is None or account["credit_hundredths"] >= threshold or account["auto_recharge_key"]
            or account["type"] != "subaccount" or not account["parent_agency_id"]):
        return None
    key = new_id("rch")
    webhook_id = enqueue_notification_in_tx(cx, account["parent_agency_id"], AUTO_RECHARGE_EVENT, {
        "idempotency_key": key, "sub_account_id": account["id"], "email": account["email"],
        "balance": as_number(account["credit_hundredths"]), "threshold": as_number(threshold),
        "amount": as_number(account["auto_recharge_amount"])}, event_without_url=False)
    if webhook_id is None:
        return None
    cx.execute("UPDATE accounts SET auto_recharge_key = ?, auto_recharge_notified_at = ? WHERE id = ?",
               (key, now, account["id"]))
    return {"webhook_id": webhook_id, "idempotency_key": key}


def _keyed_grant_in_tx(cx: Connection, agency_id: str, key: str) -> Row | None:
    return fetch_one(cx, "SELECT t.account_id, a.email, t.amount, t.balance_after, t.description"
                         " FROM credit_transactions t JOIN accounts a ON a.id = t.account_id"
                         " WHERE t.granted_by = ? AND t.idempotency_key = ? AND t.kind = 'grant'", (agency_id, key))


@reads
def keyed_grant(cx: Connection, agency_id: str, key: str) -> Row | None:
    """The agency's grant made with this Idempotency-Key, at any time (the grant history keeps a key for
    good: unique index credit_grants_key): {account_id, email, amount, balance_after, description}, or None."""
    return _keyed_grant_in_tx(cx, agency_id, key)


@writes
def grant(cx: Connection, agency_id: str, email: str, amount: int, description: str | None, now: str, idempotency_key: str | None = None, by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Add ``amount`` hundredths to the agency's sub-account with this email and record the grant, in this
    one transaction (the single writer serializes it: concurrent grants never lose an update).
    idempotency_key: the request's key, kept in the history; when the agency already granted with it, that
    grant's answer is returned and nothing is granted (the caller compares parameters first: keyed_grant).
    Returns the body of the answer (docs/api.md#sub-account-credits-agency-accounts); raises NotFound SUBACCOUNT_NOT_FOUND or Invalid (the balance
    would pass its ceiling), writing nothing."""
    if idempotency_key is not None:
        dialect_of(cx).lock(cx, f"grant:{agency_id}:{idempotency_key}")  # concurrent retries: one grant
        earlier = _keyed_grant_in_tx(cx, agency_id, idempotency_key)
        if earlier is not None:
            return grant_response(earlier["account_id"], earlier["amount"], earlier["balance_after"])
    sub = _find_subaccount(cx, agency_id, email)
    if sub is None:
        raise NotFound(f"no sub-account with email {email} under this agency", code="SUBACCOUNT_NOT_FOUND")
    if sub["credit_hundredths"] + amount > MAX_BALANCE:
        raise Invalid(f"the balance would exceed {as_number(MAX_BALANCE)} credits")
    # Relative update (not "SET = computed"): correct even if a future writer runs beside this one.
    # Conditional too: a concurrent grant may have moved the balance since it was read.
    if not cx.execute("UPDATE accounts SET credit_hundredths = credit_hundredths + ? WHERE id = ?"
                      " AND credit_hundredths + ? <= ?", (amount, sub["id"], amount, MAX_BALANCE)).rowcount:
        raise Invalid(f"the balance would exceed {as_number(MAX_BALANCE)} credits")
    balance = cx.execute("SELECT credit_hundredths FROM accounts WHERE id = ?", (sub["id"],)).fetchone()[0]
    close_recharge_episode_in_tx(cx, sub["id"])
    _insert_transaction(cx, {"account_id": sub["id"], "kind": "grant", "amount": amount,
                             "balance_after": balance, "description": description, "granted_by": agency_id,
                             "idempotency_key": idempotency_key, "created_at": now})
    detail = {"amount": as_number(amount), "balanceAfter": as_number(balance), "email": email}
    for account_id in (agency_id, sub["id"]):  # both see it: the agency granted, the sub-account received
        record_by(cx, by, account_id=account_id, action="credits.granted", subject_id=sub["id"], detail=detail)
    return grant_response(sub["id"], amount, balance)


@writes
def spend(cx: Connection, account_id: str, amount: int, reason: str | None, now: str) -> dict[str, Any]:
    """Take ``amount`` hundredths from the account's balance unless that would go below zero, and record
    it, in one transaction; a spend that leaves a sub-account below its auto-recharge threshold queues the
    agency's notification in the same transaction (_auto_recharge_in_tx).

    Returns {"outcome": "spent", "balance", "auto_recharge": None | {"webhook_id", "idempotency_key"}}
    | {"outcome": "insufficient", "balance"} | {"outcome": "not_found"}; nothing is written unless spent.
    Compose it into a larger write (a bot reply and its cost) with ``spend.sync(cx, ...)``; when
    auto_recharge is set, wake the delivery worker after the commit (it also polls every second)."""
    updated = cx.execute("UPDATE accounts SET credit_hundredths = credit_hundredths - ?"
                         " WHERE id = ? AND credit_hundredths >= ?", (amount, account_id, amount)).rowcount
    row = fetch_one(cx, "SELECT id, email, type, parent_agency_id, credit_hundredths, auto_recharge_threshold,"
                    " auto_recharge_amount, auto_recharge_key FROM accounts WHERE id = ?", (account_id,))
    if row is None:
        return {"outcome": "not_found"}
    balance = row["credit_hundredths"]
    if not updated:
        return {"outcome": "insufficient", "balance": balance}
    _insert_transaction(cx, {"account_id": account_id, "kind": "spend", "amount": -amount,
                             "balance_after": balance, "description": reason, "created_at": now})
    return {"outcome": "spent", "balance": balance, "auto_recharge": _auto_recharge_in_tx(cx, row, now)}


@reads
def get_balance(cx: Connection, account_id: str) -> int | None:
    """The account's balance in hundredths, or None for an unknown account."""
    row = cx.execute("SELECT credit_hundredths FROM accounts WHERE id = ?", (account_id,)).fetchone()
    return row[0] if row else None


@reads
def get_price(cx: Connection, account_id: str) -> int | None:
    """The price per bot reply its agency set for the account (hundredths), or None (the default)."""
    row = cx.execute("SELECT credits_per_reply FROM accounts WHERE id = ?", (account_id,)).fetchone()
    return row[0] if row else None
