"""Contacts API: docs/api.md#custom-channel (Contact rules 1-2), §4.1 create, §4.2 look up; docs/design.md#api-decisions Contacts."""
import asyncio
import json

import pytest
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from storage import contacts as contact_store
from storage.outbox import list_outbox
from tests import db_direct
from tests.db_direct import query_plans

PHONE_SPELLINGS = ["+14155552671", "+1 415 555 2671", "+1 (415) 555-2671", "+1-415-555-2671",
                   "+1.415.555.2671", " +1 415 5552671 "]


@pytest.fixture
def other_account(make_account, account):
    """A second account (make_account runs the loop, so it cannot be called inside an async test)."""
    return make_account()


def count_rows(services, sql, *params):
    cx = services.db.connect_sync()
    try:
        return cx.execute(sql, params).fetchone()[0]
    finally:
        cx.close()


async def create(api, key, **body):
    return await api.post("/v1/contacts", body, key=key)


async def test_create_answers_201_with_the_contact_object(api, account):
    """§4.1 "Response body: the contact object (id, firstName, lastName, phone, email, createdAt)";
    §2 phone "Must include the country code, in international form": stored E.164."""
    r = await create(api, account["api_key"], firstName="Ada", lastName="Lovelace",
                     phone="+1 (415) 555-2671", email="Ada@Example.COM")
    assert r.code == 201, r.body
    assert set(r.json) == {"id", "firstName", "lastName", "phone", "email", "optedOut", "optOutChange", "tags", "createdAt"}
    assert r.json["id"].startswith("ct_")
    assert (r.json["firstName"], r.json["lastName"]) == ("Ada", "Lovelace")
    assert r.json["phone"] == "+14155552671"
    assert r.json["email"] == "ada@example.com"
    assert r.json["createdAt"].endswith("Z") and r.json["createdAt"][:2] == "20"


async def test_create_without_phone_and_email_is_400_naming_both(api, account, services):
    """§2 rule 1: "Creating a contact requires at least one of phone or email." """
    for body in ({}, {"firstName": "Ada"}, {"firstName": "Ada", "phone": "  ", "email": ""},
                 {"phone": None, "email": None}):
        r = await api.post("/v1/contacts", body, key=account["api_key"])
        assert r.code == 400, (body, r.body)
        assert r.json["error"]["code"] == "VALIDATION_ERROR"
        message = r.json["error"]["message"]
        assert "phone" in message and "email" in message, message
    assert count_rows(services, "SELECT COUNT(*) FROM contacts") == 0


async def test_phone_without_valid_country_code_is_invalid_phone(api, account):
    """§7: "INVALID_PHONE, for a phone number without a valid country code." """
    for phone in ("4155552671", "(415) 555-2671", "+1 555", "+999 4155552671", "+", "call me"):
        r = await create(api, account["api_key"], phone=phone, email="ok@example.com")
        assert r.code == 400, (phone, r.body)
        assert r.json["error"]["code"] == "INVALID_PHONE", (phone, r.json)
        assert "phone" in r.json["error"]["message"]


async def test_invalid_email_is_invalid_email(api, account):
    """docs/design.md#api-decisions errors: INVALID_EMAIL 400 (emails validated with email-validator)."""
    for email in ("not-an-email", "a@", "@example.com", "a b@example.com"):
        r = await create(api, account["api_key"], email=email)
        assert r.code == 400, (email, r.body)
        assert r.json["error"]["code"] == "INVALID_EMAIL"


