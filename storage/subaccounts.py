"""SQL for an agency's sub-accounts: lookup by id, listing, the auto-recharge setting, and credit-history pages."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from storage.audit import record_by
from storage.credits import close_recharge_episode_in_tx
from storage.db import fetch_all, fetch_one, reads, writes
from storage.interface import Connection, Row

_COLUMNS = ("id, name, email, credit_hundredths, auto_recharge_threshold, auto_recharge_amount, auto_recharge_key,"
            " auto_recharge_notified_at, credits_per_reply, created_at")
# What the agency may change on its sub-account (PATCH /v1/subaccounts/{id}, the Agency pages).
_SETTABLE = ("auto_recharge_threshold", "auto_recharge_amount", "credits_per_reply")


def _get_in_tx(cx: Connection, agency_id: str, sub_id: str) -> Row | None:
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM accounts WHERE id = ? AND parent_agency_id = ?"
                     " AND type = 'subaccount'", (sub_id, agency_id))


@reads
def get_subaccount(cx: Connection, agency_id: str, sub_id: str) -> Row | None:
    """The agency's sub-account with this id, or None (also for another agency's)."""
    return _get_in_tx(cx, agency_id, sub_id)


@reads
def get_own(cx: Connection, account_id: str) -> Row | None:
    """A sub-account as it sees itself (its Credits page and navigation), or None for any other account type."""
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM accounts WHERE id = ? AND type = 'subaccount'", (account_id,))


@reads
def page_subaccounts(cx: Connection, agency_id: str, after_id: str | None, limit: int) -> list[Row]:
    """Up to ``limit`` sub-accounts of the agency with id > after_id (keyset on the time-ordered id)."""
    return fetch_all(cx, f"SELECT {_COLUMNS} FROM accounts WHERE parent_agency_id = ? AND type = 'subaccount'"
                     " AND id > ? ORDER BY id LIMIT ?", (agency_id, after_id or "", limit))


@writes
def update_subaccount(cx: Connection, agency_id: str, sub_id: str, changes: Mapping[str, Any], by: Mapping[str, Any] | None = None) -> Row | None:
    """Set the agency's settings of its sub-account in one transaction; changes: column -> value among
    _SETTABLE (auto-recharge threshold and amount in hundredths, both None = off; credits_per_reply in
    hundredths, None = the default). Returns the sub-account as it is now, or None when the agency has no such
    sub-account. When auto-recharge changes, an outstanding notification's episode ends if the balance is
    not below the new threshold (or auto-recharge is off); otherwise it stays open, so changing the numbers
    never sends a second notification for the same low balance. Audited in the agency as subaccount.updated
    by ``by``."""
    unknown = set(changes) - set(_SETTABLE)
    if unknown or not changes:
        raise ValueError(f"not a sub-account setting: {sorted(unknown)}")
    columns = ", ".join(f"{column} = ?" for column in changes)
    updated = cx.execute(f"UPDATE accounts SET {columns} WHERE id = ? AND parent_agency_id = ?"
                         " AND type = 'subaccount'", (*changes.values(), sub_id, agency_id)).rowcount
    if not updated:
        return None
    if "auto_recharge_threshold" in changes:
        close_recharge_episode_in_tx(cx, sub_id)
    record_by(cx, by, account_id=agency_id, action="subaccount.updated", subject_id=sub_id, detail=changes)
    return _get_in_tx(cx, agency_id, sub_id)


@writes
def set_auto_recharge(cx: Connection, agency_id: str, sub_id: str, threshold: int | None, amount: int | None) -> Row | None:
    """Set (threshold and amount in hundredths) or clear (both None) the sub-account's auto-recharge."""
    return update_subaccount.sync(cx, agency_id, sub_id, {"auto_recharge_threshold": threshold,
                                                          "auto_recharge_amount": amount})


@reads
def page_transactions(cx: Connection, account_id: str, before_id: str | None, limit: int) -> list[Row]:
    """Up to ``limit`` of the account's credit transactions with id < before_id, newest first."""
    return fetch_all(cx, "SELECT id, kind, amount, balance_after, description, idempotency_key, created_at"
                     " FROM credit_transactions WHERE account_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
                     (account_id, before_id if before_id is not None else 2 ** 63 - 1, limit))
