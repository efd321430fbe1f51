"""Issue 25 §1 "Contacts and lists can be corrected and removed", the API in process: PATCH /v1/contacts/{id}
(validation as on creation, 409 naming the contact that has the phone or email, contact.updated in the same
transaction, opt-out by hand with who and when), PATCH/DELETE /v1/lists/{id}, DELETE
/v1/lists/{id}/contacts/{contactId}, list names unique per account and the migration that renames
duplicates. Another account's key sees and changes nothing. End to end over HTTPS: tests/test_contact_edit_e2e.py."""
import json
import logging
import shutil

import pytest

from storage import db as dbmod
from storage.outbox import list_outbox
from tests.campaign_helpers import make_list, people, set_webhook
from tests.contact_helpers import add, membership_rows, new_contact, new_list

INBOUND = "/v1/incoming_custom_channel_message"


async def patch(api, key, contact_id, body):
    return await api.patch(f"/v1/contacts/{contact_id}", body, key=key)


async def get_contact(api, key, contact_id):
    return (await api.get(f"/v1/contacts/{contact_id}", key=key)).json


# ---- PATCH /v1/contacts/{id} -------------------------------------------------------------------------

async def test_patch_changes_any_subset_and_null_clears(api, account):
    key = account["api_key"]
    c = await new_contact(api, key, firstName="Ada", lastName="Lovelace", phone="+14155552671")
    r = await patch(api, key, c["id"], {"lastName": "King", "email": " Ada@Example.COM "})
    assert r.code == 200, r.body
    assert r.json == {**c, "lastName": "King", "email": "ada@example.com"}
    r = await patch(api, key, c["id"], {"firstName": None, "phone": "+1 (415) 555-2672"})
    assert r.code == 200 and r.json["firstName"] is None and r.json["phone"] == "+14155552672"
    assert await get_contact(api, key, c["id"]) == r.json
    r = await patch(api, key, c["id"], {})
    assert r.code == 200 and r.json == await get_contact(api, key, c["id"])


async def test_patch_validates_like_create_and_changes_nothing_on_an_error(api, account):
    key = account["api_key"]
    c = await new_contact(api, key, firstName="Ada", phone="+14155552671")
    for body, code, field in (({"phone": "4155552671"}, "INVALID_PHONE", "phone"),
                              ({"phone": "+1415"}, "INVALID_PHONE", "phone"),
                              ({"email": "not-an-email"}, "INVALID_EMAIL", "email"),
                              ({"firstName": "x" * 201}, "VALIDATION_ERROR", "firstName"),
                              ({"optedOut": None}, "VALIDATION_ERROR", "optedOut"),
                              ({"optedOut": "yes"}, "VALIDATION_ERROR", "optedOut"),
                              ({"nickname": "A"}, "VALIDATION_ERROR", "nickname"),
                              ({"phone": None, "firstName": "B"}, "VALIDATION_ERROR", "phone or email")):
        r = await patch(api, key, c["id"], body)
        assert r.code == 400, (body, r.body)
        assert r.json["error"]["code"] == code and field in r.json["error"]["message"], (body, r.json)
    assert await get_contact(api, key, c["id"]) == c
    r = await patch(api, key, "ct_nope", {"firstName": "X"})
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND"


async def test_a_phone_or_email_another_contact_has_is_409_naming_it(api, account, services):
    """409 CONFLICT, the message naming the contact that has it by its name and id (issue 43 §9: an id alone told
    nobody who), existingId its id; nothing changes (the other fields of the same request neither), and no
    contact.updated is queued."""
    key = account["api_key"]
    await api.patch("/v1/account/settings", {"notificationUrls": {"contact.updated": "http://127.0.0.1:9/u"}}, key=key)
    a = await new_contact(api, key, firstName="Ann", lastName="Lee", phone="+14155552671", email="a@example.com")
    b = await new_contact(api, key, phone="+14155552672", email="b@example.com")
    for body, field in (({"firstName": "B2", "phone": "+1 415 555 2671"}, "phone"),
                        ({"firstName": "B2", "email": "A@EXAMPLE.com"}, "email")):
        r = await patch(api, key, b["id"], body)
        assert r.code == 409, r.body
        assert r.json == {"error": {"code": "CONFLICT", "message": f"Ann Lee ({a['id']}) already has this {field}",
                                    "existingId": a["id"]}}
    assert await get_contact(api, key, b["id"]) == b
    assert await list_outbox(services.db, account["account_id"], "notification") == []
    # Its own values again are no conflict.
    r = await patch(api, key, b["id"], {"phone": "+14155552672", "email": "b@example.com"})
    assert r.code == 200 and r.json == b


