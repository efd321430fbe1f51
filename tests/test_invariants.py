"""The invariants that once rested on SQLite's single writer, under concurrency, on whichever backend the suite
runs on (PARLEY_TEST_DATABASE_URL set: PostgreSQL at READ COMMITTED, where every request has its own connection
and transaction, so these races are real). Issue 19: "concurrent requests must still produce one contact, one
message, one grant"; docs/design.md#wave-3-contracts: "Invariants live in the data on both backends: unique indexes (contact phone,
contact email, messageSid per account, idempotency key per account, grant key per agency for good), conditional
updates (credits, bot outcome, recipient state)". Each test fires its requests at the same moment over real HTTP
against the in-process app (or its service calls through asyncio.gather) and counts what was stored."""
import asyncio
import json
import random

import pytest
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from common.errors import InsufficientCredits
from common.ids import now_iso
from services import bot, contacts, credits, lists
from storage.campaigns import hand_over
from services.delivery import DeliveryWorker
from storage import bot_state

INBOUND = "/v1/incoming_custom_channel_message"
GRANT = "/v1/subaccounts/credits"
RULES = [{"keywords": ["price"], "answer": "Plans start at $10."}]


# Room for every bot answer of a burst at once: the credits race is between replies of one account.
pytestmark = pytest.mark.settings(bot_concurrency=16, bot_concurrency_per_account=16)


async def burst(http_server_client, requests):
    """Send every (method, path, body, headers) at once on its own connection; the responses, in order, with
    .json decoded."""
    client = SimpleAsyncHTTPClient(force_instance=True, max_clients=len(requests))
    try:
        responses = await asyncio.gather(*(
            client.fetch(http_server_client.get_url(path), method=method, raise_error=False,
                         headers={"Content-Type": "application/json", **(headers or {})},
                         body=None if body is None else json.dumps(body))
            for method, path, body, headers in requests))
    finally:
        client.close()
    for r in responses:
        r.json = json.loads(r.body) if r.body else None
    return responses


def _rows(cx, sql, params):
    return [tuple(row) for row in cx.execute(sql, params).fetchall()]


async def rows(services, sql, *params):
    """The rows of a read, as tuples, through the storage's own read connection (either backend)."""
    return await services.db.read(_rows, sql, params)


async def count(services, sql, *params):
    return (await rows(services, sql, *params))[0][0]


async def configure_bot(api, key, webhook="http://127.0.0.1:9/replies"):
    r = await api.patch("/v1/account/settings", {"bot": {"active": True, "rules": RULES},
                                                 "customChannelWebhookUrl": webhook}, key=key)
    assert r.code == 200, r.body


# ---- contacts -----------------------------------------------------------------------------------

PHONES = ["+14155552671", "+1 415 555 2671", "+1 (415) 555-2671", "+1-415-555-2671"]
EMAILS = ["lead@example.com", "LEAD@example.com", "Lead@Example.Com", " lead@EXAMPLE.com "]


@pytest.mark.parametrize("field, spellings", [("phone", PHONES), ("email", EMAILS)])
async def test_concurrent_creates_of_one_phone_or_email_give_one_contact(http_server_client, account, services,
                                                                         field, spellings):
    """Spec §2 rule 2: "A contact with a phone number that already exists is not duplicated. The existing
    contact is returned." (and docs/design.md#api-decisions: the same case-folded email when there is no phone). 30 creates in
    different spellings at once: one 201, 29 answers of 200 with the same contact, one row."""
    path = "/v1/contacts?apiKey=" + account["api_key"]
    responses = await burst(http_server_client, [("POST", path, {field: spellings[i % len(spellings)],
                                                                 "firstName": f"Caller {i}"}, None)
                                                 for i in range(30)])
    assert sorted(r.code for r in responses) == [200] * 29 + [201], [r.body for r in responses if r.code >= 300]
    assert len({r.json["id"] for r in responses}) == 1
    assert await count(services, "SELECT COUNT(*) FROM contacts WHERE account_id = ?", account["account_id"]) == 1
    query = "phoneNumber=%2B14155552671" if field == "phone" else "email=lead@example.com"
    [found] = (await burst(http_server_client, [("GET", f"/v1/contacts?{query}&apiKey={account['api_key']}",
                                                 None, None)]))
    assert found.code == 200 and found.body.count(responses[0].json["id"].encode()) == 1


# ---- inbound messages ---------------------------------------------------------------------------

def inbound(sid, from_id, body="Hello"):
    return {"customData": {"messageSid": sid, "fromId": from_id, "toId": "shop", "body": body}}


