"""Issue 41: merging two contacts of one person (POST /v1/contacts/{id}/merge): the other's identities, messages,
notes, memberships, campaign rows and conversation move; blank fields are filled from it; it is gone (404); new
messages from its identities reach the kept contact; audited; contact.updated and contact.merged; 409 for a phone or
email both have unless keep chooses; concurrent inbound messages during a merge all land on the kept contact (the
lock order, on PostgreSQL); another account's key sees, changes and learns nothing."""
import asyncio

from handlers.event_schemas import ContactMergedData
from tests.contact_helpers import INBOUND, inbound


async def merge(api, key, contact_id, body):
    return await api.post(f"/v1/contacts/{contact_id}/merge", body, key=key)


async def contact(api, key, contact_id):
    return await api.get(f"/v1/contacts/{contact_id}", key=key)


async def messages_of(api, key, contact_id):
    r = await api.get(f"/v1/contacts/{contact_id}/messages?limit=200", key=key)
    assert r.code == 200, r.body
    return [m["body"] for m in r.json["data"]]


async def test_merge_moves_everything_and_the_other_is_gone(api, account):
    key = account["api_key"]
    kept_id = await inbound(api, key, "k1", "+14155550001", "From the phone")
    other_id = await inbound(api, key, "o1", "visitor-7", "From the chat")
    await inbound(api, key, "o2", "visitor-7", "Still the chat")
    assert (await api.patch(f"/v1/contacts/{kept_id}", {"firstName": "Ada", "tags": ["vip"]}, key=key)).code == 200
    r = await api.patch(f"/v1/contacts/{other_id}", {"firstName": "Augusta", "lastName": "King", "phone": None,
                                                     "email": "ada@example.com", "tags": ["chat"]}, key=key)
    assert r.code == 200, r.body
    assert (await api.post(f"/v1/conversations/{other_id}/notes", {"body": "Asked about prices"}, key=key)).code == 201
    both = (await api.post("/v1/lists", {"name": "Both"}, key=key)).json
    only_other = (await api.post("/v1/lists", {"name": "Chat users"}, key=key)).json
    for list_id, contact_id in ((both["id"], kept_id), (both["id"], other_id), (only_other["id"], other_id)):
        assert (await api.post(f"/v1/lists/{list_id}/contacts", {"contactId": contact_id}, key=key)).code == 200
    await api.patch("/v1/account/settings", {"notificationUrls": {"contact.merged": "http://127.0.0.1:9/m"}}, key=key)

    r = await merge(api, key, kept_id, {"otherId": other_id})
    assert r.code == 200, r.body
    merged = r.json["contact"]
    assert r.json["mergedId"] == other_id
    assert r.json["moved"] == {"messages": 2, "identities": 1, "notes": 1, "optOutChanges": 0, "lists": 1,
                               "campaigns": 0, "conversation": 1}
    # Blank fields filled (lastName, email); a name both have stays this one's; tags joined.
    assert (merged["firstName"], merged["lastName"], merged["phone"], merged["email"]) == \
        ("Ada", "King", "+14155550001", "ada@example.com")
    assert merged["tags"] == ["chat", "vip"]

    r = await contact(api, key, other_id)
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND"
    assert await messages_of(api, key, kept_id) == ["From the phone", "From the chat", "Still the chat"]
    notes = (await api.get(f"/v1/conversations/{kept_id}/notes", key=key)).json["data"]
    assert [n["body"] for n in notes] == ["Asked about prices"]
    assert (await api.get(f"/v1/lists/{both['id']}", key=key)).json["contactCount"] == 1
    members = (await api.get(f"/v1/lists/{only_other['id']}/contacts", key=key)).json["data"]
    assert [m["id"] for m in members] == [kept_id]
    # One conversation, with both's unread messages.
    conversation = (await api.get(f"/v1/conversations/{kept_id}", key=key)).json
    assert conversation["unreadCount"] == 3
    assert (await api.get(f"/v1/conversations/{other_id}", key=key)).code == 404

    # New messages from the other's identity reach the kept contact.
    assert await inbound(api, key, "o3", "visitor-7", "After the merge") == kept_id

    audit = [e for e in (await api.get("/v1/audit", key=key)).json["data"] if e["action"] == "contact.merged"]
    assert [(e["subjectId"], e["detail"]["mergedId"]) for e in audit] == [(kept_id, other_id)]
    events = (await api.get("/v1/events?types=contact.merged,contact.updated", key=key)).json["data"]
    assert events[-2]["type"] == "contact.updated" and events[-2]["data"]["id"] == kept_id
    assert events[-1]["type"] == "contact.merged"
    assert ContactMergedData.model_validate(events[-1]["data"]).model_dump() == {"contactId": kept_id,
                                                                                 "mergedId": other_id}


