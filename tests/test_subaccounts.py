"""Sub-accounts API for agencies (docs/design.md#api-decisions "Sub-accounts"): POST /v1/subaccounts, GET /v1/subaccounts/{id},
PATCH /v1/subaccounts/{id} (autoRecharge), GET /v1/subaccounts/{id}/transactions. Spec §5.7: "The credit
endpoint is available to agency accounts only"; §4.6 "Must match an existing sub-account under the calling
agency"; §7 "400 Bad request. Missing required fields ... or invalid parameters", "201 Resource created"."""
import asyncio
import json
from pathlib import Path

import pytest
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from services import credits
from tests import db_direct
from tests.ui_helpers import FormClient

PATH = "/v1/subaccounts"


async def grant(api, agency, sub, amount, key=None, description=None):
    headers = {"Idempotency-Key": key} if key else None
    body = {"email": sub["email"], "amount": amount}
    if description:
        body["description"] = description
    r = await api.post("/v1/subaccounts/credits", body, key=agency["api_key"], query_key=False, headers=headers)
    assert r.code == 200, r.body
    return r.json


def row_counts(services):
    cx = services.db.connect_sync()
    try:
        return {table: cx.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                for table in ("accounts", "users", "api_keys", "credit_transactions", "outbox")}
    finally:
        cx.close()


# ---- POST /v1/subaccounts ----------------------------------------------------------------------

async def test_create_answers_201_with_the_key_and_password_shown_once(api, agency, services, http_server_client):
    """docs/design.md#api-decisions: POST /v1/subaccounts {name, email} -> 201 {id, name, email, credits, autoRecharge, apiKey,
    createdAt} (the key shown once). The sub-account's key works at once; its UI user signs in with the
    email and the password of this answer."""
    r = await api.post(PATH, {"name": "  Bakery Rossi ", "email": "Ops@Rossi.example"}, key=agency["api_key"])
    assert r.code == 201, r.body
    created = r.json
    assert set(created) == {"id", "name", "email", "credits", "autoRecharge", "creditsPerReply", "apiKey", "password", "createdAt"}
    assert created["id"].startswith("acc_") and created["name"] == "Bakery Rossi"
    assert created["email"] == "ops@rossi.example" and created["credits"] == 0 and created["autoRecharge"] is None
    assert created["apiKey"].startswith("pk_")
    account = await api.get("/v1/account", key=created["apiKey"])
    assert account.code == 200
    assert (account.json["type"], account.json["parentAgencyId"]) == ("subaccount", agency["account_id"])
    browser = FormClient(http_server_client)
    await browser.get("/login")
    signed_in = await browser.post("/login", {"email": created["email"], "password": created["password"]})
    assert signed_in.code == 303
    # Shown once: the reads never carry the key or the password.
    one = await api.get(f"{PATH}/{created['id']}", key=agency["api_key"])
    assert one.code == 200
    assert one.json == {k: v for k, v in created.items() if k not in ("apiKey", "password")}
    listed = await api.get(PATH, key=agency["api_key"])
    assert listed.json["data"] == [one.json]
    assert created["apiKey"] not in listed.body.decode() and created["password"] not in listed.body.decode()
    # The email is what grants name (docs/api.md#sub-account-credits-agency-accounts), in any case.
    r = await api.post("/v1/subaccounts/credits", {"email": "OPS@rossi.example", "amount": 5},
                       key=agency["api_key"], query_key=False)
    assert r.code == 200 and r.json["sub_account_id"] == created["id"]


async def test_create_takes_the_key_as_query_parameter_or_header(api, agency):
    """docs/design.md#api-decisions: sub-accounts use "the standard auth rules" (docs/api.md#basics apiKey, and x-api-key)."""
    r = await api.post(PATH, {"name": "A", "email": "a@rossi.example"}, key=agency["api_key"], query_key=False)
    assert r.code == 201
    assert (await api.post(PATH, {"name": "B", "email": "b@rossi.example"})).code == 401
    r = await api.post(PATH, {"name": "B", "email": "b@rossi.example"}, key="pk_wrong")
    assert r.code == 401 and r.json["error"]["code"] == "UNAUTHORIZED"


