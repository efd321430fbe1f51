"""Sub-account credits: docs/api.md#sub-account-credits-agency-accounts (grant credits to a sub-account), §5.3/§5.7 (header-only key, agencies
only); docs/design.md#api-decisions "Credits" (errors, one transaction, Idempotency-Key); spend_credits for the bot."""
import asyncio
import json
from datetime import timedelta

import httpx
import pytest
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from services import credits
from common.errors import IdempotencyKeyReused, InsufficientCredits, Invalid, NotFound
from common.ids import utcnow
from storage import credits as credit_store
from storage import subaccounts as subaccount_store
from tests.parley_process import ParleyProcess, create_agency_with_subaccount
from tests.db_direct import query_plans
from tests import db_direct

PATH = "/v1/subaccounts/credits"


async def grant(api, key, body, headers=None):
    """POST the grant with the key in the x-api-key header (docs/api.md#basics)."""
    return await api.post(PATH, body, key=key, query_key=False, headers=headers)


async def balance(api, account):
    r = await api.get("/v1/account", key=account["api_key"])
    assert r.code == 200, r.body
    return r.json["credits"]


def history(services, account_id):
    cx = services.db.connect_sync()
    try:
        return [dict(r) for r in cx.execute(
            "SELECT kind, amount, balance_after, description, granted_by, idempotency_key"
            " FROM credit_transactions WHERE account_id = ? ORDER BY id", (account_id,))]
    finally:
        cx.close()


async def test_grant_adds_credits_and_answers_the_spec_fields(api, agency, sub, services):
    """§4.6: "Response body: success (boolean), sub_account_id (string), credits_added (number),
    new_balance (number)"; "description ... Note stored in the credit transaction history"."""
    r = await grant(api, agency["api_key"], {"email": sub["email"], "amount": 25, "description": "March top-up"})
    assert r.code == 200, r.body
    assert r.json == {"success": True, "sub_account_id": sub["account_id"], "credits_added": 25,
                      "new_balance": 25}
    r = await grant(api, agency["api_key"], {"email": sub["email"].upper(), "amount": 2.5})
    assert r.code == 200 and r.json["new_balance"] == 27.5 and r.json["credits_added"] == 2.5
    assert await balance(api, sub) == 27.5
    assert await balance(api, agency) == 0
    assert history(services, sub["account_id"]) == [
        {"kind": "grant", "amount": 2500, "balance_after": 2500, "description": "March top-up",
         "granted_by": agency["account_id"], "idempotency_key": None},
        {"kind": "grant", "amount": 250, "balance_after": 2750, "description": None,
         "granted_by": agency["account_id"], "idempotency_key": None}]


async def test_decimal_amounts_are_exact(api, agency, sub):
    """§4.6 amount is a "number": 0.1 + 0.2 credits is a balance of exactly 0.3 (integer hundredths are
    stored, never binary floating point), and the JSON says 0.3, not 0.30000000000000004."""
    key = agency["api_key"]
    assert (await grant(api, key, {"email": sub["email"], "amount": 0.1})).code == 200
    r = await grant(api, key, {"email": sub["email"], "amount": 0.2})
    assert r.code == 200
    assert b'"new_balance":0.3}' in r.body and r.json["new_balance"] == 0.3
    assert await balance(api, sub) == 0.3


async def test_key_is_taken_only_from_the_x_api_key_header(api, agency, sub, services):
    """§4.6 "Authentication: header x-api-key (not the query parameter)"; §5.3 "The query parameter is
    not used there"; §5.6 "A missing or invalid key yields status 401"."""
    body = {"email": sub["email"], "amount": 1}
    r = await api.post(PATH, body, key=agency["api_key"], query_key=True)  # ?apiKey=<valid agency key>
    assert r.code == 401 and r.json["error"]["code"] == "UNAUTHORIZED"
    assert (await api.post(PATH, body)).code == 401
    r = await grant(api, "pk_not_a_key", body)
    assert r.code == 401 and r.json["error"]["code"] == "UNAUTHORIZED"
    assert history(services, sub["account_id"]) == []
    # Elsewhere the query parameter still works, and the header is also accepted there (docs/design.md#api-decisions).
    assert (await api.get("/v1/account", key=agency["api_key"])).code == 200
    assert (await api.get("/v1/account", key=agency["api_key"], query_key=False)).code == 200
    assert (await grant(api, agency["api_key"], body)).code == 200


