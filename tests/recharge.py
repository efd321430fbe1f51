"""Helpers for the auto-recharge tests, written to be reused when the rule bot makes the spends: verified
subaccount.auto_recharge notifications out of a receiver's requests, and spends made the way the bot
makes them (storage.credits.spend.sync inside a larger write transaction)."""
from standardwebhooks import Webhook

from common.ids import now_iso
from storage import credits as credit_store
from tests import db_direct


EVENT = "subaccount.auto_recharge"
DATA_FIELDS = {"idempotency_key", "sub_account_id", "email", "balance", "threshold", "amount"}


def recharge_notifications(requests, secret):
    """The subaccount.auto_recharge bodies among a receiver's requests ([{"headers", "body"}]), in arrival
    order, each verified with standardwebhooks (WebhookVerificationError on a bad signature). A
    redelivery appears again with the same id."""
    payloads = [Webhook(secret).verify(r["body"], r["headers"]) for r in requests]
    return [p for p in payloads if p["event"] == EVENT]


def distinct(payloads):
    """One payload per notification id (drops redeliveries), first arrival order."""
    seen = {}
    for payload in payloads:
        seen.setdefault(payload["id"], payload)
    return list(seen.values())


def spend_in_reply_tx(cx, account_id, hundredths, reason, now=None):
    """(In the writer.) A spend as a bot reply makes it: spend.sync inside the reply's own transaction,
    returning its outcome (the bot branch's contract). Run it with ``db.write(spend_in_reply_tx, ...)``."""
    return credit_store.spend.sync(cx, account_id, hundredths, reason, now or now_iso())


def spend_from_outside(database, account_id, hundredths, reason):
    """One spend committed on a connection of this process to a running server's database (database: what
    tests/db_direct.connect takes; the end-to-end tests' stand-in for a bot reply inside server.py); SQLite's lock
    serializes it with the server's writer, PostgreSQL's row lock with the server's transactions. Returns the
    spend's outcome."""
    cx = db_direct.connect(database)
    try:
        cx.execute("BEGIN IMMEDIATE")
        try:
            outcome = spend_in_reply_tx(cx, account_id, hundredths, reason)
            cx.execute("COMMIT")
        except BaseException:
            cx.execute("ROLLBACK")
            raise
        return outcome
    finally:
        cx.close()


SUBS = "/v1/subaccounts"


async def grant(api, agency, sub, amount, key=None):
    r = await api.post("/v1/subaccounts/credits", {"email": sub["email"], "amount": amount}, key=agency["api_key"],
                       query_key=False, headers={"Idempotency-Key": key} if key else None)
    assert r.code == 200, r.body
    return r


async def set_auto_recharge(api, agency, sub, threshold, amount):
    setting = None if threshold is None else {"threshold": threshold, "amount": amount}
    r = await api.patch(f"{SUBS}/{sub['account_id']}", {"autoRecharge": setting}, key=agency["api_key"])
    assert r.code == 200, r.body
    return r.json