async def test_contact_updated_is_queued_with_the_change_only_when_something_changed(api, account, services):
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"contact.updated": "http://127.0.0.1:9/u"}},
                        key=key)
    assert r.code == 200, r.body
    c = await new_contact(api, key, phone="+14155552671")
    updated = (await patch(api, key, c["id"], {"firstName": "Grace"})).json
    await patch(api, key, c["id"], {"firstName": "Grace"})  # no change: no notification
    rows = await list_outbox(services.db, account["account_id"], "notification")
    assert [row["event_type"] for row in rows] == ["contact.updated"]
    payload = json.loads(rows[0]["payload"])
    assert payload["event"] == "contact.updated" and payload["accountId"] == account["account_id"]
    assert payload["data"] == updated


async def inbound(api, key, sid, from_id, body="Hi"):
    r = await api.post(INBOUND, {"customData": {"messageSid": sid, "fromId": from_id, "toId": "shop", "body": body}},
                       key=key)
    assert r.code == 200, r.body
    return (await api.get(f"/v1/messages/{r.json['messageId']}", key=key)).json["contactId"]


async def test_channel_identities_stay_with_the_contact(api, account):
    """A contact that wrote in (fromId) and whose phone is then corrected still gets that fromId's messages."""
    key = account["api_key"]
    contact_id = await inbound(api, key, "m1", "+14155550001")
    r = await patch(api, key, contact_id, {"phone": "+14155550002", "firstName": "Moved"})
    assert r.code == 200 and r.json["phone"] == "+14155550002"
    assert await inbound(api, key, "m2", "+14155550001", "Again") == contact_id


async def test_opt_out_by_hand_keeps_who_and_when_and_a_stop_reply_says_so(api, account):
    key = account["api_key"]
    c = await new_contact(api, key, phone="+14155552671")
    assert c["optedOut"] is False and c["optOutChange"] is None
    r = await patch(api, key, c["id"], {"optedOut": True})
    assert r.code == 200 and r.json["optedOut"] is True
    change = r.json["optOutChange"]
    assert change["via"] == "api" and change["by"] is None and change["at"].endswith("Z")
    again = await patch(api, key, c["id"], {"optedOut": True})  # already out: when stays
    assert again.json["optOutChange"] == change
    r = await patch(api, key, c["id"], {"optedOut": False})
    assert r.json["optedOut"] is False and r.json["optOutChange"]["via"] == "api"
    assert await inbound(api, key, "s1", "+14155552671", " stop ") == c["id"]
    got = await get_contact(api, key, c["id"])
    assert got["optedOut"] is True and got["optOutChange"]["via"] == "reply" and got["optOutChange"]["by"] == "stop"


async def test_another_accounts_key_cannot_see_or_change_a_contact(api, account, other_account):
    c = await new_contact(api, account["api_key"], phone="+14155552671")
    r = await patch(api, other_account["api_key"], c["id"], {"firstName": "Mallory", "optedOut": True})
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND"
    # The same phone in another account is no conflict.
    theirs = await new_contact(api, other_account["api_key"], phone="+14155552672")
    assert (await patch(api, other_account["api_key"], theirs["id"], {"phone": "+14155552671"})).code == 200
    assert await get_contact(api, account["api_key"], c["id"]) == c


# ---- lists ----------------------------------------------------------------------------------------------