async def test_non_agency_keys_are_403(api, account, sub, agency):
    """§5.7 "The credit endpoint is available to agency accounts only" -> 403 FORBIDDEN (docs/design.md#api-decisions), also
    for a sub-account granting to itself, and before any body error."""
    for key in (account["api_key"], sub["api_key"]):
        for body in ({"email": sub["email"], "amount": 5}, {"amount": "lots"}):
            r = await grant(api, key, body)
            assert r.code == 403, r.body
            assert r.json["error"]["code"] == "FORBIDDEN"
        r = await api.get("/v1/subaccounts", key=key)
        assert r.code == 403 and r.json["error"]["code"] == "FORBIDDEN"
    assert await balance(api, sub) == 0


async def test_unknown_or_foreign_email_is_404_subaccount_not_found(api, agency, sub, other_agency, other_sub,
                                                                    account, services):
    """§4.6 email "Must match an existing sub-account under the calling agency"; docs/design.md#api-decisions: 404
    SUBACCOUNT_NOT_FOUND otherwise. Another agency's sub-account answers exactly like an unknown email
    (no information leak) and is not credited."""
    key = agency["api_key"]
    answers = {}
    for email in ("nobody@example.com", other_sub["email"], other_agency["email"], agency["email"],
                  account["email"]):
        r = await grant(api, key, {"email": email, "amount": 3})
        assert r.code == 404, (email, r.body)
        assert r.json["error"]["code"] == "SUBACCOUNT_NOT_FOUND"
        answers[email] = r.json["error"]["message"].replace(email.lower(), "<email>")
    assert len(set(answers.values())) == 1, answers
    assert await balance(api, other_sub) == 0
    assert history(services, other_sub["account_id"]) == []
    # The other agency can credit its own sub-account; ours stays untouched.
    r = await grant(api, other_agency["api_key"], {"email": other_sub["email"], "amount": 3})
    assert r.code == 200 and r.json["new_balance"] == 3
    assert await balance(api, sub) == 0


@pytest.mark.parametrize("raw", [
    '{"email": "%s"}',                          # missing
    '{"email": "%s", "amount": null}',
    '{"email": "%s", "amount": 0}',
    '{"email": "%s", "amount": -1}',
    '{"email": "%s", "amount": -0.01}',
    '{"email": "%s", "amount": true}',
    '{"email": "%s", "amount": "5"}',
    '{"email": "%s", "amount": [5]}',
    '{"email": "%s", "amount": {"value": 5}}',
    '{"email": "%s", "amount": NaN}',
    '{"email": "%s", "amount": Infinity}',
    '{"email": "%s", "amount": -Infinity}',
    '{"email": "%s", "amount": 1e400}',
    '{"email": "%s", "amount": 0.001}',
    '{"email": "%s", "amount": 1000000001}',
    '{"email": "%s", "amount": 100000000000000000000000000000}',
])
async def test_amount_must_be_a_finite_number_above_zero(api, agency, sub, services, raw):
    """docs/design.md#api-decisions: 400 unless amount is a finite number > 0 (§4.6 amount: number, required; §7 "400 Bad
    request. Missing required fields ... or invalid parameters"). Nothing is granted."""
    r = await api.post(PATH, raw=raw % sub["email"], key=agency["api_key"], query_key=False,
                       headers={"Content-Type": "application/json"})
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR"
    assert "amount" in r.json["error"]["message"]
    assert history(services, sub["account_id"]) == []


