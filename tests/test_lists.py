"""Lists API: docs/api.md#lists (add a contact to a list), §2 List; docs/design.md#api-decisions Lists."""
import json

import pytest

from storage import lists as list_store
from storage.outbox import list_outbox
from tests.db_direct import query_plans
from tests.contact_helpers import add, membership_rows, new_contact, new_list


@pytest.fixture
def other_account(make_account, account):
    return make_account()


async def test_create_list_answers_201_and_the_list(api, account):
    """§2 List: "A contact list is identified by a list id"; docs/design.md#api-decisions: POST /lists {name} → 201 list."""
    key = account["api_key"]
    r = await api.post("/v1/lists", {"name": "  Spring leads "}, key=key)
    assert r.code == 201, r.body
    assert set(r.json) == {"id", "name", "contactCount", "createdAt"}
    assert r.json["id"].startswith("lst_") and r.json["name"] == "Spring leads"
    assert r.json["contactCount"] == 0
    got = await api.get(f"/v1/lists/{r.json['id']}", key=key)
    assert got.code == 200 and got.json == r.json
    for body in ({}, {"name": ""}, {"name": "   "}, {"name": 7}, {"name": "x" * 201}):
        r = await api.post("/v1/lists", body, key=key)
        assert r.code == 400, (body, r.body)
        assert r.json["error"]["code"] == "VALIDATION_ERROR" and "name" in r.json["error"]["message"]
    r = await api.get("/v1/lists/lst_nope", key=key)
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND"


async def test_add_contact_to_list_is_idempotent(api, account, services):
    """§4.3 "POST /lists/{listId}/contacts ... contactId (string, required), the id of an existing
    contact"; docs/design.md#api-decisions: 200 {success, listId, contactId, added}, added false when already a member."""
    key = account["api_key"]
    lst = await new_list(api, key)
    contact = await new_contact(api, key, phone="+14155552671")
    r = await add(api, key, lst["id"], contact["id"])
    assert r.code == 200, r.body
    assert r.json == {"success": True, "listId": lst["id"], "contactId": contact["id"], "added": True}
    r = await add(api, key, lst["id"], contact["id"])
    assert r.code == 200
    assert r.json == {"success": True, "listId": lst["id"], "contactId": contact["id"], "added": False}
    assert membership_rows(services, lst["id"]) == 1
    assert (await api.get(f"/v1/lists/{lst['id']}", key=key)).json["contactCount"] == 1
    members = await api.get(f"/v1/lists/{lst['id']}/contacts", key=key)
    assert members.json == {"data": [contact], "nextCursor": None}


async def test_adding_the_contact_returned_for_an_existing_phone_uses_that_contact(api, account, services):
    """§4.3 "Adding a contact that already exists under the same phone number works as expected (the
    existing contact is used)": the lead-form flow create → add, run twice, leaves one membership."""
    key = account["api_key"]
    lst = await new_list(api, key)
    first = await new_contact(api, key, firstName="Ada", phone="+14155552671")
    r1 = await add(api, key, lst["id"], first["id"])
    second = await new_contact(api, key, firstName="Ada", phone="+1 (415) 555-2671")
    assert second["id"] == first["id"]
    r2 = await add(api, key, lst["id"], second["id"])
    assert (r1.json["added"], r2.json["added"]) == (True, False)
    assert membership_rows(services, lst["id"]) == 1


async def test_add_errors(api, account):
    """§4.3 listId "the id of an existing list", contactId "required", "the id of an existing
    contact"; docs/design.md#api-decisions: 404 for an unknown list or contact (LIST_NOT_FOUND / CONTACT_NOT_FOUND);
    400 without contactId."""
    key = account["api_key"]
    lst = await new_list(api, key)
    contact = await new_contact(api, key, email="ada@example.com")
    r = await add(api, key, "lst_unknown", contact["id"])
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND", r.body
    r = await add(api, key, lst["id"], "ct_unknown")
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND", r.body
    for body in ({}, {"contactId": ""}, {"contactId": "  "}, {"contactId": None}, {"contactId": 5}):
        r = await api.post(f"/v1/lists/{lst['id']}/contacts", body, key=key)
        assert r.code == 400, (body, r.body)
        assert r.json["error"]["code"] == "VALIDATION_ERROR" and "contactId" in r.json["error"]["message"]
    r = await api.call("PUT", f"/v1/lists/{lst['id']}/contacts", {"contactId": contact["id"]}, key=key)
    assert r.code == 405 and "GET or POST" in r.json["error"]["message"]
    r = await api.post(f"/v1/lists/{lst['id']}/contacts", {"contactId": contact["id"]})
    assert r.code == 401


