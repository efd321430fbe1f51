"""Issue 25 §1, the UI: a contact edited in place (the API's errors next to their field), opted out and back
in by hand (who and when shown), taken off a list; a list renamed, its members removed one at a time or
checked many at once, and deleted after a confirmation that says how many memberships go. In process with
the cookie-keeping FormClient of tests/test_ui.py; another account's ids are 404s. In Chromium against the
real server: tests/test_contact_edit_e2e.py."""
import re

from services import contacts as contact_service
from services import lists as list_service
from tests.ui_helpers import field_error, unescape
from tests.contact_helpers import make_contact


async def api_contact(services, account_id, contact_id):
    return await contact_service.get_contact(services.db, account_id, contact_id)


FORM = {"firstName": "Ada", "lastName": "Lovelace", "phone": "+14155552671", "email": ""}


async def test_edit_a_contact_in_place_with_the_apis_errors_next_to_the_field(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    ada = await make_contact(services, account_id, first_name="Ada", phone="+14155552671")
    bob = await make_contact(services, account_id, first_name="Bob", phone="+14155552672", email="bob@example.com")
    page = (await signed_in.get(f"/contacts/{ada['id']}")).text
    assert 'id="firstName" name="firstName" type="text" value="Ada"' in page
    r = await signed_in.post(f"/contacts/{ada['id']}", {**FORM, "phone": "415 555"})
    assert r.code == 400 and "must include the country code" in field_error(r.text, "phone")
    assert 'value="415 555"' in r.text and 'value="Lovelace"' in r.text  # what was typed stays
    r = await signed_in.post(f"/contacts/{ada['id']}", {**FORM, "email": "nope"})
    assert r.code == 400 and "not a valid email" in field_error(r.text, "email")
    r = await signed_in.post(f"/contacts/{ada['id']}", {**FORM, "phone": "+1 415 555 2672"})
    assert r.code == 409 and field_error(r.text, "phone") == f"Bob ({bob['id']}) already has this phone"
    assert f'<p class="hint" id="existing-contact"><a href="/contacts/{bob["id"]}">Open Bob</a></p>' in r.text
    r = await signed_in.post(f"/contacts/{ada['id']}", {**FORM, "email": "BOB@example.com"})
    assert r.code == 409 and field_error(r.text, "email") == f"Bob ({bob['id']}) already has this email"
    r = await signed_in.post(f"/contacts/{ada['id']}", {**FORM, "phone": ""})
    assert r.code == 400 and "phone or email is required" in r.text
    assert await api_contact(services, account_id, ada["id"]) == ada  # nothing changed by the errors
    r = await signed_in.post(f"/contacts/{ada['id']}", {**FORM, "email": "Ada@Example.com"})
    assert r.code == 303 and r.headers["Location"] == f"/contacts/{ada['id']}"
    saved = await api_contact(services, account_id, ada["id"])
    assert (saved["lastName"], saved["email"]) == ("Lovelace", "ada@example.com")
    assert "Contact saved." in (await signed_in.get(f"/contacts/{ada['id']}")).text


async def test_opt_out_and_in_by_hand_shows_who_and_when(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    ada = await make_contact(services, account_id, first_name="Ada", phone="+14155552671")
    page = (await signed_in.get(f"/contacts/{ada['id']}")).text
    assert 'id="opt-out"' in page and "Opted out</dt><dd>No</dd>" in page
    r = await signed_in.post(f"/contacts/{ada['id']}/opt-out", {"optedOut": "1"})
    assert r.code == 303
    got = await api_contact(services, account_id, ada["id"])
    assert got["optedOut"] is True and got["optOutChange"]["via"] == "user"
    assert got["optOutChange"]["by"] == ui_account["email"]
    page = (await signed_in.get(f"/contacts/{ada['id']}")).text
    state = re.search(r'<dl class="facts" id="opt-out-state">(.*?)</dl>', page, re.S).group(1)
    assert f"<strong>Yes</strong>, by {ui_account['email']} on <time datetime=\"{got['optOutChange']['at']}\">" in state
    assert 'id="opt-in"' in page
    await signed_in.post(f"/contacts/{ada['id']}/opt-out", {"optedOut": "0"})
    page = (await signed_in.get(f"/contacts/{ada['id']}")).text
    assert f"No (opted back in by {ui_account['email']} on" in page
    # A STOP reply says so.
    await contact_service.update_contact(services.db, account_id, ada["id"], {"optedOut": True},
                                         {"via": "reply", "by": "STOP"})
    assert "<strong>Yes</strong>, by replying STOP on" in (await signed_in.get(f"/contacts/{ada['id']}")).text


async def test_remove_from_a_list_on_the_contact_page(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    ada = await make_contact(services, account_id, first_name="Ada", phone="+14155552671")
    lst = await list_service.create_list(services.db, account_id, "Leads")
    await list_service.add_contact(services.db, account_id, lst["id"], ada["id"])
    page = (await signed_in.get(f"/contacts/{ada['id']}")).text
    assert f'action="/contacts/{ada["id"]}/lists/{lst["id"]}/remove"' in page
    r = await signed_in.post(f"/contacts/{ada['id']}/lists/{lst['id']}/remove")
    assert r.code == 303
    assert (await list_service.get_list(services.db, account_id, lst["id"]))["contactCount"] == 0
    page = (await signed_in.get(f"/contacts/{ada['id']}")).text
    assert "Removed from the list." in page and "Not on any list." in page


async def test_list_page_renames_removes_members_and_deletes_after_confirmation(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    people = [await make_contact(services, account_id, first_name=f"P{i}", phone=f"+1415555{i:04d}")
              for i in range(4)]
    lst = await list_service.create_list(services.db, account_id, "Leads")
    other = await list_service.create_list(services.db, account_id, "Customers")
    for p in people:
        await list_service.add_contact(services.db, account_id, lst["id"], p["id"])
    page = (await signed_in.get(f"/lists/{lst['id']}")).text
    assert page.count('name="contactIds"') == 4 and page.count('name="one"') == 4
    r = await signed_in.post(f"/lists/{lst['id']}/rename", {"name": " customers "})
    assert r.code == 409 and unescape(field_error(r.text, "name")) == f"list {other['id']} is already named 'Customers'"
    r = await signed_in.post("/lists", {"name": "LEADS"})
    assert r.code == 409 and lst["id"] in field_error(r.text, "name")
    r = await signed_in.post(f"/lists/{lst['id']}/rename", {"name": "Spring leads"})
    assert r.code == 303
    assert (await list_service.get_list(services.db, account_id, lst["id"]))["name"] == "Spring leads"
    r = await signed_in.post(f"/lists/{lst['id']}/remove", {"one": people[0]["id"]})
    assert r.code == 303
    r = await signed_in.post(f"/lists/{lst['id']}/remove", {"contactIds": [people[1]["id"], people[2]["id"]]})
    page = (await signed_in.get(f"/lists/{lst['id']}")).text
    assert "Removed 2 contacts from the list." in page and "Members</dt><dd>1" in page
    confirm = (await signed_in.get(f"/lists/{lst['id']}/delete")).text
    assert "<strong>1 membership</strong> go with it" in confirm and "the contacts themselves stay" in confirm
    r = await signed_in.post(f"/lists/{lst['id']}/delete")
    assert r.code == 303 and r.headers["Location"] == "/lists"
    assert "List deleted with its 1 membership; the contacts stay." in (await signed_in.get("/lists")).text
    assert (await signed_in.get(f"/lists/{lst['id']}")).code == 404
    assert (await api_contact(services, account_id, people[3]["id"]))["id"] == people[3]["id"]


async def test_another_accounts_contacts_and_lists_are_404_on_every_new_action(signed_in, services, other_account):
    account_id = other_account["account_id"]
    contact = await make_contact(services, account_id, first_name="Theirs", phone="+14155550000")
    lst = await list_service.create_list(services.db, account_id, "Theirs")
    await list_service.add_contact(services.db, account_id, lst["id"], contact["id"])
    for path, form in ((f"/contacts/{contact['id']}", FORM), (f"/contacts/{contact['id']}/opt-out", {"optedOut": "1"}),
                       (f"/contacts/{contact['id']}/lists/{lst['id']}/remove", {}),
                       (f"/lists/{lst['id']}/rename", {"name": "Mine"}), (f"/lists/{lst['id']}/remove",
                                                                          {"one": contact["id"]}),
                       (f"/lists/{lst['id']}/delete", {})):
        r = await signed_in.post(path, form)
        assert r.code == 404, path
    assert (await signed_in.get(f"/lists/{lst['id']}/delete")).code == 404
    assert await api_contact(services, account_id, contact["id"]) == contact
    assert await list_service.get_list(services.db, account_id, lst["id"]) == {**lst, "contactCount": 1}