async def test_list_names_are_unique_without_case_and_spaces(api, account, other_account):
    key = account["api_key"]
    leads = await new_list(api, key, "Leads")
    r = await api.post("/v1/lists", {"name": "  lEADS "}, key=key)
    assert r.code == 409 and r.json["error"]["existingId"] == leads["id"]
    assert r.json["error"]["code"] == "CONFLICT" and leads["id"] in r.json["error"]["message"]
    other = await new_list(api, key, "Customers")
    r = await api.patch(f"/v1/lists/{other['id']}", {"name": "LEADS"}, key=key)
    assert r.code == 409 and r.json["error"]["existingId"] == leads["id"]
    assert (await api.get(f"/v1/lists/{other['id']}", key=key)).json["name"] == "Customers"
    r = await api.patch(f"/v1/lists/{other['id']}", {"name": " Clients "}, key=key)
    assert r.code == 200 and r.json == {**other, "name": "Clients"}
    r = await api.patch(f"/v1/lists/{leads['id']}", {"name": "leads"}, key=key)  # its own name, another case
    assert r.code == 200 and r.json["name"] == "leads"
    for body in ({}, {"name": " "}, {"name": "x" * 201}):
        r = await api.patch(f"/v1/lists/{leads['id']}", body, key=key)
        assert r.code == 400 and "name" in r.json["error"]["message"], body
    # Another account may have a list of the same name, and cannot rename or delete this one.
    await new_list(api, other_account["api_key"], "Leads")
    r = await api.patch(f"/v1/lists/{leads['id']}", {"name": "Mine"}, key=other_account["api_key"])
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND"
    r = await api.delete(f"/v1/lists/{leads['id']}", key=other_account["api_key"])
    assert r.code == 404
    assert (await api.get(f"/v1/lists/{leads['id']}", key=key)).json["name"] == "leads"


async def test_delete_list_removes_memberships_never_contacts(api, account, services):
    key = account["api_key"]
    lst = await new_list(api, key, "Leads")
    a = await new_contact(api, key, phone="+14155552671")
    b = await new_contact(api, key, phone="+14155552672")
    for c in (a, b):
        await add(api, key, lst["id"], c["id"])
    r = await api.delete(f"/v1/lists/{lst['id']}", key=key)
    assert r.code == 200 and r.json == {"deleted": True, "id": lst["id"], "removedMemberships": 2}
    assert membership_rows(services, lst["id"]) == 0
    assert (await api.get(f"/v1/lists/{lst['id']}", key=key)).code == 404
    assert (await api.get(f"/v1/lists/{lst['id']}/contacts", key=key)).code == 404
    assert (await add(api, key, lst["id"], a["id"])).code == 404
    assert lst["id"] not in [x["id"] for x in (await api.get("/v1/lists", key=key)).json["data"]]
    assert (await get_contact(api, key, a["id"]))["id"] == a["id"]
    assert (await api.delete(f"/v1/lists/{lst['id']}", key=key)).code == 404
    assert (await api.post("/v1/lists", {"name": "leads"}, key=key)).code == 201  # the name is free again


async def test_a_started_campaign_keeps_its_recipients_a_scheduled_one_blocks_the_delete(api, account, services):
    key = account["api_key"]
    await set_webhook(api, account, "http://127.0.0.1:9/hook")
    list_id, _ = await make_list(services, account, people(2))
    r = await api.post("/v1/campaigns", {"name": "Later", "listId": list_id, "body": "Hi",
                                         "startAt": "2099-01-01T00:00:00Z"}, key=key)
    assert r.code == 201, r.body
    later = r.json
    r = await api.delete(f"/v1/lists/{list_id}", key=key)
    assert r.code == 409 and r.json["error"]["existingId"] == later["id"]
    assert membership_rows(services, list_id) == 2
    await api.post(f"/v1/campaigns/{later['id']}/cancel", key=key)
    r = await api.post("/v1/campaigns", {"name": "Now", "listId": list_id, "body": "Hi"}, key=key)
    assert r.code == 201, r.body
    now = r.json
    assert (await api.delete(f"/v1/lists/{list_id}", key=key)).code == 200
    recipients = await api.get(f"/v1/campaigns/{now['id']}/recipients", key=key)
    assert len(recipients.json["data"]) == 2
    assert (await api.get(f"/v1/campaigns/{now['id']}", key=key)).json["counts"]["total"] == 2
    r = await api.post("/v1/campaigns", {"name": "After", "listId": list_id, "body": "Hi"}, key=key)
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND"  # a deleted list is no audience