async def test_another_account_cannot_see_or_add_to_this_accounts_lists(api, account, other_account, services):
    """docs/design.md#conventions: every query is scoped by account; another account's key gets 404 for this account's
    list and contact ids and cannot add to them."""
    mine, theirs = account["api_key"], other_account["api_key"]
    lst = await new_list(api, mine, "Mine")
    contact = await new_contact(api, mine, phone="+14155552671")
    their_list = await new_list(api, theirs, "Theirs")
    their_contact = await new_contact(api, theirs, phone="+442071838750")

    r = await add(api, theirs, lst["id"], their_contact["id"])       # their contact into my list
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND"
    r = await add(api, theirs, their_list["id"], contact["id"])      # my contact into their list
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND"
    r = await add(api, theirs, lst["id"], contact["id"])             # mine into mine, with their key
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND"
    for path in (f"/v1/lists/{lst['id']}", f"/v1/lists/{lst['id']}/contacts"):
        r = await api.get(path, key=theirs)
        assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND", path
    r = await api.get("/v1/lists", key=theirs)
    assert [x["id"] for x in r.json["data"]] == [their_list["id"]]
    assert membership_rows(services, lst["id"]) == 0 and membership_rows(services, their_list["id"]) == 0


async def test_lists_are_paginated_with_a_cursor(api, account):
    """docs/design.md#api-decisions GET /lists; pagination: ?limit= (default 50, max 200), opaque ?cursor=, response
    {data, nextCursor}; nextCursor is null on the last page."""
    key = account["api_key"]
    created = sorted([await new_list(api, key, f"List {i}") for i in range(5)], key=lambda x: x["id"])
    seen, cursor, pages = [], None, 0
    while True:
        path = "/v1/lists?limit=2" + (f"&cursor={cursor}" if cursor else "")
        r = await api.get(path, key=key)
        assert r.code == 200, r.body
        seen += r.json["data"]
        pages += 1
        cursor = r.json["nextCursor"]
        if cursor is None:
            break
        assert created[0]["id"] not in cursor  # opaque, not the raw id
    assert pages == 3 and seen == created
    r = await api.get("/v1/lists", key=key)
    assert r.json == {"data": created, "nextCursor": None}
    for query in ("limit=0", "limit=201", "limit=ten", "cursor=!!!", "cursor=bG9s"):
        r = await api.get("/v1/lists?" + query, key=key)
        assert r.code == 400, (query, r.body)
        assert r.json["error"]["code"] == "VALIDATION_ERROR"
    assert (await api.get("/v1/lists?limit=200", key=key)).code == 200


async def test_list_members_are_paginated_by_keyset(api, account):
    """docs/design.md#api-decisions "GET /lists/{id}/contacts (paginated with a cursor)": every member once, in id order,
    even when members are added while a client pages. Keyset, not OFFSET: a member added before the
    cursor position shifts nothing (OFFSET would repeat a row), one added after it is still reached."""
    key = account["api_key"]
    lst = await new_list(api, key)
    made = [await new_contact(api, key, email=f"c{i}@example.com") for i in range(6)]
    early, *contacts = sorted(made, key=lambda c: c["id"])  # ids are time-ordered; same-ms ties are random
    for c in reversed(contacts):
        assert (await add(api, key, lst["id"], c["id"])).json["added"]
    r = await api.get(f"/v1/lists/{lst['id']}/contacts?limit=2", key=key)
    seen = r.json["data"]
    assert seen == contacts[:2]
    await add(api, key, lst["id"], early["id"])  # sorts before the cursor
    late = await new_contact(api, key, email="late@example.com")
    await add(api, key, lst["id"], late["id"])   # sorts after everything
    cursor = r.json["nextCursor"]
    while cursor:
        r = await api.get(f"/v1/lists/{lst['id']}/contacts?limit=2&cursor={cursor}", key=key)
        assert r.code == 200, r.body
        seen += r.json["data"]
        cursor = r.json["nextCursor"]
    assert seen == sorted(contacts + [late], key=lambda c: c["id"])
    r = await api.get(f"/v1/lists/{lst['id']}/contacts?limit=200", key=key)
    assert r.json == {"data": sorted(made + [late], key=lambda c: c["id"]), "nextCursor": None}
    r = await api.get("/v1/lists/lst_unknown/contacts", key=key)
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND"