async def test_only_agencies_manage_sub_accounts(api, account, sub, agency, services):
    """Spec §5.7 (agencies only) -> 403 FORBIDDEN for a standard account's or a sub-account's key, on every
    endpoint and before any body error; nothing is created or changed."""
    before = row_counts(services)
    for key in (account["api_key"], sub["api_key"]):
        calls = [("POST", PATH, {"name": "X", "email": "x@rossi.example"}), ("POST", PATH, {"bad": 1}),
                 ("GET", PATH, None), ("GET", f"{PATH}/{sub['account_id']}", None),
                 ("PATCH", f"{PATH}/{sub['account_id']}", {"autoRecharge": {"threshold": 1, "amount": 1}}),
                 ("PATCH", f"{PATH}/{sub['account_id']}", {"autoRecharge": "nonsense"}),
                 ("GET", f"{PATH}/{sub['account_id']}/transactions", None)]
        for method, path, body in calls:
            r = await api.call(method, path, body, key=key)
            assert r.code == 403, (method, path, r.body)
            assert r.json["error"]["code"] == "FORBIDDEN"
    assert row_counts(services) == before


@pytest.mark.parametrize("body, field, code", [
    ({"email": "n@rossi.example"}, "name", "VALIDATION_ERROR"),
    ({"name": "   ", "email": "n@rossi.example"}, "name", "VALIDATION_ERROR"),
    ({"name": "x" * 201, "email": "n@rossi.example"}, "name", "VALIDATION_ERROR"),
    ({"name": 5, "email": "n@rossi.example"}, "name", "VALIDATION_ERROR"),
    ({"name": "N"}, "email", "VALIDATION_ERROR"),
    ({"name": "N", "email": ""}, "email", "VALIDATION_ERROR"),
    ({"name": "N", "email": "not-an-email"}, "email", "INVALID_EMAIL"),
    ({"name": "N", "email": "a@b@rossi.example"}, "email", "INVALID_EMAIL"),
    ({"name": "N", "email": "x" * 310 + "@rossi.example"}, "email", "VALIDATION_ERROR"),
    ({"name": "N", "email": "n@rossi.example", "credits": 100}, "credits", "VALIDATION_ERROR"),
])
async def test_create_with_a_bad_field_is_400_naming_it(api, agency, services, body, field, code):
    """Spec §7: "400 Bad request. Missing required fields ... or invalid parameters"; the message names the
    field; nothing is written."""
    before = row_counts(services)
    r = await api.post(PATH, body, key=agency["api_key"])
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == code and field in r.json["error"]["message"], r.json
    assert row_counts(services) == before


async def test_a_taken_email_is_409_conflict(api, agency, sub, account, other_agency, services):
    """An email that any account already has (a sub-account, a standard account, an agency; any case) is
    409 CONFLICT and creates nothing."""
    before = row_counts(services)
    for email in (sub["email"], account["email"].upper(), other_agency["email"], agency["email"]):
        r = await api.post(PATH, {"name": "Dup", "email": email}, key=agency["api_key"])
        assert r.code == 409, (email, r.body)
        assert r.json["error"]["code"] == "CONFLICT" and "email" in r.json["error"]["message"]
    assert row_counts(services) == before


async def test_concurrent_creations_with_one_email_make_one_account(http_server_client, agency, services):
    """Ten simultaneous POSTs with the same email: exactly one 201, nine 409 (the writer checks the email in
    its transaction), never a 500."""
    client = SimpleAsyncHTTPClient(force_instance=True, max_clients=16)
    headers = {"Content-Type": "application/json", "x-api-key": agency["api_key"]}
    try:
        responses = await asyncio.gather(*(
            client.fetch(http_server_client.get_url(PATH), method="POST", headers=headers, raise_error=False,
                         body=json.dumps({"name": f"Race {i}", "email": "race@rossi.example"}))
            for i in range(10)))
    finally:
        client.close()
    assert sorted(r.code for r in responses) == [201] + [409] * 9, [r.body for r in responses]
    cx = services.db.connect_sync()
    try:
        assert cx.execute("SELECT COUNT(*) FROM accounts WHERE email = 'race@rossi.example'").fetchone()[0] == 1
        assert cx.execute("SELECT COUNT(*) FROM users WHERE email = 'race@rossi.example'").fetchone()[0] == 1
    finally:
        cx.close()


