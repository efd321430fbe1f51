"""SQL for credit balances (integer hundredths on accounts) and their history."""
from decimal import Decimal

from common.errors import Invalid, NotFound
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


@writes
def grant(cx, agency_id, email, amount, description, now, idempotency_key=None):
    """Add ``amount`` hundredths to the agency's sub-account with this email and record the grant, in this
    one transaction (the single writer serializes it: concurrent grants never lose an update).
    idempotency_key: the request's key, kept in the history. Returns the body of the answer (spec §4.6);
    raises NotFound SUBACCOUNT_NOT_FOUND or Invalid (the balance would pass its ceiling), writing nothing."""
    sub = _find_subaccount(cx, agency_id, email)
    if sub is None:
        raise NotFound(f"no sub-account with email {email} under this agency", code="SUBACCOUNT_NOT_FOUND")
    if sub["credit_hundredths"] + amount > MAX_BALANCE:
        raise Invalid(f"the balance would exceed {as_number(MAX_BALANCE)} credits")
    # Relative update (not "SET = computed"): correct even if a future writer runs beside this one.
    cx.execute("UPDATE accounts SET credit_hundredths = credit_hundredths + ? WHERE id = ?", (amount, sub["id"]))
    balance = cx.execute("SELECT credit_hundredths FROM accounts WHERE id = ?", (sub["id"],)).fetchone()[0]
    _insert_transaction(cx, {"account_id": sub["id"], "kind": "grant", "amount": amount,
                             "balance_after": balance, "description": description, "granted_by": agency_id,
                             "idempotency_key": idempotency_key, "created_at": now})
    return grant_response(sub["id"], amount, balance)


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