async def test_other_body_errors_are_400(api, agency, sub):
    """§4.6: email is required (string); description is an optional string (capped at 500 characters);
    §7 "400 ... Missing required fields"."""
    key = agency["api_key"]
    for body, field in [({"amount": 1}, "email"), ({"email": 7, "amount": 1}, "email"),
                        ({"email": "", "amount": 1}, "email"),
                        ({"email": sub["email"], "amount": 1, "description": 5}, "description"),
                        ({"email": sub["email"], "amount": 1, "description": "x" * 501}, "description"),
                        ({"email": sub["email"], "amount": 1, "note": "hi"}, "note")]:
        r = await grant(api, key, body)
        assert r.code == 400, (body, r.body)
        assert field in r.json["error"]["message"], r.json
    r = await api.post(PATH, raw="amount=1", key=key, query_key=False,
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.code == 415
    r = await grant(api, key, {"email": sub["email"], "amount": 1, "description": "x" * 500})
    assert r.code == 200
    assert await balance(api, sub) == 1


async def test_only_post_is_allowed(api, agency):
    r = await api.get(PATH, key=agency["api_key"], query_key=False)
    assert r.code == 405 and r.headers["Allow"] == "POST"


async def test_fifty_concurrent_grants_lose_no_update(http_server_client, agency, sub, services, api):
    """docs/design.md#api-decisions: "The grant and its history row ... are one transaction; concurrent grants never lose an
    update": 50 simultaneous grants of 1 give a balance of 50 and 50 history rows whose balance_after
    runs 1..50."""
    client = SimpleAsyncHTTPClient(force_instance=True, max_clients=64)
    url = http_server_client.get_url(PATH)
    headers = {"Content-Type": "application/json", "x-api-key": agency["api_key"]}
    try:
        responses = await asyncio.gather(*(
            client.fetch(url, method="POST", headers=headers, raise_error=False,
                         body=json.dumps({"email": sub["email"], "amount": 1, "description": f"grant {i}"}))
            for i in range(50)))
    finally:
        client.close()
    assert [r.code for r in responses] == [200] * 50, [r.body for r in responses if r.code != 200]
    assert sorted(json.loads(r.body)["new_balance"] for r in responses) == list(range(1, 51))
    rows = history(services, sub["account_id"])
    assert len(rows) == 50
    assert [row["balance_after"] for row in rows] == [100 * n for n in range(1, 51)]
    assert await balance(api, sub) == 50


async def test_without_idempotency_key_every_call_grants(api, agency, sub):
    """§4.6: "The service does not itself deduplicate grants." Two identical calls grant twice."""
    body = {"email": sub["email"], "amount": 10, "description": "recharge"}
    assert (await grant(api, agency["api_key"], body)).json["new_balance"] == 10
    assert (await grant(api, agency["api_key"], body)).json["new_balance"] == 20


async def test_idempotency_key_retry_returns_the_first_answer(api, agency, sub, services):
    """docs/design.md#api-decisions: "An optional Idempotency-Key header (as Stripe's) makes a retry return the first answer
    for 24 h, and the same key with other parameters is 422". A retry grants nothing."""
    key = agency["api_key"]
    body = {"email": sub["email"], "amount": 10, "description": "recharge ik-1"}
    first = await grant(api, key, body, headers={"Idempotency-Key": "ik-1"})
    assert first.code == 200 and first.json["new_balance"] == 10
    assert "Idempotent-Replayed" not in first.headers
    assert (await grant(api, key, {"email": sub["email"], "amount": 5})).json["new_balance"] == 15
    # Same parameters, spelled differently (email case, 10 vs 10.0): the same request.
    again = await grant(api, key, {"email": sub["email"].upper(), "amount": 10.0, "description": "recharge ik-1"},
                        headers={"Idempotency-Key": "ik-1"})
    assert again.code == 200 and again.body == first.body
    assert again.headers["Idempotent-Replayed"] == "true"
    assert await balance(api, sub) == 15
    for other in ({**body, "amount": 11}, {**body, "description": "other"}, {"email": sub["email"], "amount": 10}):
        r = await grant(api, key, other, headers={"Idempotency-Key": "ik-1"})
        assert r.code == 422, (other, r.body)
        assert r.json["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert await balance(api, sub) == 15
    assert [row["idempotency_key"] for row in history(services, sub["account_id"])] == ["ik-1", None]


async def test_idempotency_keys_are_per_agency_and_failures_are_not_remembered(api, agency, sub, other_agency,
                                                                              other_sub):
    """Stripe-style keys belong to the caller: another agency's identical key is its own; a request that
    failed (404) granted nothing and is not remembered, so the key still works for the corrected call."""
    headers = {"Idempotency-Key": "shared-key"}
    r = await grant(api, agency["api_key"], {"email": "typo@example.com", "amount": 4}, headers=headers)
    assert r.code == 404
    r = await grant(api, agency["api_key"], {"email": sub["email"], "amount": 4}, headers=headers)
    assert r.code == 200 and r.json["new_balance"] == 4
    r = await grant(api, other_agency["api_key"], {"email": other_sub["email"], "amount": 7}, headers=headers)
    assert r.code == 200 and r.json["sub_account_id"] == other_sub["account_id"] and r.json["new_balance"] == 7
    for bad in ("x" * 256, "tab\there"):
        r = await grant(api, agency["api_key"], {"email": sub["email"], "amount": 1},
                        headers={"Idempotency-Key": bad})
        assert r.code == 400 and "Idempotency-Key" in r.json["error"]["message"]
    assert await balance(api, sub) == 4


async def test_concurrent_identical_idempotent_requests_grant_once(http_server_client, agency, sub, services,
                                                                   api):
    """docs/design.md#api-decisions Idempotency-Key: 20 simultaneous identical requests with one key grant once; every one
    answers the same body."""
    client = SimpleAsyncHTTPClient(force_instance=True, max_clients=64)
    headers = {"Content-Type": "application/json", "x-api-key": agency["api_key"], "Idempotency-Key": "race"}
    try:
        responses = await asyncio.gather(*(
            client.fetch(http_server_client.get_url(PATH), method="POST", headers=headers, raise_error=False,
                         body=json.dumps({"email": sub["email"], "amount": 3}))
            for _ in range(20)))
    finally:
        client.close()
    assert [r.code for r in responses] == [200] * 20
    assert len({r.body for r in responses}) == 1
    assert json.loads(responses[0].body)["new_balance"] == 3
    assert len(history(services, sub["account_id"])) == 1
    assert await balance(api, sub) == 3


async def test_a_grant_key_answers_for_good_not_only_24_hours(api, agency, sub, services):
    """Issue 18 item 11: an auto-recharge notification is redelivered for ~30 h but Idempotency-Key answers
    are kept 24 h, so a receiver granting with a redelivered idempotency_key after a day granted twice. A
    grant's key is unique per agency for good (docs/design.md#api-decisions "never grants twice"): the first answer is replayed
    whenever the key comes again, and the same key with another grant is 422 (driven with an injected clock
    through the service, then over HTTP once the 24 h answers are pruned)."""
    r = await grant(api, agency["api_key"], {"email": sub["email"], "amount": 2}, headers={"Idempotency-Key": "k"})
    assert r.code == 200
    args = dict(email=sub["email"], amount=2, idempotency_key="k")
    for later in (timedelta(hours=23, minutes=59), timedelta(hours=24, minutes=1), timedelta(hours=30),
                  timedelta(days=400)):
        body, replayed = await credits.grant_credits(services.db, agency["account_id"], "agency", **args,
                                                     now=utcnow() + later)
        assert replayed and body == r.json, later
        with pytest.raises(IdempotencyKeyReused):
            await credits.grant_credits(services.db, agency["account_id"], "agency", **{**args, "amount": 9},
                                        now=utcnow() + later)
    cx = services.db.connect_sync()
    try:
        with cx:
            cx.execute("DELETE FROM idempotency_keys")  # what the retention cleanup does after 24 h
    finally:
        cx.close()
    again = await grant(api, agency["api_key"], {"email": sub["email"], "amount": 2}, headers={"Idempotency-Key": "k"})
    assert again.code == 200 and again.body == r.body and again.headers["Idempotent-Replayed"] == "true"
    other = await grant(api, agency["api_key"], {"email": sub["email"], "amount": 3}, headers={"Idempotency-Key": "k"})
    assert other.code == 422 and other.json["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert await balance(api, sub) == 2
    assert [row["idempotency_key"] for row in history(services, sub["account_id"])] == ["k"]


async def test_the_grant_history_refuses_a_second_grant_under_one_key(api, agency, sub, other_agency, other_sub,
                                                                      services):
    """The invariant lives in the data (docs/design.md#wave-3-contracts: "grant key per agency for good"): a unique index on the
    grant history, per agency (another agency's same key is its own)."""
    headers = {"Idempotency-Key": "rch_same"}
    assert (await grant(api, agency["api_key"], {"email": sub["email"], "amount": 1}, headers=headers)).code == 200
    r = await grant(api, other_agency["api_key"], {"email": other_sub["email"], "amount": 1}, headers=headers)
    assert r.code == 200 and r.json["new_balance"] == 1
    cx = services.db.connect_sync()
    try:
        with pytest.raises(db_direct.INTEGRITY_ERRORS):
            with cx:
                cx.execute("INSERT INTO credit_transactions (account_id, kind, amount, balance_after, granted_by,"
                           " idempotency_key, created_at) VALUES (?, 'grant', 100, 200, ?, 'rch_same', 'now')",
                           (sub["account_id"], agency["account_id"]))
    finally:
        cx.close()


@pytest.fixture
def second_sub(make_account, agency, sub):
    return make_account(agency_email=agency["email"])


async def test_list_subaccounts_shows_only_this_agencys_with_balances(api, agency, sub, second_sub, other_sub):
    """GET /v1/subaccounts (beyond the spec, like docs/design.md#api-decisions's account API): the agency's own sub-accounts
    {id, name, email, credits}, never another agency's; keyset pages in id order."""
    await grant(api, agency["api_key"], {"email": sub["email"], "amount": 1.25})
    expected = sorted([(sub["account_id"], sub["email"], 1.25), (second_sub["account_id"], second_sub["email"], 0)])
    r = await api.get("/v1/subaccounts", key=agency["api_key"])
    assert r.code == 200, r.body
    assert [(s["id"], s["email"], s["credits"]) for s in r.json["data"]] == expected
    assert set(r.json["data"][0]) == {"id", "name", "email", "credits", "autoRecharge", "creditsPerReply", "createdAt"}
    assert r.json["nextCursor"] is None
    page = await api.get("/v1/subaccounts?limit=1", key=agency["api_key"])
    assert [s["id"] for s in page.json["data"]] == [expected[0][0]]
    rest = await api.get(f"/v1/subaccounts?limit=1&cursor={page.json['nextCursor']}", key=agency["api_key"])
    assert [s["id"] for s in rest.json["data"]] == [expected[1][0]] and rest.json["nextCursor"] is None


# --- spend_credits: what a bot reply will call ---

async def test_spend_credits_never_goes_below_zero(api, agency, sub, services):
    """docs/design.md#api-decisions: "Each bot reply spends credits (1 by default) from a sub-account ... at zero the bot
    stays silent": a spend returns the new balance, may reach exactly zero, and a spend larger than the
    balance raises and spends nothing."""
    db, sub_id = services.db, sub["account_id"]
    await grant(api, agency["api_key"], {"email": sub["email"], "amount": 2.5})
    assert await credits.spend_credits(db, sub_id, 1, "bot reply msg_1") == 1.5
    assert await credits.spend_credits(db, sub_id, 0.5, "bot reply msg_2") == 1
    with pytest.raises(InsufficientCredits) as raised:
        await credits.spend_credits(db, sub_id, 1.01, "bot reply msg_3")
    assert raised.value.status == 409 and raised.value.code == "INSUFFICIENT_CREDITS"
    assert await credits.spend_credits(db, sub_id, 1, "bot reply msg_4") == 0
    with pytest.raises(InsufficientCredits):
        await credits.spend_credits(db, sub_id, 0.01, "bot reply msg_5")
    assert await credits.get_balance(db, sub_id) == 0
    rows = history(services, sub_id)
    assert [(r["kind"], r["amount"], r["balance_after"], r["description"]) for r in rows] == [
        ("grant", 250, 250, None), ("spend", -100, 150, "bot reply msg_1"), ("spend", -50, 100, "bot reply msg_2"),
        ("spend", -100, 0, "bot reply msg_4")]
    assert sum(r["amount"] for r in rows) == 0  # the history adds up to the balance


async def test_spend_credits_rejects_bad_amounts_and_unknown_accounts(services, sub):
    db = services.db
    for amount in (0, -1, True, "1", float("nan"), float("inf"), 0.001, None):
        with pytest.raises(Invalid):
            await credits.spend_credits(db, sub["account_id"], amount, "x")
    with pytest.raises(NotFound):
        await credits.spend_credits(db, "acc_missing", 1, "x")
    assert history(services, sub["account_id"]) == []


async def test_concurrent_spends_never_overdraw(api, agency, sub, services):
    """Never below zero under concurrency: 30 simultaneous spends of 1 from a balance of 10 succeed exactly
    10 times."""
    await grant(api, agency["api_key"], {"email": sub["email"], "amount": 10})
    outcomes = await asyncio.gather(*(credits.spend_credits(services.db, sub["account_id"], 1, f"reply {i}")
                                      for i in range(30)), return_exceptions=True)
    assert sorted(o for o in outcomes if not isinstance(o, Exception)) == list(range(10))
    assert sum(isinstance(o, InsufficientCredits) for o in outcomes) == 20
    assert await credits.get_balance(services.db, sub["account_id"]) == 0


async def test_grant_past_the_balance_ceiling_is_400_and_grants_nothing(api, agency, sub, services):
    """Balances stop at 10^12 credits (every balance stays an exact JSON number); a grant past it is 400."""
    cx = services.db.connect_sync()
    try:
        cx.execute("UPDATE accounts SET credit_hundredths = ? WHERE id = ?",
                   (credit_store.MAX_BALANCE - 50, sub["account_id"]))
    finally:
        cx.close()
    r = await grant(api, agency["api_key"], {"email": sub["email"], "amount": 1})
    assert r.code == 400 and "exceed" in r.json["error"]["message"]
    r = await grant(api, agency["api_key"], {"email": sub["email"], "amount": 0.5})
    assert r.code == 200 and r.json["new_balance"] == 10 ** 12
    assert len(history(services, sub["account_id"])) == 1


def test_to_hundredths_is_exact():
    """Amounts become integer hundredths without float error."""
    assert credits.to_hundredths(0.1) + credits.to_hundredths(0.2) == credits.to_hundredths(0.3) == 30
    assert credits.to_hundredths(19.99) == 1999 and credits.to_hundredths(1_000_000_000) == 100_000_000_000
    assert credit_store.as_number(30) == 0.3 and credit_store.as_number(200) == 2
    assert isinstance(credit_store.as_number(200), int)
    assert json.dumps(credit_store.as_number(credit_store.MAX_BALANCE - 1)) == "999999999999.99"


def test_balance_cannot_go_negative_even_in_raw_sql(services, sub):
    """The migration's CHECK backs the service: no writer can store a negative balance."""
    cx = services.db.connect_sync()
    try:
        with pytest.raises(db_direct.INTEGRITY_ERRORS):
            cx.execute("UPDATE accounts SET credit_hundredths = -1 WHERE id = ?", (sub["account_id"],))
    finally:
        cx.close()


@pytest.mark.sqlite_only("EXPLAIN QUERY PLAN is SQLite's planner")
def test_grant_and_listing_use_indexes(services, agency, sub):
    """docs/design.md#conventions: queries are scoped and cheap: the grant's lookups and the sub-account page are index
    searches (EXPLAIN QUERY PLAN), never table scans."""
    plans = query_plans(services.db.path, lambda cx: (
        credit_store.grant.sync(cx, agency["account_id"], sub["email"], 100, None, "2030-01-01T00:00:00.000Z", "k"),
        subaccount_store.page_subaccounts.sync(cx, agency["account_id"], None, 10)))
    assert len(plans) >= 3, plans
    for sql, plan in plans.items():
        assert not any(d.startswith("SCAN") for d in plan), (sql, plan)
    assert any("accounts_agency_subaccounts" in d for plan in plans.values() for d in plan), plans


# --- End to end: the real server over HTTPS ---

def test_end_to_end_grant_over_https_header_only(tmp_path):
    """§4.6/§5.3 over the real server: "pass the key in the header x-api-key ... The query parameter is not
    used there" (401 with ?apiKey=), §5.7 agencies only (403), then a grant shows in the sub-account's
    GET /v1/account; §5.4 HTTPS only."""
    data = tmp_path / "data"
    agency, sub = create_agency_with_subaccount(data, "agency@example.com", "client@example.com")
    with ParleyProcess(data) as parley, parley.client() as c:
        body = {"email": "client@example.com", "amount": 12.5, "description": "e2e"}
        r = c.post(PATH, params={"apiKey": agency["api_key"]}, json=body)
        assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHORIZED"
        r = c.post(PATH, headers={"x-api-key": sub["api_key"]}, json=body)
        assert r.status_code == 403 and r.json()["error"]["code"] == "FORBIDDEN"
        r = c.post(PATH, headers={"x-api-key": agency["api_key"], "Idempotency-Key": "e2e-1"}, json=body)
        assert r.status_code == 200, r.text
        assert r.json() == {"success": True, "sub_account_id": sub["account_id"], "credits_added": 12.5,
                            "new_balance": 12.5}
        again = c.post(PATH, headers={"x-api-key": agency["api_key"], "Idempotency-Key": "e2e-1"}, json=body)
        assert again.status_code == 200 and again.json() == r.json()
        account = c.get("/v1/account", params={"apiKey": sub["api_key"]})
        assert account.status_code == 200 and account.json()["credits"] == 12.5
        plain = httpx.post(f"http://127.0.0.1:{parley.http_port}{PATH}",
                           headers={"x-api-key": agency["api_key"]}, json=body)
        assert plain.status_code == 403 and plain.json()["error"]["code"] == "HTTPS_REQUIRED"
        assert c.get("/v1/account", params={"apiKey": sub["api_key"]}).json()["credits"] == 12.5