async def test_wrong_types_and_unknown_fields_are_400_naming_the_field(api, account):
    """§7: 400 for "invalid parameters"; the message names the field."""
    r = await create(api, account["api_key"], phone=14155552671)
    assert r.code == 400 and r.json["error"]["code"] == "VALIDATION_ERROR"
    assert r.json["error"]["message"].startswith("phone"), r.json
    r = await create(api, account["api_key"], phone="+14155552671", phoneNumber="+14155552671")
    assert r.code == 400 and "phoneNumber" in r.json["error"]["message"], r.json
    r = await api.post("/v1/contacts", raw="phone=+14155552671", key=account["api_key"],
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.code == 415, r.body


async def test_same_phone_returns_existing_contact_and_fills_blanks_only(api, account, services):
    """§2 rule 2: "A contact with a phone number that already exists is not duplicated. The existing
    contact is returned." docs/design.md#api-decisions: 200 with the existing one; blank fields filled, none overwritten."""
    key = account["api_key"]
    first = await create(api, key, firstName="Ada", phone="+14155552671")
    assert first.code == 201
    again = await create(api, key, firstName="Bob", lastName="Lovelace", phone="+1 415-555-2671",
                         email="ADA@example.com")
    assert again.code == 200, again.body
    assert again.json["id"] == first.json["id"]
    assert again.json["firstName"] == "Ada"          # not overwritten
    assert again.json["lastName"] == "Lovelace"      # blank filled
    assert again.json["email"] == "ada@example.com"  # blank filled, case-folded
    assert again.json["createdAt"] == first.json["createdAt"]
    stored = await api.get(f"/v1/contacts/{first.json['id']}", key=key)
    assert stored.json == again.json
    assert count_rows(services, "SELECT COUNT(*) FROM contacts") == 1


async def test_email_only_contacts_are_matched_by_case_folded_email(api, account):
    """docs/design.md#api-decisions: with no phone, the same case-folded email returns the existing contact (200)."""
    key = account["api_key"]
    first = await create(api, key, email="lead@example.com")
    assert first.code == 201
    again = await create(api, key, email="  LEAD@Example.com ", firstName="Lee")
    assert again.code == 200 and again.json["id"] == first.json["id"]
    assert again.json["firstName"] == "Lee"


async def test_a_new_phone_with_another_contacts_email_is_409_as_patch_refuses_it(api, account, services):
    """#44 §6: create allowed a duplicate email that PATCH refuses: one rule for both. The 409 names the
    contact that has the email, and nothing is created."""
    key = account["api_key"]
    first = await create(api, key, firstName="Lee", email="lead@example.com")
    other = await create(api, key, email="LEAD@example.com", phone="+442071838750")
    assert other.code == 409, other.body
    assert other.json["error"]["existingId"] == first.json["id"]
    assert other.json["error"]["message"] == f"Lee ({first.json['id']}) already has this email"
    assert count_rows(services, "SELECT COUNT(*) FROM contacts") == 1
    # The phone's existing contact is returned as before, its blank email left blank: another contact has it.
    phone_only = await create(api, key, phone="+14155552671")
    again = await create(api, key, phone="+14155552671", email="lead@example.com", firstName="Pat")
    assert again.code == 200 and again.json["id"] == phone_only.json["id"]
    assert (again.json["firstName"], again.json["email"]) == ("Pat", None)


async def test_filling_blank_fields_sends_contact_updated(api, account, services):
    """#44 §6: filling blank fields of an existing contact (a create that finds it, an inbound message that
    names it) changed the contact without a word: contact.updated, with the contact as it is now."""
    key, account_id = account["api_key"], account["account_id"]
    assert (await api.patch("/v1/account/settings", {"notificationUrls": {
        "contact.updated": "http://127.0.0.1:9/x"}}, key=key)).code == 200
    first = await create(api, key, phone="+14155552671")
    assert await list_outbox(services.db, account_id, "notification") == []
    again = await create(api, key, phone="+14155552671", firstName="Ada")
    inbound = await api.post("/v1/incoming_custom_channel_message", {"customData": {
        "messageSid": "fill-1", "fromId": "+14155552671", "toId": "shop", "body": "Hi", "lastName": "Lovelace"}},
        key=key)
    assert inbound.code == 200, inbound.body
    assert (await create(api, key, phone="+14155552671", firstName="Bob")).code == 200  # nothing blank: no event
    rows = await list_outbox(services.db, account_id, "notification")
    assert [(r["event_type"], json.loads(r["payload"])["data"]["firstName"], json.loads(r["payload"])["data"]["lastName"])
            for r in rows] == [("contact.updated", "Ada", None), ("contact.updated", "Ada", "Lovelace")]
    assert json.loads(rows[0]["payload"])["data"] == {**again.json, "id": first.json["id"]}


async def test_an_inbound_email_another_contact_has_is_left_out_of_the_new_contact(api, account, services):
    """#44 §6: customData.email never links a new fromId (a sender could claim anyone's address) and an email
    names one contact: the message is stored, its new contact made without the email, nothing refused."""
    key = account["api_key"]
    owner = await create(api, key, email="ann@example.com")
    r = await api.post("/v1/incoming_custom_channel_message", {"customData": {
        "messageSid": "claim-1", "fromId": "tg-5551", "toId": "shop", "body": "Hi", "email": "ann@example.com"}},
        key=key)
    assert r.code == 200, r.body
    message = (await api.get(f"/v1/messages/{r.json['messageId']}", key=key)).json
    assert message["contactId"] != owner.json["id"]
    contact = (await api.get(f"/v1/contacts/{message['contactId']}", key=key)).json
    assert contact["email"] is None
    assert count_rows(services, "SELECT COUNT(*) FROM contacts WHERE email = 'ann@example.com'") == 1


async def test_fifty_concurrent_creates_of_one_phone_give_one_contact(api, account, http_server_client, services):
    """§2 rule 2 under concurrency: 50 simultaneous creates of one phone in different spellings give
    exactly one contact: one 201, the other 49 answer 200 with the same id. The single writer folds
    concurrent writes into fewer transactions than writes (group commit)."""
    client = SimpleAsyncHTTPClient(force_instance=True, max_clients=64)
    url = http_server_client.get_url("/v1/contacts?apiKey=" + account["api_key"])
    before = services.db.transactions_committed
    try:
        responses = await asyncio.gather(*(
            client.fetch(url, method="POST", raise_error=False, headers={"Content-Type": "application/json"},
                         body=json.dumps({"phone": PHONE_SPELLINGS[i % len(PHONE_SPELLINGS)],
                                          "firstName": f"Caller {i}"}))
            for i in range(50)))
    finally:
        client.close()
    codes = sorted(r.code for r in responses)
    assert codes == [200] * 49 + [201], [r.body for r in responses if r.code not in (200, 201)]
    ids = {json.loads(r.body)["id"] for r in responses}
    assert len(ids) == 1
    assert count_rows(services, "SELECT COUNT(*) FROM contacts WHERE phone = '+14155552671'") == 1
    if db_direct.on_sqlite(services):  # PostgreSQL commits each write on its own connection
        assert services.db.transactions_committed - before < 50


async def test_concurrent_email_only_creates_give_one_contact(api, account, http_server_client, services):
    """docs/design.md#api-decisions: with no phone, the same case-folded email returns the existing contact, also when
    the creates race: 20 simultaneous creates in different letter cases give one 201 and 19 200s."""
    client = SimpleAsyncHTTPClient(force_instance=True, max_clients=64)
    url = http_server_client.get_url("/v1/contacts?apiKey=" + account["api_key"])
    spellings = ["lead@example.com", "LEAD@example.com", "Lead@Example.Com", " lead@EXAMPLE.com "]
    try:
        responses = await asyncio.gather(*(
            client.fetch(url, method="POST", raise_error=False, headers={"Content-Type": "application/json"},
                         body=json.dumps({"email": spellings[i % len(spellings)]}))
            for i in range(20)))
    finally:
        client.close()
    assert sorted(r.code for r in responses) == [200] * 19 + [201]
    assert len({json.loads(r.body)["id"] for r in responses}) == 1
    assert count_rows(services, "SELECT COUNT(*) FROM contacts") == 1


async def test_lookup_by_phone_finds_the_contact_by_each_spelling(api, account):
    """§4.2 "GET /contacts, with query parameter phoneNumber=<phone>"; docs/design.md#api-decisions: normalized the same
    way as on creation, and a "+" that arrived as a space from an unencoded query is read as "+"."""
    key = account["api_key"]
    created = await create(api, key, firstName="Ada", phone="+14155552671", email="ada@example.com")
    raw_queries = [
        "phoneNumber=%2B14155552671",
        "phoneNumber=%2B1%20415%20555%202671",        # +1 415 555 2671, encoded
        "phoneNumber=+14155552671",                    # unencoded "+": arrives as a space
        "phoneNumber=+1+415+555+2671",                 # unencoded, every space a "+"
        "phoneNumber=%2B1%20(415)%20555-2671",
        "phoneNumber=%2B1-415-555-2671&utm_source=zap",  # unknown parameters are ignored
    ]
    for query in raw_queries:
        r = await api.get("/v1/contacts?" + query, key=key)
        assert r.code == 200, (query, r.body)
        assert r.json == created.json, query


async def test_lookup_by_email_is_case_insensitive(api, account):
    """§4.2 "or email=<email>"; docs/design.md#api-decisions: ?email= likewise (case-folded)."""
    key = account["api_key"]
    created = await create(api, key, email="ada@example.com")
    for query in ("email=ada@example.com", "email=ADA%40Example.COM", "email=%20ada@example.com%20"):
        r = await api.get("/v1/contacts?" + query, key=key)
        assert r.code == 200, (query, r.body)
        assert r.json == created.json


async def test_lookup_errors(api, account):
    """docs/design.md#api-decisions: 404 CONTACT_NOT_FOUND; 400 with neither parameter, naming phoneNumber and email;
    an invalid phone is 400 INVALID_PHONE, as on creation."""
    key = account["api_key"]
    await create(api, key, phone="+14155552671", email="ada@example.com")
    for query in ("phoneNumber=%2B442071838750", "email=nobody@example.com"):
        r = await api.get("/v1/contacts?" + query, key=key)
        assert r.code == 404, r.body
        assert r.json["error"]["code"] == "CONTACT_NOT_FOUND"
    # Without either parameter GET /v1/contacts lists every contact (issue 41); a misspelt one is refused.
    for query in ("?phonenumber=%2B14155552671", "?phoneNumber=&email="):
        r = await api.get("/v1/contacts" + query, key=key)
        assert r.code == 400, (query, r.body)
        assert r.json["error"]["code"] == "VALIDATION_ERROR"
        assert "phoneNumber" in r.json["error"]["message"] and "email" in r.json["error"]["message"]
    r = await api.get("/v1/contacts?phoneNumber=4155552671", key=key)
    assert r.code == 400 and r.json["error"]["code"] == "INVALID_PHONE"
    r = await api.get("/v1/contacts?email=nope", key=key)
    assert r.code == 400 and r.json["error"]["code"] == "INVALID_EMAIL"
    r = await api.get("/v1/contacts?phoneNumber=%2B14155552671")
    assert r.code == 401


async def test_lookup_with_both_parameters_tries_phone_then_email(api, account):
    """docs/design.md#api-decisions lookup: with both parameters the phone decides when it matches, else the email."""
    key = account["api_key"]
    by_phone = await create(api, key, phone="+14155552671")
    by_email = await create(api, key, email="ada@example.com")
    r = await api.get("/v1/contacts?phoneNumber=%2B14155552671&email=ada@example.com", key=key)
    assert r.json["id"] == by_phone.json["id"]
    r = await api.get("/v1/contacts?phoneNumber=%2B442071838750&email=ada@example.com", key=key)
    assert r.json["id"] == by_email.json["id"]


async def test_get_contact_by_id(api, account):
    """docs/design.md#api-decisions: GET /v1/contacts/{id} answers the contact, 404 CONTACT_NOT_FOUND for an unknown id."""
    key = account["api_key"]
    created = await create(api, key, phone="+14155552671")
    r = await api.get(f"/v1/contacts/{created.json['id']}", key=key)
    assert r.code == 200 and r.json == created.json
    r = await api.get("/v1/contacts/ct_doesnotexist", key=key)
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND"


async def test_another_account_sees_none_of_this_accounts_contacts(api, account, other_account):
    """docs/design.md#conventions: every query is scoped by account; another account's key sees nothing."""
    mine, theirs = account, other_account
    created = await create(api, mine["api_key"], phone="+14155552671", email="ada@example.com")
    r = await api.get(f"/v1/contacts/{created.json['id']}", key=theirs["api_key"])
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND"
    for query in ("phoneNumber=%2B14155552671", "email=ada@example.com"):
        r = await api.get("/v1/contacts?" + query, key=theirs["api_key"])
        assert r.code == 404, query
    # The same phone in another account is that account's own, new contact.
    r = await create(api, theirs["api_key"], phone="+1 415 555 2671")
    assert r.code == 201 and r.json["id"] != created.json["id"]


async def test_new_contact_queues_contact_created_when_the_account_listens(api, account, other_account,
                                                                          services):
    """§6 "The service also has notifications for contact creation"; docs/design.md#api-decisions Notifications: body
    {event, id, occurredAt, accountId, data}. Only accounts with a contact.created URL get a row."""
    listening, silent = account, other_account
    r = await api.patch("/v1/account/settings",
                        {"notificationUrls": {"contact.created": "http://127.0.0.1:9/x"}},
                        key=listening["api_key"])
    assert r.code == 200, r.body
    created = await create(api, listening["api_key"], firstName="Ada", phone="+14155552671")
    rows = await list_outbox(services.db, listening["account_id"], "notification")
    assert len(rows) == 1
    assert rows[0]["event_type"] == "contact.created" and rows[0]["status"] == "pending"
    payload = json.loads(rows[0]["payload"])
    assert payload["event"] == "contact.created" and payload["accountId"] == listening["account_id"]
    assert payload["id"] == rows[0]["webhook_id"]
    assert payload["data"] == created.json
    # Returning the existing contact creates nothing, so notifies nothing.
    assert (await create(api, listening["api_key"], phone="+1 415 555 2671", email="a@example.com")).code == 200
    assert len(await list_outbox(services.db, listening["account_id"], "notification")) == 1
    assert (await create(api, silent["api_key"], phone="+14155552671")).code == 201
    assert await list_outbox(services.db, silent["account_id"]) == []


async def test_contact_created_is_written_in_the_contacts_transaction(api, account, services):
    """Issue: events are written to a durable outbox in the same transaction as the contact:
    find_or_create_in_tx (also used by the custom channel) writes both or, rolled back, neither."""
    await api.patch("/v1/account/settings", {"notificationUrls": {"contact.created": "http://127.0.0.1:9/x"}},
                    key=account["api_key"])
    cx = services.db.connect_sync()
    try:
        cx.execute("BEGIN")  # either database; nothing else writes meanwhile
        row, created = contact_store.find_or_create_in_tx(cx, {
            "id": "ct_tx", "account_id": account["account_id"], "phone": "+14155552671",
            "created_at": "2026-01-01T00:00:00.000Z"})
        assert created
        assert cx.execute("SELECT COUNT(*) FROM outbox WHERE event_type = 'contact.created'").fetchone()[0] == 1
        cx.execute("ROLLBACK")
        assert cx.execute("SELECT COUNT(*) FROM contacts").fetchone()[0] == 0
        assert cx.execute("SELECT COUNT(*) FROM outbox").fetchone()[0] == 0
    finally:
        cx.close()


@pytest.mark.sqlite_only("EXPLAIN QUERY PLAN is SQLite's planner")
def test_lookup_by_phone_and_email_uses_an_index(services, account):
    """Issue: lookup by phone and email stays an index lookup (EXPLAIN QUERY PLAN), never a table scan."""
    plans = query_plans(services.db.path, lambda cx: (
        contact_store.find_by_phone.sync(cx, account["account_id"], "+14155552671"),
        contact_store.find_by_email.sync(cx, account["account_id"], "ada@example.com")))
    assert len(plans) == 2, plans
    (phone_sql, phone_plan), (email_sql, email_plan) = plans.items()
    assert any("USING INDEX contacts_account_phone" in d for d in phone_plan), phone_plan
    assert any("USING INDEX contacts_account_email" in d for d in email_plan), email_plan
    for plan in (phone_plan, email_plan):
        assert not any(d.startswith("SCAN") for d in plan), plan