async def test_remove_one_member_is_idempotent(api, account, other_account, services):
    key = account["api_key"]
    lst = await new_list(api, key, "Leads")
    a = await new_contact(api, key, phone="+14155552671")
    await add(api, key, lst["id"], a["id"])
    r = await api.delete(f"/v1/lists/{lst['id']}/contacts/{a['id']}", key=other_account["api_key"])
    assert r.code == 404 and membership_rows(services, lst["id"]) == 1
    r = await api.delete(f"/v1/lists/{lst['id']}/contacts/{a['id']}", key=key)
    assert r.code == 200 and r.json == {"success": True, "listId": lst["id"], "contactId": a["id"], "removed": True}
    r = await api.delete(f"/v1/lists/{lst['id']}/contacts/{a['id']}", key=key)
    assert r.code == 200 and r.json["removed"] is False
    assert (await api.get(f"/v1/lists/{lst['id']}", key=key)).json["contactCount"] == 0
    assert (await get_contact(api, key, a["id"]))["id"] == a["id"]
    r = await api.delete(f"/v1/lists/lst_nope/contacts/{a['id']}", key=key)
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND"


@pytest.mark.sqlite_only("migrates an SQLite file of its own")
def test_the_migration_renames_duplicate_list_names_and_logs_it(tmp_path, monkeypatch, caplog):
    older = tmp_path / "migrations"
    older.mkdir()
    for path in sorted(dbmod.MIGRATIONS.glob("0*.sql")):
        if int(path.name[:4]) < 161:
            shutil.copy(path, older)
    all_migrations = dbmod.MIGRATIONS
    monkeypatch.setattr(dbmod, "MIGRATIONS", older)
    cx = dbmod.connect_sync(tmp_path / "old.db")
    dbmod.migrate(cx)
    for account_id in ("acc_1", "acc_2"):
        cx.execute("INSERT INTO accounts (id, name, email, type, webhook_secret, created_at)"
                   " VALUES (?, 'A', ?, 'standard', 's', 'now')", (account_id, account_id + "@x"))
    for list_id, account_id, name in (("lst_1", "acc_1", "Leads"), ("lst_2", "acc_1", "leads "),
                                      ("lst_3", "acc_1", "LEADS"), ("lst_4", "acc_1", "Other"),
                                      ("lst_5", "acc_2", "Leads")):
        cx.execute("INSERT INTO lists (id, account_id, name, created_at) VALUES (?, ?, ?, 'now')",
                   (list_id, account_id, name))
    monkeypatch.setattr(dbmod, "MIGRATIONS", all_migrations)
    with caplog.at_level(logging.INFO, logger=dbmod.log.name):
        dbmod.migrate(cx)
    names = dict(cx.execute("SELECT id, name FROM lists ORDER BY id").fetchall())
    assert names == {"lst_1": "Leads", "lst_2": "leads (2)", "lst_3": "LEADS (3)", "lst_4": "Other", "lst_5": "Leads"}
    logged = [r.getMessage() for r in caplog.records if "0161" in r.getMessage()]
    assert any("lst_2" in m and "'leads (2)'" in m and "lst_1" in m for m in logged), logged
    assert any("lst_3" in m and "'LEADS (3)'" in m for m in logged), logged
    import sqlite3
    try:
        cx.execute("INSERT INTO lists (id, account_id, name, name_key, created_at) VALUES"
                   " ('lst_6', 'acc_1', 'x', 'leads', 'now')")
        raise AssertionError("the unique index should refuse a second 'leads'")
    except sqlite3.IntegrityError:
        pass
    cx.close()


async def test_an_idempotency_key_tells_a_cleared_field_from_an_absent_one(api, account):
    """The same key with {"lastName": null} after {} is other parameters (422), not a replay."""
    key = account["api_key"]
    c = await new_contact(api, key, firstName="Ada", lastName="Lovelace", phone="+14155552671")
    first = await api.patch(f"/v1/contacts/{c['id']}", {"firstName": "Ada"}, key=key, headers={"Idempotency-Key": "k1"})
    assert first.code == 200
    r = await api.patch(f"/v1/contacts/{c['id']}", {"firstName": "Ada", "lastName": None}, key=key,
                        headers={"Idempotency-Key": "k1"})
    assert r.code == 422 and r.json["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert (await get_contact(api, key, c["id"]))["lastName"] == "Lovelace"