async def test_a_phone_or_email_both_have_needs_a_choice(api, account):
    key = account["api_key"]
    kept = (await api.post("/v1/contacts", {"firstName": "Ada", "phone": "+14155550001",
                                            "email": "ada@work.example"}, key=key)).json
    other = (await api.post("/v1/contacts", {"firstName": "Ada L", "phone": "+14155550002",
                                             "email": "ada@home.example"}, key=key)).json
    r = await merge(api, key, kept["id"], {"otherId": other["id"]})
    assert r.code == 409 and r.json["error"]["code"] == "CONFLICT", r.body
    message = r.json["error"]["message"]
    assert "phone" in message and "email" in message and '"keep"' in message
    assert r.json["error"]["existingId"] == other["id"]
    r = await merge(api, key, kept["id"], {"otherId": other["id"], "keep": {"phone": "this"}})
    assert r.code == 409 and "email" in r.json["error"]["message"] and "phone" not in r.json["error"]["message"]
    assert (await contact(api, key, other["id"])).code == 200  # nothing changed
    for body in ({"otherId": kept["id"]}, {"otherId": ""}, {"otherId": other["id"], "keep": {"phone": "mine"}},
                 {"otherId": other["id"], "keep": {"optedOut": "other"}}, {}):
        r = await merge(api, key, kept["id"], body)
        assert r.code == 400, (body, r.body)
    r = await merge(api, key, kept["id"], {"otherId": other["id"],
                                          "keep": {"phone": "this", "email": "other", "firstName": "other"}})
    assert r.code == 200, r.body
    assert (r.json["contact"]["firstName"], r.json["contact"]["phone"], r.json["contact"]["email"]) == \
        ("Ada L", "+14155550001", "ada@home.example")
    # The dropped phone names nobody now: a new contact can have it.
    r = await api.post("/v1/contacts", {"phone": "+14155550002"}, key=key)
    assert r.code == 201


async def test_another_accounts_key_can_merge_nothing(api, account, other_account):
    key, other_key = account["api_key"], other_account["api_key"]
    a = (await api.post("/v1/contacts", {"phone": "+14155550001"}, key=key)).json
    b = (await api.post("/v1/contacts", {"email": "b@example.com"}, key=key)).json
    mine = (await api.post("/v1/contacts", {"email": "mine@example.com"}, key=other_key)).json
    for contact_id, other_id in ((a["id"], b["id"]), (mine["id"], a["id"]), (a["id"], mine["id"])):
        r = await merge(api, other_key, contact_id, {"otherId": other_id})
        assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND", r.body
    r = await merge(api, key, a["id"], {"otherId": mine["id"]})
    assert r.code == 404
    for contact_id, k in ((a["id"], key), (b["id"], key), (mine["id"], other_key)):
        assert (await contact(api, k, contact_id)).code == 200
    assert not [e for e in (await api.get("/v1/audit", key=other_key)).json["data"] if e["action"] == "contact.merged"]


async def test_inbound_messages_during_a_merge_all_reach_the_kept_contact(api, account):
    """A merge and inbound messages from the other's identities at the same time (PostgreSQL runs them side by
    side): every message is stored, on the kept contact, none fails, and nothing deadlocks."""
    key = account["api_key"]
    kept_id = await inbound(api, key, "k0", "+14155550001")
    other_id = await inbound(api, key, "o0", "visitor-1")
    assert (await api.patch(f"/v1/contacts/{other_id}", {"email": "v2@example.com"}, key=key)).code == 200
    assert await inbound(api, key, "o0b", "v2@example.com") == other_id  # a second identity of the other
    identities = ("visitor-1", "v2@example.com")
    sends = [api.post(INBOUND, {"customData": {"messageSid": f"c{i}", "fromId": identities[i % 2],
                                               "toId": "shop", "body": f"concurrent {i}"}}, key=key)
             for i in range(12)]
    sends.insert(6, merge(api, key, kept_id, {"otherId": other_id}))
    answers = await asyncio.gather(*sends)
    assert [r.code for r in answers] == [200] * len(answers), [r.body for r in answers if r.code != 200]
    bodies = await messages_of(api, key, kept_id)
    assert sorted(b for b in bodies if b.startswith("concurrent")) == sorted(f"concurrent {i}" for i in range(12))
    assert (await contact(api, key, other_id)).code == 404


async def test_contact_page_merge_action_asks_which_phone_to_keep(signed_in, services, ui_account):
    from services import contacts as contact_service
    account_id = ui_account["account_id"]
    kept, _ = await contact_service.create_contact(services.db, account_id, first_name="Ada", phone="+14155550001")
    other, _ = await contact_service.create_contact(services.db, account_id, first_name="Augusta",
                                                    phone="+14155550002", email="ada@example.com")
    page = (await signed_in.get(f"/contacts/{kept['id']}")).text
    assert 'action="/contacts/' + kept["id"] + '/merge"' in page and 'data-suggest="/contacts/suggest"' in page
    r = await signed_in.post(f"/contacts/{kept['id']}/merge", {"other": "Nobody Here"})
    assert r.code == 404 and 'id="merge-error"' in r.text
    r = await signed_in.post(f"/contacts/{kept['id']}/merge", {"other": "ada@example.com"})
    assert r.code == 409 and 'id="keep-phone"' in r.text and "+14155550002" in r.text, r.text
    assert f'name="other" value="{other["id"]}"' in r.text
    r = await signed_in.post(f"/contacts/{kept['id']}/merge", {"other": other["id"], "keep_phone": "other"})
    assert r.code == 303, r.text
    merged = await contact_service.get_contact(services.db, account_id, kept["id"])
    assert (merged["firstName"], merged["phone"], merged["email"]) == ("Ada", "+14155550002", "ada@example.com")
    assert (await signed_in.get(f"/contacts/{other['id']}")).code == 404