# ---- GET /v1/subaccounts/{id} ------------------------------------------------------------------

async def test_another_agencys_sub_account_is_404_like_an_unknown_id(api, agency, sub, other_agency, other_sub,
                                                                     account, services):
    """docs/design.md#api-decisions: "Another agency's sub-account is 404 SUBACCOUNT_NOT_FOUND"; it answers exactly like an
    unknown id (nothing is learned) on every endpoint, and nothing of it changes."""
    before = row_counts(services)
    key = agency["api_key"]
    messages = set()
    for target in (other_sub["account_id"], "acc_unknown", agency["account_id"], other_agency["account_id"],
                   account["account_id"]):
        for method, path, body in [("GET", f"{PATH}/{target}", None),
                                   ("PATCH", f"{PATH}/{target}", {"autoRecharge": {"threshold": 1, "amount": 2}}),
                                   ("PATCH", f"{PATH}/{target}", {"autoRecharge": None}),
                                   ("GET", f"{PATH}/{target}/transactions", None)]:
            r = await api.call(method, path, body, key=key)
            assert r.code == 404, (method, path, r.body)
            assert r.json["error"]["code"] == "SUBACCOUNT_NOT_FOUND"
            messages.add(r.json["error"]["message"].replace(target, "<id>"))
    assert len(messages) == 1, messages
    assert row_counts(services) == before
    theirs = await api.get(f"{PATH}/{other_sub['account_id']}", key=other_agency["api_key"])
    assert theirs.code == 200 and theirs.json["autoRecharge"] is None
    listed = await api.get(PATH, key=key)
    assert [s["id"] for s in listed.json["data"]] == [sub["account_id"]]


# ---- PATCH /v1/subaccounts/{id} ----------------------------------------------------------------

async def test_patch_sets_and_clears_auto_recharge(api, agency, sub):
    """docs/design.md#api-decisions: PATCH /v1/subaccounts/{id} {"autoRecharge": {"threshold": 10, "amount": 100} | null}."""
    path, key = f"{PATH}/{sub['account_id']}", agency["api_key"]
    r = await api.patch(path, {"autoRecharge": {"threshold": 10, "amount": 100}}, key=key)
    assert r.code == 200, r.body
    assert r.json["autoRecharge"] == {"threshold": 10, "amount": 100, "pendingIdempotencyKey": None,
                                      "notifiedAt": None}
    assert r.json["id"] == sub["account_id"] and r.json["email"] == sub["email"]
    r = await api.patch(path, {"autoRecharge": {"threshold": 2.5, "amount": 0.01}}, key=key, query_key=False)
    assert r.json["autoRecharge"]["threshold"] == 2.5 and r.json["autoRecharge"]["amount"] == 0.01
    assert (await api.get(path, key=key)).json["autoRecharge"]["threshold"] == 2.5
    listed = await api.get(PATH, key=key)
    assert listed.json["data"][0]["autoRecharge"]["amount"] == 0.01
    r = await api.patch(path, {"autoRecharge": None}, key=key)
    assert r.code == 200 and r.json["autoRecharge"] is None
    assert (await api.get(path, key=key)).json["autoRecharge"] is None