async def test_first_membership_queues_contact_tagged(api, account, services):
    """§6 "The service also has notifications for ... contact tagging"; docs/design.md#api-decisions "A first add emits
    contact.tagged": one row per new membership, none for a repeat, written with the membership."""
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"contact.tagged": "http://127.0.0.1:9/t"}},
                        key=key)
    assert r.code == 200, r.body
    lst = await new_list(api, key, "VIP")
    contact = await new_contact(api, key, phone="+14155552671")
    assert await list_outbox(services.db, account["account_id"]) == []  # no contact.created URL set
    await add(api, key, lst["id"], contact["id"])
    await add(api, key, lst["id"], contact["id"])
    rows = await list_outbox(services.db, account["account_id"], "notification")
    assert [row["event_type"] for row in rows] == ["contact.tagged"]
    payload = json.loads(rows[0]["payload"])
    assert payload["event"] == "contact.tagged" and payload["accountId"] == account["account_id"]
    assert payload["data"]["contact"] == contact
    assert payload["data"]["list"] == {"id": lst["id"], "name": "VIP"}
    other = await new_list(api, key, "Other")
    await add(api, key, other["id"], contact["id"])
    assert len(await list_outbox(services.db, account["account_id"], "notification")) == 2


@pytest.mark.sqlite_only("EXPLAIN QUERY PLAN is SQLite's planner")
def test_list_pages_are_index_searches(services, account):
    """Keyset pagination, not OFFSET: each page is an index search with no sort step."""
    plans = query_plans(services.db.path, lambda cx: (
        list_store.page_lists.sync(cx, account["account_id"], "lst_0", 51),
        list_store.page_members.sync(cx, account["account_id"], "lst_0", "ct_0", 51)))
    assert len(plans) == 2, plans
    for sql, plan in plans.items():
        assert "OFFSET" not in sql.upper()
        assert any(d.startswith("SEARCH") for d in plan), plan
        assert not any(d.startswith("SCAN") or "TEMP B-TREE" in d for d in plan), plan


def test_lead_form_flow_over_https(tmp_path):
    """§1 "Typical use: an automation tool ... First it creates the contact. Then it adds the contact
    to a list." End to end against the real server.py over HTTPS, twice, as a retrying tool would;
    then the lookup with the "+" left unencoded (§4.2)."""
    from tests.parley_process import ParleyProcess
    with ParleyProcess(tmp_path / "data") as server, server.client() as http:
        key = {"apiKey": server.first_run["api_key"]}
        lst = http.post("/v1/lists", params=key, json={"name": "Lead form"})
        assert lst.status_code == 201, lst.text
        codes, ids = [], set()
        for phone in ("+1 415 555 2671", "+14155552671"):
            contact = http.post("/v1/contacts", params=key, json={"firstName": "Ada", "phone": phone})
            added = http.post(f"/v1/lists/{lst.json()['id']}/contacts", params=key,
                              json={"contactId": contact.json()["id"]})
            assert added.status_code == 200, added.text
            codes.append((contact.status_code, added.json()["added"]))
            ids.add(contact.json()["id"])
        assert codes == [(201, True), (200, False)] and len(ids) == 1
        found = http.get(f"/v1/contacts?phoneNumber=+14155552671&apiKey={key['apiKey']}")
        assert found.status_code == 200, found.text
        assert found.json()["id"] in ids and found.json()["phone"] == "+14155552671"
        members = http.get(f"/v1/lists/{lst.json()['id']}/contacts", params=key).json()
        assert [m["id"] for m in members["data"]] == list(ids) and members["nextCursor"] is None
