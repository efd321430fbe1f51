"""Auto-recharge (docs/api.md#webhook-delivery "an agency sub-account auto-recharge notification whose payload carries an
idempotency_key"; docs/design.md#api-decisions "Auto-recharge"): a spend that leaves a sub-account below its threshold queues
one subaccount.auto_recharge notification to the agency, in the spend's transaction; none again until a
grant brings the balance back to the threshold. In-process app on the real SQLite file, spends through
services.credits.spend_credits (and spend.sync inside a larger write, as the bot makes them), real local
receivers, signatures checked with standardwebhooks."""
import asyncio
import json
from datetime import timedelta

import pytest
from standardwebhooks.webhooks import WebhookVerificationError

from common.errors import InsufficientCredits
from common.ids import utcnow
from services import accounts, credits
from storage.outbox import list_outbox
from tests.recharge import SUBS, grant, set_auto_recharge, DATA_FIELDS, EVENT, distinct, recharge_notifications, spend_from_outside, \
    spend_in_reply_tx



async def listen(services, agency, url):
    """The agency's notificationUrls["subaccount.auto_recharge"] (stored directly, as the settings API does)."""
    await accounts.update_settings(services.db, agency["account_id"], {"notificationUrls": {EVENT: url}})


async def secret_of(services, account):
    return (await accounts.get_webhook_secret(services.db, services.box, account["account_id"]))["secret"]


async def subaccount(api, agency, sub):
    return (await api.get(f"{SUBS}/{sub['account_id']}", key=agency["api_key"])).json


async def spend(services, sub, amount, reason="bot reply"):
    return await credits.spend_credits(services.db, sub["account_id"], amount, reason, delivery=services.delivery)


async def queued(services, agency):
    return [row for row in await list_outbox(services.db, agency["account_id"], kind="notification")
            if row["event_type"] == EVENT]


async def test_the_issue_scenario_one_notification_one_grant_then_a_new_episode(api, services, agency, sub,
                                                                                receiver, workers):
    """The issue: a sub-account with 3 credits and threshold 2; spends cross the threshold and the agency's
    receiver gets exactly one notification (verified with standardwebhooks) whose data carries
    idempotency_key, sub_account_id, email, balance, threshold, amount; granting with that key twice adds the
    amount once; spending below again after that grant sends a second notification with a new key; the
    transactions list shows every grant and spend with the right balanceAfter."""
    await listen(services, agency, receiver.url)
    await grant(api, agency, sub, 3)
    await set_auto_recharge(api, agency, sub, 2, 100)
    worker = workers()

    assert await spend(services, sub, 1, "reply 1") == 2  # 3 -> 2: not below the threshold
    assert await worker.run_due(utcnow()) == 0
    assert await spend(services, sub, 1, "reply 2") == 1  # 2 -> 1: crosses it
    assert await spend(services, sub, 1, "reply 3") == 0  # still the same episode
    with pytest.raises(InsufficientCredits):
        await spend(services, sub, 1, "reply 4")
    assert await worker.run_due(utcnow()) == 1
    assert await worker.run_due(utcnow() + timedelta(days=2)) == 0

    secret = await secret_of(services, agency)
    [first] = recharge_notifications(receiver.requests, secret)
    assert set(first) == {"event", "id", "occurredAt", "accountId", "data"}
    assert first["event"] == EVENT and first["accountId"] == agency["account_id"]
    assert receiver.requests[0]["headers"]["Webhook-Id"] == first["id"]
    data = first["data"]
    assert set(data) == DATA_FIELDS
    key = data["idempotency_key"]
    assert data == {"idempotency_key": key, "sub_account_id": sub["account_id"], "email": sub["email"],
                    "balance": 1, "threshold": 2, "amount": 100}
    state = await subaccount(api, agency, sub)
    assert state["autoRecharge"]["pendingIdempotencyKey"] == key and state["autoRecharge"]["notifiedAt"]

    # The agency's automation grants `amount` with Idempotency-Key: <idempotency_key>, twice (a redelivery).
    once = await grant(api, agency, sub, data["amount"], key=key)
    twice = await grant(api, agency, sub, data["amount"], key=key)
    assert once.json["new_balance"] == 100 and twice.body == once.body
    assert twice.headers["Idempotent-Replayed"] == "true"
    state = await subaccount(api, agency, sub)
    assert state["credits"] == 100 and state["autoRecharge"]["pendingIdempotencyKey"] is None

    assert await spend(services, sub, 98.5, "reply 5") == 1.5
    await worker.run_due(utcnow())
    second = distinct(recharge_notifications(receiver.requests, secret))
    assert len(second) == 2
    assert second[1]["id"] != first["id"]
    assert second[1]["data"]["idempotency_key"] not in (key, None)
    assert {**second[1]["data"], "idempotency_key": None} == {**data, "idempotency_key": None, "balance": 1.5}

    r = await api.get(f"{SUBS}/{sub['account_id']}/transactions", key=agency["api_key"])
    assert [(t["kind"], t["amount"], t["balanceAfter"], t["idempotencyKey"]) for t in r.json["data"]] == [
        ("spend", -98.5, 1.5, None), ("grant", 100, 100, key),
        ("spend", -1, 0, None), ("spend", -1, 1, None), ("spend", -1, 2, None), ("grant", 3, 3, None)]