@pytest.mark.parametrize("raw, field", [
    ('{}', "autoRecharge"),
    ('{"autoRecharge": 5}', "autoRecharge"),
    ('{"autoRecharge": {}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": 1}}', "autoRecharge.amount"),
    ('{"autoRecharge": {"amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": 0, "amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": -1, "amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": "5", "amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": true, "amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": null, "amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": NaN, "amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": Infinity, "amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": 0.001, "amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": 1e400, "amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": 1000000001, "amount": 1}}', "autoRecharge.threshold"),
    ('{"autoRecharge": {"threshold": 1, "amount": 0}}', "autoRecharge.amount"),
    ('{"autoRecharge": {"threshold": 1, "amount": [1]}}', "autoRecharge.amount"),
    ('{"autoRecharge": {"threshold": 1, "amount": 1.005}}', "autoRecharge.amount"),
    ('{"autoRecharge": {"threshold": 1, "amount": 1, "every": "day"}}', "autoRecharge.every"),
    ('{"autoRecharge": null, "credits": 5}', "credits"),
])
async def test_patch_with_bad_numbers_is_400_naming_the_field(api, agency, sub, raw, field):
    """Threshold and amount follow the grant amount's rules (a finite number > 0 with at most 2 decimals,
    at most 10^9): otherwise 400 VALIDATION_ERROR naming the field, and the setting is unchanged."""
    path = f"{PATH}/{sub['account_id']}"
    await api.patch(path, {"autoRecharge": {"threshold": 3, "amount": 30}}, key=agency["api_key"])
    r = await api.call("PATCH", path, raw=raw, key=agency["api_key"], headers={"Content-Type": "application/json"})
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR"
    assert field in r.json["error"]["message"], r.json
    after = await api.get(path, key=agency["api_key"])
    assert after.json["autoRecharge"]["threshold"] == 3 and after.json["autoRecharge"]["amount"] == 30