async def test_one_message_sid_sent_concurrently_is_stored_once_and_one_sender_is_one_contact(
        http_server_client, account, services):
    """Spec §4.4: customData.messageSid "Unique per message. Used to prevent a message being processed
    twice."; docs/api.md#custom-channel: "The same fromId always maps to the same contact." At once: 20 repeats of one
    messageSid and 20 other messages of the same new sender. 21 messages, every repeat answers the same
    messageId, one contact, one channel identity."""
    account_id, path = account["account_id"], f"{INBOUND}?apiKey={account['api_key']}"
    requests = [("POST", path, inbound("repeat-1", "new-sender"), None) for _ in range(20)]
    requests += [("POST", path, inbound(f"other-{i}", "new-sender"), None) for i in range(20)]
    random.Random(19).shuffle(requests)
    responses = await burst(http_server_client, requests)
    assert [r.code for r in responses] == [200] * 40, [r.body for r in responses if r.code != 200]
    by_sid = {}
    for request, response in zip(requests, responses):
        by_sid.setdefault(request[2]["customData"]["messageSid"], set()).add(response.json["messageId"])
    assert len(by_sid) == 21 and all(len(ids) == 1 for ids in by_sid.values())
    assert await count(services, "SELECT COUNT(*) FROM messages WHERE account_id = ?", account_id) == 21
    assert await count(services, "SELECT COUNT(DISTINCT external_id) FROM messages WHERE account_id = ?",
                       account_id) == 21
    assert await count(services, "SELECT COUNT(*) FROM contacts WHERE account_id = ?", account_id) == 1
    assert await count(services, "SELECT COUNT(*) FROM channel_identities WHERE account_id = ?", account_id) == 1


async def test_one_message_sid_is_per_account(http_server_client, account, other_account, services):
    """The messageSid is unique per account (docs/design.md#wave-3-contracts "messageSid per account"): two accounts racing with the
    same messageSid each store their own message."""
    requests = [("POST", f"{INBOUND}?apiKey={a['api_key']}", inbound("shared-sid", "someone"), None)
                for a in (account, other_account) for _ in range(10)]
    responses = await burst(http_server_client, requests)
    assert [r.code for r in responses] == [200] * 20
    assert len({r.json["messageId"] for r in responses[:10]}) == 1
    assert len({r.json["messageId"] for r in responses[10:]}) == 1
    assert responses[0].json["messageId"] != responses[10].json["messageId"]
    assert await count(services, "SELECT COUNT(*) FROM messages WHERE external_id = 'shared-sid'") == 2


# ---- Idempotency-Key and grant keys ---------------------------------------------------------------

async def test_one_idempotency_key_sent_concurrently_has_one_effect_and_one_answer(http_server_client, account,
                                                                                   services):
    """docs/design.md#api-decisions "Idempotency (all mutating POSTs)": "first answer replayed for 24 h with Idempotent-Replayed:
    true". Today's answer to requests racing on one key (storage/idempotency.py: the key's row is stored in the
    transaction of the write it protects, and a request that finds it replays it): every caller gets the
    first answer, 200 with the same body, all but one replayed; one list is created."""
    path = "/v1/lists?apiKey=" + account["api_key"]
    responses = await burst(http_server_client, [("POST", path, {"name": "Only once"}, {"Idempotency-Key": "race"})
                                                 for _ in range(20)])
    assert [r.code for r in responses] == [201] * 20, [r.body for r in responses if r.code != 201]
    assert len({r.body for r in responses}) == 1
    assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in responses) == 19
    assert await count(services, "SELECT COUNT(*) FROM lists WHERE account_id = ?", account["account_id"]) == 1
    assert await count(services, "SELECT COUNT(*) FROM idempotency_keys WHERE account_id = ?",
                       account["account_id"]) == 1


async def test_one_grant_key_sent_concurrently_grants_once(http_server_client, agency, sub, services):
    """docs/design.md#api-decisions "Auto-recharge": "The agency's automation grants amount with Idempotency-Key:
    <idempotency_key>, so a notification delivered twice never grants twice"; docs/api.md#sub-account-credits-agency-accounts: "so that a repeated
    notification does not grant credits twice". 20 grants with one key at once, beside 10 grants without a key
    (each of which grants: "The service does not itself deduplicate grants"): 11 grants, a balance of 3 + 10."""
    headers = {"x-api-key": agency["api_key"]}
    requests = [("POST", GRANT, {"email": sub["email"], "amount": 3}, {**headers, "Idempotency-Key": "recharge-1"})
                for _ in range(20)]
    requests += [("POST", GRANT, {"email": sub["email"], "amount": 1}, headers) for _ in range(10)]
    responses = await burst(http_server_client, requests)
    assert [r.code for r in responses] == [200] * 30, [r.body for r in responses if r.code != 200]
    assert len({r.body for r in responses[:20]}) == 1
    assert await count(services, "SELECT COUNT(*) FROM credit_transactions WHERE account_id = ?"
                                 " AND idempotency_key = 'recharge-1'", sub["account_id"]) == 1
    assert await count(services, "SELECT COUNT(*) FROM credit_transactions WHERE account_id = ? AND kind = 'grant'",
                       sub["account_id"]) == 11
    assert await credits.get_balance(services.db, sub["account_id"]) == 13
    # The history adds up to the balance (no lost update between the racing grants).
    assert sorted(b for (b,) in await rows(services, "SELECT balance_after FROM credit_transactions"
                                                     " WHERE account_id = ?", sub["account_id"]))[-1] == 1300