async def test_a_hundred_concurrent_spends_across_the_threshold_notify_once(api, services, agency, sub, receiver,
                                                                            workers):
    """The issue: "100 concurrent spends that cross the threshold from many requests -> exactly one
    notification". The callers are of three kinds at once: spend_credits (group-committed by the writer),
    spend.sync inside a larger write (the bot's form), and other connections to the file (threads, as another
    process would), which SQLite's lock serializes with the writer."""
    await listen(services, agency, receiver.url)
    await grant(api, agency, sub, 60)
    await set_auto_recharge(api, agency, sub, 50, 25)
    loop = asyncio.get_running_loop()
    calls = []
    for i in range(100):
        if i % 5 == 3:
            calls.append(services.db.write(spend_in_reply_tx, sub["account_id"], 100, f"reply {i}"))
        elif i % 5 == 4:
            calls.append(loop.run_in_executor(None, spend_from_outside, services, sub["account_id"], 100,
                                              f"reply {i}"))
        else:
            calls.append(spend(services, sub, 1, f"reply {i}"))
    outcomes = await asyncio.gather(*calls, return_exceptions=True)

    spent = [o for o in outcomes if not isinstance(o, (Exception, dict)) or (isinstance(o, dict)
                                                                            and o["outcome"] == "spent")]
    assert len(spent) == 60, outcomes  # the balance of 60 ran out; the other 40 spent nothing
    assert not [o for o in outcomes if isinstance(o, Exception) and not isinstance(o, InsufficientCredits)]
    assert len(await queued(services, agency)) == 1
    await workers().run_due(utcnow())
    [notification] = recharge_notifications(receiver.requests, await secret_of(services, agency))
    assert notification["data"]["balance"] == 49 and notification["data"]["threshold"] == 50
    state = await subaccount(api, agency, sub)
    assert state["credits"] == 0 and state["autoRecharge"]["pendingIdempotencyKey"] == \
        notification["data"]["idempotency_key"]


async def test_spend_credits_wakes_the_running_delivery_worker(api, services, agency, sub, receiver, workers):
    """"Delivered ... like every notification": with the worker running as the server runs it (its poll made
    an hour long here), the spend's wake-up alone gets the notification to the receiver."""
    await listen(services, agency, receiver.url)
    await grant(api, agency, sub, 2)
    await set_auto_recharge(api, agency, sub, 2, 10)
    worker = workers(poll_seconds=3600)
    services.delivery = worker
    worker.start()
    await asyncio.sleep(0.2)  # its first look at the outbox (empty) is done; now it waits
    await spend(services, sub, 1)
    for _ in range(300):  # a deadline, not a timing assertion
        if receiver.requests:
            break
        await asyncio.sleep(0.05)
    assert len(recharge_notifications(receiver.requests, await secret_of(services, agency))) == 1