async def test_patch_needs_a_json_body_and_other_methods_are_405(api, agency, sub):
    path = f"{PATH}/{sub['account_id']}"
    r = await api.call("PATCH", path, raw="autoRecharge=", key=agency["api_key"],
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.code == 415
    r = await api.call("DELETE", path, key=agency["api_key"])
    assert r.code == 405 and r.headers["Allow"] == "GET, PATCH"
    r = await api.post(f"{path}/transactions", {}, key=agency["api_key"])
    assert r.code == 405 and r.headers["Allow"] == "GET"


# ---- GET /v1/subaccounts/{id}/transactions -----------------------------------------------------

async def test_transactions_list_grants_and_spends_newest_first(api, agency, sub, services):
    """docs/design.md#api-decisions: {data: [{id, kind: grant|spend, amount, balanceAfter, description, idempotencyKey,
    createdAt}], nextCursor} newest first; amounts are signed so that they add up to the balance."""
    await grant(api, agency, sub, 10, key="k-1", description="March")
    await credits.spend_credits(services.db, sub["account_id"], 1, "bot reply msg_1")
    await grant(api, agency, sub, 0.5)
    await credits.spend_credits(services.db, sub["account_id"], 2.25, "bot reply msg_2")
    r = await api.get(f"{PATH}/{sub['account_id']}/transactions", key=agency["api_key"])
    assert r.code == 200, r.body
    data = r.json["data"]
    assert r.json["nextCursor"] is None
    assert [(t["kind"], t["amount"], t["balanceAfter"], t["description"], t["idempotencyKey"]) for t in data] == [
        ("spend", -2.25, 7.25, "bot reply msg_2", None),
        ("grant", 0.5, 9.5, None, None),
        ("spend", -1, 9, "bot reply msg_1", None),
        ("grant", 10, 10, "March", "k-1")]
    assert set(data[0]) == {"id", "kind", "amount", "balanceAfter", "description", "idempotencyKey", "createdAt"}
    assert [t["id"] for t in data] == sorted((t["id"] for t in data), reverse=True)
    assert sum(t["amount"] for t in data) == data[0]["balanceAfter"]
    assert (await api.get(f"{PATH}/{sub['account_id']}", key=agency["api_key"])).json["credits"] == 7.25


async def test_transactions_are_cursor_paginated(api, agency, sub, services):
    """Keyset pages (?limit=, ?cursor=): every row once, newest first, also when rows are added while paging;
    a cursor that is not a nextCursor is 400."""
    for n in range(5):
        await grant(api, agency, sub, n + 1)
    path = f"{PATH}/{sub['account_id']}/transactions"
    first = await api.get(f"{path}?limit=2", key=agency["api_key"])
    assert [t["amount"] for t in first.json["data"]] == [5, 4] and first.json["nextCursor"]
    await grant(api, agency, sub, 100)  # newer than every page: never shows up in this paging
    seen = first.json["data"]
    cursor = first.json["nextCursor"]
    while cursor:
        page = await api.get(f"{path}?limit=2&cursor={cursor}", key=agency["api_key"])
        assert page.code == 200
        seen += page.json["data"]
        cursor = page.json["nextCursor"]
    assert [t["amount"] for t in seen] == [5, 4, 3, 2, 1]
    for bad in ("nonsense", "azE6YWJj", "", "0"):  # azE6YWJj is a list cursor for "abc", not a number
        r = await api.get(f"{path}?limit=2&cursor={bad}", key=agency["api_key"])
        if bad == "":
            assert r.code == 200  # an empty cursor is the first page, as on every listing
            continue
        assert r.code == 400 and "cursor" in r.json["error"]["message"], (bad, r.body)
    for limit in ("0", "201", "x"):
        r = await api.get(f"{path}?limit={limit}", key=agency["api_key"])
        assert r.code == 400 and "limit" in r.json["error"]["message"]


@pytest.mark.sqlite_only("EXPLAIN QUERY PLAN is SQLite's planner")
def test_sub_account_reads_use_indexes(services, make_account):
    """docs/design.md#conventions: the sub-account lookup, its listing and a history page are index searches, never scans."""
    from storage import subaccounts as store
    from tests.db_direct import query_plans

    agency = make_account("agency")
    sub = make_account(agency_email=agency["email"])
    plans = query_plans(services.db.path, lambda cx: (
        store.get_subaccount.sync(cx, agency["account_id"], sub["account_id"]),
        store.page_subaccounts.sync(cx, agency["account_id"], None, 10),
        store.page_transactions.sync(cx, sub["account_id"], 1000, 10),
        store.set_auto_recharge.sync(cx, agency["account_id"], sub["account_id"], 100, 1000)))
    assert len(plans) == 3, plans  # get_subaccount, page_subaccounts, page_transactions (set_auto_recharge reads like the first)
    for sql, plan in plans.items():
        assert not any(d.startswith("SCAN") for d in plan), (sql, plan)


# ---- End to end: the real server over HTTPS, a real receiver ----------------------------------

def test_end_to_end_sub_accounts_and_auto_recharge_over_https(tmp_path):
    """Every status code of the sub-accounts API over HTTPS against server.py, then the issue's scenario:
    a sub-account with 3 credits, threshold 2 and a rule bot; inbound messages make the bot reply, each
    reply spending creditsPerReply in its own transaction; the second reply crosses the threshold and the
    agency's receiver gets exactly one notification, verified with standardwebhooks; granting with its
    idempotency_key twice adds the amount once; a reply spending below again sends a second one with a new
    key; the transactions list shows every grant and spend with its balanceAfter."""
    from tests.parley_process import ParleyProcess, free_port, run_cli
    from tests.recharge import DATA_FIELDS, EVENT, distinct, recharge_notifications
    from tests.delivery_helpers import ThreadedReceiver
    from tests.waiting import wait_until

    data = tmp_path / "data"
    agency = run_cli(data, "create-account", "--name", "Agency", "--email", "agency@example.com", "--agency")
    other = run_cli(data, "create-account", "--name", "Other", "--email", "other@example.com", "--agency")
    plain = run_cli(data, "create-account", "--name", "Shop", "--email", "shop@example.com")
    port = free_port()
    with ThreadedReceiver(port) as receiver, \
            ParleyProcess(data, "--allow-private-webhooks", http=False) as parley, parley.client() as c:
        key = {"x-api-key": agency["api_key"]}
        standard = {"apiKey": plain["api_key"]}
        assert c.post(PATH, json={"name": "Rossi", "email": "rossi@example.com"}).status_code == 401
        r = c.post(PATH, params=standard, json={"name": "Rossi", "email": "rossi@example.com"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "FORBIDDEN"
        r = c.post(PATH, headers=key, json={"name": "Rossi", "email": "rossi at example"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_EMAIL"
        r = c.post(PATH, params={"apiKey": agency["api_key"]}, json={"name": "Rossi", "email": "rossi@example.com"})
        assert r.status_code == 201, r.text
        sub = r.json()
        r = c.post(PATH, headers=key, json={"name": "Rossi again", "email": "ROSSI@example.com"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "CONFLICT"
        one = f"{PATH}/{sub['id']}"
        for method, path in (("GET", one), ("PATCH", one), ("GET", one + "/transactions")):
            r = c.request(method, path, headers={"x-api-key": other["api_key"]}, json={"autoRecharge": None})
            assert r.status_code == 404 and r.json()["error"]["code"] == "SUBACCOUNT_NOT_FOUND", (method, path)
        r = c.patch(one, headers=key, json={"autoRecharge": {"threshold": 0, "amount": 100}})
        assert r.status_code == 400 and "autoRecharge.threshold" in r.json()["error"]["message"]
        r = c.patch(one, headers=key, json={"autoRecharge": {"threshold": 2, "amount": 100}})
        assert r.status_code == 200 and r.json()["autoRecharge"]["threshold"] == 2
        r = c.patch("/v1/account/settings", headers=key,
                    json={"notificationUrls": {EVENT: f"http://127.0.0.1:{port}/recharge"}})
        assert r.status_code == 200, r.text
        secret = c.get("/v1/account/webhook-secret", headers=key).json()["secret"]

        def grant(amount, idempotency_key=None):
            headers = {**key, **({"Idempotency-Key": idempotency_key} if idempotency_key else {})}
            response = c.post("/v1/subaccounts/credits", headers=headers,
                              json={"email": sub["email"], "amount": amount})
            assert response.status_code == 200, response.text
            return response

        # The sub-account's rule bot answers "price" on its custom channel (replies to the same receiver).
        sub_key = {"x-api-key": sub["apiKey"]}
        r = c.patch("/v1/account/settings", headers=sub_key, json={
            "customChannelWebhookUrl": f"http://127.0.0.1:{port}/replies",
            "bot": {"active": True,
                    "rules": [{"keywords": ["price"], "answer": "Plans start at $10."}]}})
        assert r.status_code == 200, r.text

        def notifications():
            return recharge_notifications([q for q in receiver.requests if q["path"] == "/recharge"], secret)

        def bot_replies():
            return [q["payload"] for q in receiver.requests if q["path"] == "/replies"]

        def ask_the_bot(n):
            r = c.post("/v1/incoming_custom_channel_message", headers=sub_key, json={"customData": {
                "messageSid": f"lead-{n}", "fromId": "+14155550100", "toId": "shop", "body": "What is the price?",
                "channel": "webchat"}})
            assert r.status_code == 200, r.text
            wait_until(lambda: len(bot_replies()) == n)
            assert bot_replies()[-1]["body"] == "Plans start at $10."

        grant(3)
        ask_the_bot(1)
        assert c.get(one, headers=key).json()["credits"] == 2 and not notifications()
        ask_the_bot(2)  # balance 1: below the threshold
        [first] = wait_until(notifications)
        assert first["accountId"] == agency["account_id"] and set(first["data"]) == DATA_FIELDS
        idempotency_key = first["data"]["idempotency_key"]
        assert first["data"] == {"idempotency_key": idempotency_key, "sub_account_id": sub["id"],
                                 "email": "rossi@example.com", "balance": 1, "threshold": 2, "amount": 100}
        ask_the_bot(3)  # balance 0: still the same episode, no second notification
        once, twice = grant(100, idempotency_key), grant(100, idempotency_key)
        assert once.json()["new_balance"] == 100 and twice.json() == once.json()
        assert twice.headers["Idempotent-Replayed"] == "true"
        assert c.get(one, headers=key).json()["credits"] == 100
        r = c.patch(one, headers=key, json={"creditsPerReply": 99})  # the agency sets the price
        assert r.status_code == 200, r.text
        ask_the_bot(4)  # 100 - 99 = 1: a new episode
        later_ones = wait_until(lambda: len(n := distinct(notifications())) == 2 and n)
        assert later_ones[1]["data"]["idempotency_key"] != idempotency_key
        assert later_ones[1]["data"]["balance"] == 1
        history = c.get(one + "/transactions", headers=key, params={"limit": 4})
        assert history.status_code == 200
        page = history.json()
        later = c.get(one + "/transactions", headers=key, params={"cursor": page["nextCursor"]}).json()
        assert later["nextCursor"] is None
        assert [(t["kind"], t["amount"], t["balanceAfter"]) for t in page["data"] + later["data"]] == [
            ("spend", -99, 1), ("grant", 100, 100), ("spend", -1, 0), ("spend", -1, 1), ("spend", -1, 2),
            ("grant", 3, 3)]
        assert len(notifications()) == 2  # nothing was sent twice


def readme_receiver(tmp_path):
    """The example auto-recharge receiver of docs/api.md, as a file."""
    import re
    readme = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
    [code] = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "class Recharge" in block]
    path = tmp_path / "recharge_receiver.py"
    path.write_text(code)
    return path


def test_the_docs_receiver_grants_once_even_when_a_notification_is_redelivered(tmp_path):
    """docs/api.md's ten-line receiver, run as written against server.py over HTTPS: the notification of a spend
    below the threshold makes it grant `amount` with Idempotency-Key: <idempotency_key>; the same
    notification delivered again (same webhook-id and body, signed anew, as Parley's retry sends it) makes it
    call again and nothing more is granted."""
    import os
    import socket
    import subprocess
    import sys
    from datetime import datetime, timezone

    import httpx
    from standardwebhooks import Webhook

    from tests.parley_process import ParleyProcess, create_agency_with_subaccount, free_port
    from tests.recharge import spend_from_outside
    from tests.waiting import wait_until

    data = tmp_path / "data"
    agency, sub = create_agency_with_subaccount(data, "agency@example.com", "client@example.com")
    port = free_port()
    with ParleyProcess(data, "--allow-private-webhooks", http=False) as parley, parley.client() as c:
        key = {"x-api-key": agency["api_key"]}
        assert c.patch("/v1/account/settings", headers=key, json={"notificationUrls": {
            "subaccount.auto_recharge": f"http://127.0.0.1:{port}/"}}).status_code == 200
        secret = c.get("/v1/account/webhook-secret", headers=key).json()["secret"]
        one = f"{PATH}/{sub['account_id']}"
        assert c.patch(one, headers=key, json={"autoRecharge": {"threshold": 2, "amount": 50}}).status_code == 200
        assert c.post("/v1/subaccounts/credits", headers=key,
                      json={"email": "client@example.com", "amount": 3}).status_code == 200
        env = {**os.environ, "PORT": str(port), "PARLEY_URL": parley.base, "PARLEY_AGENCY_KEY": agency["api_key"],
               "PARLEY_WEBHOOK_SECRET": secret, "SSL_CERT_FILE": parley.cert}
        receiver = subprocess.Popen([sys.executable, str(readme_receiver(tmp_path))], env=env,
                                    stderr=subprocess.DEVNULL)
        try:
            def listening():
                with socket.socket() as s:
                    return s.connect_ex(("127.0.0.1", port)) == 0
            wait_until(listening)
            for n in (1, 2):
                spend_from_outside(parley, sub["account_id"], 100, f"reply {n}")
            wait_until(lambda: c.get(one, headers=key).json()["credits"] == 51)

            cx = db_direct.connect(parley)
            try:
                [row] = cx.execute("SELECT webhook_id, payload FROM outbox WHERE event_type = "
                                   "'subaccount.auto_recharge'").fetchall()
            finally:
                cx.close()
            now = datetime.now(timezone.utc)
            redelivery = httpx.post(f"http://127.0.0.1:{port}/", content=row["payload"], headers={
                "webhook-id": row["webhook_id"], "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": Webhook(secret).sign(row["webhook_id"], now, row["payload"]),
                "content-type": "application/json"}, timeout=30)
            assert redelivery.status_code == 200
            with pytest.raises(httpx.RemoteProtocolError):  # a forged one: verify() raises, no answer, no grant
                httpx.post(f"http://127.0.0.1:{port}/", content=row["payload"], timeout=30, headers={
                    "webhook-id": "evt_forged", "webhook-timestamp": str(int(now.timestamp())),
                    "webhook-signature": "v1,AAAA"})
        finally:
            receiver.terminate()
            receiver.wait(10)
        sub_now = c.get(one, headers=key).json()
        assert sub_now["credits"] == 51
        grants = [t for t in c.get(one + "/transactions", headers=key).json()["data"] if t["kind"] == "grant"]
        key_used = json.loads(row["payload"])["data"]["idempotency_key"]
        assert [(g["amount"], g["idempotencyKey"]) for g in grants] == [(50, key_used), (3, None)]
