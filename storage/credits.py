"""SQL for credit balances (integer hundredths on accounts), their history and Idempotency-Key answers."""
import json
from decimal import Decimal

from storage.db import fetch_one, reads, writes

SCALE = 100  # balances and amounts are stored as integer hundredths of a credit
MAX_BALANCE = 10 ** 12 * SCALE  # the migration's CHECK; < 2^53, so every balance is an exact JSON number


def as_number(hundredths):
    """Hundredths as the API shows them: 150 -> 1.5, 200 -> 2 (an int when whole, else the float whose
    shortest repr is the exact decimal, e.g. 30 -> 0.3)."""
    whole, rest = divmod(hundredths, SCALE)
    return whole if rest == 0 else float(Decimal(hundredths) / SCALE)


def grant_response(sub_account_id, amount, balance):
    """The body of POST /v1/subaccounts/credits (spec §4.6), amounts in hundredths."""
    return {"success": True, "sub_account_id": sub_account_id, "credits_added": as_number(amount),
            "new_balance": as_number(balance)}


def _insert_transaction(cx, tx):
    cx.execute("INSERT INTO credit_transactions (account_id, kind, amount, balance_after, description,"
               " granted_by, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (tx["account_id"], tx["kind"], tx["amount"], tx["balance_after"],
                tx.get("description"), tx.get("granted_by"), tx.get("idempotency_key"), tx["created_at"]))


def _find_subaccount(cx, agency_id, email):
    return fetch_one(cx, "SELECT id, credit_hundredths FROM accounts WHERE email = ? AND type = 'subaccount'"
                     " AND parent_agency_id = ?", (email, agency_id))


def _remembered(cx, account_id, key, not_before):
    """The live Idempotency-Key row {request_hash, response}, or None. Rows older than not_before are
    forgotten here (this account's only), so the table holds at most a day of keys per account."""
    cx.execute("DELETE FROM idempotency_keys WHERE account_id = ? AND created_at < ?", (account_id, not_before))
    row = cx.execute("SELECT request_hash, response FROM idempotency_keys WHERE account_id = ? AND key = ?",
                     (account_id, key)).fetchone()
    return {"request_hash": row["request_hash"], "response": json.loads(row["response"])} if row else None


@writes
def grant(cx, agency_id, email, amount, description, now, idempotency=None):
    """Add ``amount`` hundredths to the agency's sub-account with this email and record the grant, in this
    one transaction (the single writer serializes it: concurrent grants never lose an update).

    idempotency: None, or {"key", "request_hash", "not_before"}; a live row for the key is answered
    instead of granting, and a grant remembers its answer under the key.
    Returns {"outcome": "replayed", "request_hash", "response"} | {"outcome": "not_found"} |
    {"outcome": "over_limit", "balance"} | {"outcome": "granted", "response"}; nothing is written unless
    granted."""
    if idempotency is not None:
        seen = _remembered(cx, agency_id, idempotency["key"], idempotency["not_before"])
        if seen is not None:
            return {"outcome": "replayed", **seen}
    sub = _find_subaccount(cx, agency_id, email)
    if sub is None:
        return {"outcome": "not_found"}
    balance = sub["credit_hundredths"] + amount
    if balance > MAX_BALANCE:
        return {"outcome": "over_limit", "balance": sub["credit_hundredths"]}
    # Relative update (not "SET = computed"): correct even if a future writer runs beside this one.
    cx.execute("UPDATE accounts SET credit_hundredths = credit_hundredths + ? WHERE id = ?", (amount, sub["id"]))
    balance = cx.execute("SELECT credit_hundredths FROM accounts WHERE id = ?", (sub["id"],)).fetchone()[0]
    key = idempotency["key"] if idempotency else None
    _insert_transaction(cx, {"account_id": sub["id"], "kind": "grant", "amount": amount,
                             "balance_after": balance, "description": description, "granted_by": agency_id,
                             "idempotency_key": key, "created_at": now})
    response = grant_response(sub["id"], amount, balance)
    if idempotency is not None:
        cx.execute("INSERT INTO idempotency_keys (account_id, key, request_hash, response, created_at)"
                   " VALUES (?, ?, ?, ?, ?)",
                   (agency_id, key, idempotency["request_hash"], json.dumps(response), now))
    return {"outcome": "granted", "response": response}


@writes
def spend(cx, account_id, amount, reason, now):
    """Take ``amount`` hundredths from the account's balance unless that would go below zero, and record
    it, in one transaction. Returns {"outcome": "spent", "balance"} | {"outcome": "insufficient",
    "balance"} | {"outcome": "not_found"}; nothing is written unless spent. Compose it into a larger write
    (a bot reply and its cost) with ``spend.sync(cx, ...)``."""
    updated = cx.execute("UPDATE accounts SET credit_hundredths = credit_hundredths - ?"
                         " WHERE id = ? AND credit_hundredths >= ?", (amount, account_id, amount)).rowcount
    row = cx.execute("SELECT credit_hundredths FROM accounts WHERE id = ?", (account_id,)).fetchone()
    if row is None:
        return {"outcome": "not_found"}
    if not updated:
        return {"outcome": "insufficient", "balance": row[0]}
    _insert_transaction(cx, {"account_id": account_id, "kind": "spend", "amount": -amount,
                             "balance_after": row[0], "description": reason, "created_at": now})
    return {"outcome": "spent", "balance": row[0]}


@reads
def get_balance(cx, account_id):
    """The account's balance in hundredths, or None for an unknown account."""
    row = cx.execute("SELECT credit_hundredths FROM accounts WHERE id = ?", (account_id,)).fetchone()
    return row[0] if row else None


@reads
def page_subaccounts(cx, agency_id, after_id, limit):
    """Up to ``limit`` sub-accounts of the agency with id > after_id (keyset on the time-ordered id)."""
    return [dict(r) for r in cx.execute(
        "SELECT id, name, email, credit_hundredths, created_at FROM accounts WHERE parent_agency_id = ?"
        " AND type = 'subaccount' AND id > ? ORDER BY id LIMIT ?", (agency_id, after_id or "", limit))]


@reads
def list_transactions(cx, account_id, limit=100):
    """The account's most recent credit transactions, newest first."""
    return [dict(r) for r in cx.execute(
        "SELECT id, account_id, kind, amount, balance_after, description, granted_by, idempotency_key,"
        " created_at FROM credit_transactions WHERE account_id = ? ORDER BY id DESC LIMIT ?",
        (account_id, limit))]