async def test_a_failed_delivery_is_retried_with_the_same_id_and_key(api, services, agency, sub, receiver, workers):
    """docs/design.md#api-decisions Notifications: "same outbox, signing and retries": a 503 is retried with the same webhook-id
    and body (the same idempotency_key), every attempt recorded; the receiver's second copy grants nothing
    when it uses the key."""
    receiver.answers = [(503, {}, b"busy")]
    await listen(services, agency, receiver.url)
    await grant(api, agency, sub, 5)
    await set_auto_recharge(api, agency, sub, 5, 20)
    await spend(services, sub, 0.5)
    worker = workers()
    now = utcnow()
    assert await worker.run_due(now) == 1
    assert await worker.run_due(now + timedelta(seconds=10)) == 1
    copies = recharge_notifications(receiver.requests, await secret_of(services, agency))
    assert len(copies) == 2 and copies[0] == copies[1]
    assert len({r["headers"]["Webhook-Id"] for r in receiver.requests}) == 1
    [row] = await queued(services, agency)
    assert row["status"] == "sent" and row["attempts"] == 2
    for copy in copies:  # what an automation does with each delivery
        await grant(api, agency, sub, copy["data"]["amount"], key=copy["data"]["idempotency_key"])
    assert (await subaccount(api, agency, sub))["credits"] == 24.5


async def test_no_url_means_no_notification_and_the_next_spend_asks_again(api, services, agency, sub, receiver,
                                                                         workers):
    """Notifications go to the URLs in notificationUrls (docs/design.md#api-decisions); with none for this event nothing is
    queued and no episode starts, so a spend after the agency configured the URL notifies."""
    await grant(api, agency, sub, 10)
    await set_auto_recharge(api, agency, sub, 8, 10)
    await spend(services, sub, 3)  # 7 < 8, but nobody listens
    assert await queued(services, agency) == []
    assert (await subaccount(api, agency, sub))["autoRecharge"]["pendingIdempotencyKey"] is None
    await listen(services, agency, receiver.url)
    await spend(services, sub, 1)
    assert len(await queued(services, agency)) == 1
    await workers().run_due(utcnow())
    [n] = recharge_notifications(receiver.requests, await secret_of(services, agency))
    assert n["data"]["balance"] == 6


async def test_a_grant_short_of_the_threshold_keeps_the_episode(api, services, agency, sub, receiver):
    """"none again until a grant brings the balance back to >= threshold": a smaller grant leaves the episode
    open (its key still pending), and the spends after it queue nothing."""
    await listen(services, agency, receiver.url)
    await grant(api, agency, sub, 10)
    await set_auto_recharge(api, agency, sub, 10, 50)
    await spend(services, sub, 5)
    key = (await subaccount(api, agency, sub))["autoRecharge"]["pendingIdempotencyKey"]
    await grant(api, agency, sub, 4.99)  # 9.99 < 10
    await spend(services, sub, 1)
    assert len(await queued(services, agency)) == 1
    assert (await subaccount(api, agency, sub))["autoRecharge"]["pendingIdempotencyKey"] == key
    await grant(api, agency, sub, 1.01)  # exactly 10: at the threshold again, the episode ends
    assert (await subaccount(api, agency, sub))["autoRecharge"]["pendingIdempotencyKey"] is None
    await spend(services, sub, 0.01)
    assert len(await queued(services, agency)) == 2