# ---- credits ------------------------------------------------------------------------------------

async def test_racing_spends_and_grants_never_overdraw(agency, sub, services, api):
    """docs/design.md#api-decisions "Credits": "concurrent grants never lose an update"; "at zero the bot stays silent": a
    balance never goes below zero. From a balance of 5: 40 spends of 1 and 5 grants of 1 at once. Every credit
    is spent at most once (successful spends + the final balance = the 10 granted), no balance in the history
    is below zero, and the history adds up to the balance."""
    sub_id = sub["account_id"]
    r = await api.post(GRANT, {"email": sub["email"], "amount": 5}, key=agency["api_key"], query_key=False)
    assert r.code == 200, r.body
    spends = [credits.spend_credits(services.db, sub_id, 1, f"reply {i}") for i in range(40)]
    grants = [api.post(GRANT, {"email": sub["email"], "amount": 1}, key=agency["api_key"], query_key=False)
              for _ in range(5)]
    outcomes = await asyncio.gather(*spends, *grants, return_exceptions=True)
    spent, granted = outcomes[:40], outcomes[40:]
    assert all(not isinstance(g, BaseException) and g.code == 200 for g in granted), granted
    assert not [o for o in spent if isinstance(o, BaseException) and not isinstance(o, InsufficientCredits)]
    succeeded = [o for o in spent if not isinstance(o, BaseException)]
    assert 5 <= len(succeeded) <= 10 and all(o >= 0 for o in succeeded)
    balance = await credits.get_balance(services.db, sub_id)
    assert balance == 10 - len(succeeded)
    assert await count(services, "SELECT COALESCE(SUM(amount), 0) FROM credit_transactions WHERE account_id = ?",
                       sub_id) == balance * 100
    assert await count(services, "SELECT COUNT(*) FROM credit_transactions WHERE account_id = ? AND kind = 'spend'",
                       sub_id) == len(succeeded)
    assert await count(services, "SELECT MIN(balance_after) FROM credit_transactions WHERE account_id = ?",
                       sub_id) >= 0


async def test_concurrent_bot_replies_racing_for_the_last_credits_spend_each_credit_once(
        http_server_client, api, agency, sub, services):
    """docs/design.md#api-decisions "Credits": "Each bot reply spends credits (1 by default) from a sub-account; ... at zero the
    bot stays silent and the inbox says why". 3 credits, 12 messages from 12 senders at once, answered
    concurrently: 3 replies, 9 no_credits, a balance of 0, 3 spends."""
    sub_id, key = sub["account_id"], sub["api_key"]
    r = await api.post(GRANT, {"email": sub["email"], "amount": 3}, key=agency["api_key"], query_key=False)
    assert r.code == 200, r.body
    await configure_bot(api, key)
    responses = await burst(http_server_client, [("POST", f"{INBOUND}?apiKey={key}",
                                                  inbound(f"price-{i}", f"sender-{i}", "price?"), None)
                                                 for i in range(12)])
    assert [r.code for r in responses] == [200] * 12
    await services.bot.idle()
    outcomes = await rows(services, "SELECT bot_outcome FROM messages WHERE account_id = ? AND direction = 'inbound'",
                          sub_id)
    outcomes = sorted(json.loads(o)["outcome"] for (o,) in outcomes)
    assert outcomes == ["no_credits"] * 9 + ["rule"] * 3
    assert await count(services, "SELECT COUNT(*) FROM messages WHERE account_id = ? AND author = 'bot'", sub_id) == 3
    assert await count(services, "SELECT COUNT(*) FROM credit_transactions WHERE account_id = ? AND kind = 'spend'",
                       sub_id) == 3
    assert await credits.get_balance(services.db, sub_id) == 0


# ---- the bot: one answer per message -------------------------------------------------------------

