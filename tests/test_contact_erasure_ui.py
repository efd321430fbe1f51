"""Issue 21, the contact page and erasure in the UI (in process, with the cookie-keeping FormClient of
tests/test_ui.py): the page shows the conversation (message count, last message, a link to the thread); "Erase
contact" asks for the contact's phone or email first, then erases and says so; another account's contact is a
404 on the confirm page and on the erase. In Chromium against the real server: tests/test_contact_erasure_e2e.py."""
from services import contacts as contact_service
from services import lists as list_service
from storage import messages as message_store
from tests.ui_helpers import field_error
from tests.contact_helpers import make_contact


async def _inbound(api, key, from_id, body, sid):
    r = await api.post("/v1/incoming_custom_channel_message", {"customData": {
        "messageSid": sid, "fromId": from_id, "toId": "shop", "body": body}}, key=key)
    assert r.code == 200, r.body


async def test_the_contact_page_shows_its_conversation(signed_in, services, ui_account, api):
    account_id, key = ui_account["account_id"], ui_account["api_key"]
    quiet = await make_contact(services, account_id, first_name="Quiet", phone="+14155550111")
    page = (await signed_in.get(f"/contacts/{quiet['id']}")).text
    assert '<p id="message-count">No messages yet.</p>' in page
    await _inbound(api, key, "+14155550112", "First question", "s1")
    await _inbound(api, key, "+14155550112", "Second <question>", "s2")
    talker = await contact_service.lookup_contact(services.db, account_id, phone_number="+14155550112")
    page = (await signed_in.get(f"/contacts/{talker['id']}")).text
    assert '<dd id="message-count">2</dd>' in page
    assert "From the contact, <time" in page and "Second &lt;question&gt;</dd>" in page
    assert f'href="/inbox/{talker["id"]}" id="open-conversation"' in page
    assert f'href="/contacts/{talker["id"]}/erase" id="erase-contact"' in page


async def test_erase_asks_for_the_phone_or_email_then_erases(signed_in, services, ui_account, api):
    account_id, key = ui_account["account_id"], ui_account["api_key"]
    await _inbound(api, key, "+14155550131", "Please forget me", "e1")
    ada = await contact_service.lookup_contact(services.db, account_id, phone_number="+14155550131")
    await contact_service.update_contact(services.db, account_id, ada["id"], {"email": "ada@example.com"},
                                         contact_service.API_ACTOR)
    lst = await list_service.create_list(services.db, account_id, "Leads")
    await list_service.add_contact(services.db, account_id, lst["id"], ada["id"])
    confirm = (await signed_in.get(f"/contacts/{ada['id']}/erase")).text
    assert "<strong>1 message</strong>" in confirm and "<strong>1 list membership</strong>" in confirm
    assert "type the contact's phone or email" in confirm
    for typed in ("", "+14155550132", "someone@example.com", "Ada"):
        r = await signed_in.post(f"/contacts/{ada['id']}/erase", {"confirm": typed})
        assert r.code == 400 and "to confirm the erasure" in field_error(r.text, "confirm"), typed
    assert (await contact_service.get_contact(services.db, account_id, ada["id"]))["id"] == ada["id"]
    # The phone in another form, or the email in another case, confirms.
    r = await signed_in.post(f"/contacts/{ada['id']}/erase", {"confirm": " +1 (415) 555-0131 "})
    assert r.code == 303 and r.headers["Location"] == "/contacts"
    assert "Contact erased: its details, messages" in (await signed_in.get("/contacts")).text
    assert (await signed_in.get(f"/contacts/{ada['id']}")).code == 404
    entry = (await api.get("/v1/audit", key=key)).json["data"][0]
    assert (entry["action"], entry["subjectId"], entry["actorLabel"]) == ("contact.erased", ada["id"],
                                                                          ui_account["email"])
    assert (await signed_in.get(f"/inbox/{ada['id']}")).code == 404
    assert await message_store.count_contact_messages(services.db, account_id, ada["id"]) == 0
    assert (await list_service.get_list(services.db, account_id, lst["id"]))["contactCount"] == 0
    bob = await make_contact(services, account_id, first_name="Bob", email="bob@example.com")
    r = await signed_in.post(f"/contacts/{bob['id']}/erase", {"confirm": "BOB@Example.com"})
    assert r.code == 303


async def test_another_accounts_contact_is_404_on_the_confirm_page_and_the_erase(signed_in, services, other_account):
    account_id = other_account["account_id"]
    theirs = await make_contact(services, account_id, first_name="Theirs", phone="+14155550000")
    assert (await signed_in.get(f"/contacts/{theirs['id']}/erase")).code == 404
    r = await signed_in.post(f"/contacts/{theirs['id']}/erase", {"confirm": "+14155550000"})
    assert r.code == 404
    assert await contact_service.get_contact(services.db, account_id, theirs["id"]) == theirs