async def test_changing_the_setting(api, services, agency, sub, receiver):
    """Turning auto-recharge off ends the episode and stops notifications; a sub-account that is already below
    a new threshold is notified at its next spend (there is no crossing to wait for); changing the numbers
    while a notification is outstanding and the balance stays below sends no second one."""
    await listen(services, agency, receiver.url)
    await grant(api, agency, sub, 10)
    await spend(services, sub, 1)  # no setting: nothing
    assert await queued(services, agency) == []
    await set_auto_recharge(api, agency, sub, 20, 50)  # 9 is already below 20
    assert (await subaccount(api, agency, sub))["autoRecharge"]["pendingIdempotencyKey"] is None
    await spend(services, sub, 1)
    assert len(await queued(services, agency)) == 1
    state = await set_auto_recharge(api, agency, sub, 30, 60)  # still below: the same episode
    assert state["autoRecharge"]["pendingIdempotencyKey"]
    await spend(services, sub, 1)
    assert len(await queued(services, agency)) == 1
    state = await set_auto_recharge(api, agency, sub, 5, 60)  # 7 >= 5: the episode is over
    assert state["autoRecharge"]["pendingIdempotencyKey"] is None
    await spend(services, sub, 2)  # 5: not below
    assert len(await queued(services, agency)) == 1
    await set_auto_recharge(api, agency, sub, None, None)
    await spend(services, sub, 2)  # 3 < 5, but auto-recharge is off
    assert len(await queued(services, agency)) == 1
    await set_auto_recharge(api, agency, sub, 5, 60)
    await spend(services, sub, 1)
    rows = await queued(services, agency)
    assert len(rows) == 2
    assert json.loads(rows[1]["payload"])["data"]["balance"] == 2


async def test_only_the_sub_accounts_own_agency_is_notified(api, services, agency, sub, other_agency, other_sub,
                                                            account, receiver, workers):
    """Tenancy: the notification goes to the sub-account's agency only, signed with its secret; another
    agency listening on the same URL gets nothing, and a standard account's spends never notify anyone."""
    standard = account
    for owner in (agency, other_agency, standard):
        await listen(services, owner, receiver.url)
    await grant(api, agency, sub, 2)
    await set_auto_recharge(api, agency, sub, 2, 1)
    other_key = other_agency["api_key"]
    r = await api.patch(f"{SUBS}/{sub['account_id']}", {"autoRecharge": None}, key=other_key)
    assert r.code == 404  # the other agency cannot turn it off either
    await api.post("/v1/subaccounts/credits", {"email": other_sub["email"], "amount": 5}, key=other_key,
                   query_key=False)
    await credits.spend_credits(services.db, other_sub["account_id"], 4, "reply")  # no setting there
    cx = services.db.connect_sync()  # a standard account has no agency, whatever its columns say
    try:
        cx.execute("UPDATE accounts SET credit_hundredths = 500, auto_recharge_threshold = 1000,"
                   " auto_recharge_amount = 100 WHERE id = ?", (standard["account_id"],))
    finally:
        cx.close()
    await credits.spend_credits(services.db, standard["account_id"], 1, "reply")
    await spend(services, sub, 1)
    await workers().run_due(utcnow())
    assert len(receiver.requests) == 1
    assert recharge_notifications(receiver.requests, await secret_of(services, agency))[0]["data"][
        "sub_account_id"] == sub["account_id"]
    with pytest.raises(WebhookVerificationError):
        recharge_notifications(receiver.requests, await secret_of(services, other_agency))
    assert await queued(services, other_agency) == [] and await queued(services, standard) == []


async def test_the_outcome_a_bot_reply_reads(services, agency, sub, api, receiver):
    """The bot's contract: spend.sync(cx, account_id, amount, reason, now) inside the reply's transaction
    answers {"outcome": "spent", "balance", "auto_recharge"} (auto_recharge: the queued notification, or
    None), {"outcome": "insufficient", "balance"} or {"outcome": "not_found"}."""
    await listen(services, agency, receiver.url)
    await grant(api, agency, sub, 2)
    await set_auto_recharge(api, agency, sub, 2, 5)
    first = await services.db.write(spend_in_reply_tx, sub["account_id"], 50, "reply 1")
    assert first["outcome"] == "spent" and first["balance"] == 150
    assert set(first["auto_recharge"]) == {"webhook_id", "idempotency_key"}
    [row] = await queued(services, agency)
    assert row["webhook_id"] == first["auto_recharge"]["webhook_id"]
    second = await services.db.write(spend_in_reply_tx, sub["account_id"], 50, "reply 2")
    assert second == {"outcome": "spent", "balance": 100, "auto_recharge": None}
    assert await services.db.write(spend_in_reply_tx, sub["account_id"], 500, "reply 3") == \
        {"outcome": "insufficient", "balance": 100}
    assert await services.db.write(spend_in_reply_tx, "acc_missing", 1, "x") == {"outcome": "not_found"}