async def test_one_message_gets_one_bot_answer_whatever_runs_concurrently(api, account, services):
    """Spec §4.4 "Processing: the service creates or updates the contact, stores the message, and has the bot
    answer when it is active" -- once: docs/design.md#wave-3-contracts "conditional updates (... bot outcome ...)". Ten decisions
    applied to one message at once (a recovery racing the live runner, a second process): one wins, one reply
    is queued, the other nine send nothing."""
    key, account_id = account["api_key"], account["account_id"]
    r = await api.patch("/v1/account/settings", {"bot": {"active": False},
                                                 "customChannelWebhookUrl": "http://127.0.0.1:9/replies"}, key=key)
    assert r.code == 200
    r = await api.post(INBOUND, inbound("once", "asker", "price?"), key=key)
    assert r.code == 200, r.body
    await configure_bot(api, key)
    [message] = await services.db.read(
        lambda cx, i: [dict(zip(("id", "account_id", "contact_id", "body", "channel", "campaign_id", "from_id"), row))
                       for row in _rows(cx, "SELECT id, account_id, contact_id, body, channel, campaign_id, from_id"
                                            " FROM messages WHERE id = ?", (i,))], r.json["messageId"])
    context = await services.db.read(bot_state.context_in_tx, account_id, message["contact_id"], None,
                                      message["id"])
    results = await asyncio.gather(*(bot.apply(services, message, context,
                                               bot.Decision("rule", f"run {n}", reply=f"Answer {n}"))
                                     for n in range(10)))
    assert results.count("rule") == 1 and results.count(None) == 9, results
    assert await count(services, "SELECT COUNT(*) FROM messages WHERE account_id = ? AND author = 'bot'",
                       account_id) == 1
    assert await count(services, "SELECT COUNT(*) FROM outbox o JOIN messages m ON m.id = o.message_id"
                                 " WHERE m.account_id = ? AND m.author = 'bot'", account_id) == 1


# ---- campaigns ----------------------------------------------------------------------------------

async def test_campaign_recipients_racing_batches_each_get_one_message(api, account, services, receiver):
    """docs/design.md#api-decisions "Campaigns": "Each recipient gets its message once, also across restarts"; docs/design.md#wave-3-contracts
    "conditional updates (... recipient state)". Eight hand-overs of the same campaign at once (the runner
    of a second process, a retried batch), then whatever is still pending, then delivery: every recipient has
    one message, the receiver got one request per contact, and the counts add up."""
    account_id = account["account_id"]
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url}, key=account["api_key"])
    assert r.code == 200
    lst = await lists.create_list(services.db, account_id, "Leads")
    for i in range(40):
        contact, _ = await contacts.create_contact(services.db, account_id, first_name=f"Ann{i}",
                                                   phone=f"+1415555{i:04d}")
        await lists.add_contact(services.db, account_id, lst["id"], contact["id"])
    r = await api.post("/v1/campaigns", {"name": "Spring", "listId": lst["id"], "body": "Hi {{firstName}}",
                                         "ratePerMinute": 1_000_000}, key=account["api_key"])
    assert r.code == 201, r.body
    campaign_id = r.json["id"]
    results = await asyncio.gather(*(services.db.write(hand_over, campaign_id, 15, now_iso()) for _ in range(8)),
                                   return_exceptions=True)
    # A hand-over that lost the race for a recipient may fail as a whole (it rolls back); the next takes over.
    won = [x for x in results if not isinstance(x, BaseException)]
    assert won, results
    while (await api.get(f"/v1/campaigns/{campaign_id}", key=account["api_key"])).json["counts"]["pending"]:
        won.append(await services.db.write(hand_over, campaign_id, 15, now_iso()))
    assert sum(x["queued"] for x in won) == 40
    worker = DeliveryWorker(services, rng=random.Random(7))
    try:
        while await worker.run_due():
            pass
    finally:
        await worker.stop()
    assert await count(services, "SELECT COUNT(*) FROM messages WHERE account_id = ? AND campaign_id IS NOT NULL",
                       account_id) == 40
    assert await count(services, "SELECT COUNT(DISTINCT contact_id) FROM messages WHERE account_id = ?"
                                 " AND campaign_id IS NOT NULL", account_id) == 40
    bodies = sorted(json.loads(request["body"])["body"] for request in receiver.requests)
    assert bodies == sorted(f"Hi Ann{i}" for i in range(40))
    c = (await api.get(f"/v1/campaigns/{campaign_id}", key=account["api_key"])).json
    assert c["counts"]["sent"] == 40 and c["counts"]["total"] == 40 and c["counts"]["pending"] == 0
