"""Issue 25 §1 end to end: the real server.py over HTTPS, driven by httpx (the API: PATCH a contact with its
409 and contact.updated delivered to a real receiver, rename, delete and remove from lists, another account's
key changes nothing) and by Debian's Chromium (the contact page's edit form and opt-out, the list page's
checkboxes, rename and delete with its confirmation)."""
import time

import pytest

from tests.parley_process import ThreadedReceiver, run_cli
from tests.ui_helpers import open_page, sign_in


@pytest.fixture
def page(chromium):
    context, page = open_page(chromium)
    yield page
    # A form answered 400/409 (its error page) logs "Failed to load resource"; anything else (CSP) is a fault.
    assert [e for e in page.console_errors if not e.startswith("Failed to load resource")] == []
    context.close()


def key_of(parley):
    return {"apiKey": parley.first_run["api_key"]}


def test_api_patch_contact_conflict_and_contact_updated_reach_a_receiver(parley):
    receiver = ThreadedReceiver()
    try:
        with parley.client(params=key_of(parley)) as client:
            r = client.patch("/v1/account/settings", json={"notificationUrls": {"contact.updated": receiver.url}})
            assert r.status_code == 200, r.text
            ada = client.post("/v1/contacts", json={"firstName": "Ada", "phone": "+14155550101"}).json()
            bob = client.post("/v1/contacts", json={"firstName": "Bob", "phone": "+14155550102"}).json()
            r = client.patch(f"/v1/contacts/{bob['id']}", json={"phone": "+14155550101", "lastName": "X"})
            assert r.status_code == 409
            assert r.json() == {"error": {"code": "CONFLICT", "message": f"Ada ({ada['id']}) already has this phone",
                                          "existingId": ada["id"]}}
            r = client.patch(f"/v1/contacts/{ada['id']}", json={"lastName": "Lovelace", "optedOut": True},
                             headers={"Idempotency-Key": "e2e-1"})
            assert r.status_code == 200 and r.json()["optOutChange"]["via"] == "api"
            again = client.patch(f"/v1/contacts/{ada['id']}", json={"lastName": "Lovelace", "optedOut": True},
                                 headers={"Idempotency-Key": "e2e-1"})
            assert again.json() == r.json() and again.headers["Idempotent-Replayed"] == "true"
            assert client.get(f"/v1/contacts/{bob['id']}").json() == bob
        deadline = time.monotonic() + 30
        while not receiver.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [body["event"] for body in receiver.requests] == ["contact.updated"]  # one: the replay sent none
        assert receiver.requests[0]["data"] == r.json()
    finally:
        receiver.close()


def test_api_lists_rename_delete_remove_and_tenancy(parley):
    other = run_cli(parley.data_dir, "create-account", "--name", "Other", "--email", "other-e2e@example.com")
    with parley.client(params=key_of(parley)) as client:
        lst = client.post("/v1/lists", json={"name": "E2E leads"}).json()
        r = client.post("/v1/lists", json={"name": " e2e LEADS "})
        assert r.status_code == 409 and r.json()["error"]["existingId"] == lst["id"]
        contact = client.post("/v1/contacts", json={"email": "member-e2e@example.com"}).json()
        client.post(f"/v1/lists/{lst['id']}/contacts", json={"contactId": contact["id"]})
        with parley.client(params={"apiKey": other["api_key"]}) as theirs:
            assert theirs.patch(f"/v1/lists/{lst['id']}", json={"name": "Mine"}).status_code == 404
            assert theirs.delete(f"/v1/lists/{lst['id']}").status_code == 404
            assert theirs.delete(f"/v1/lists/{lst['id']}/contacts/{contact['id']}").status_code == 404
            assert theirs.patch(f"/v1/contacts/{contact['id']}", json={"firstName": "M"}).status_code == 404
        r = client.patch(f"/v1/lists/{lst['id']}", json={"name": "E2E customers"})
        assert r.status_code == 200 and r.json()["name"] == "E2E customers"
        r = client.delete(f"/v1/lists/{lst['id']}/contacts/{contact['id']}")
        assert r.json() == {"success": True, "listId": lst["id"], "contactId": contact["id"], "removed": True}
        assert client.delete(f"/v1/lists/{lst['id']}/contacts/{contact['id']}").json()["removed"] is False
        client.post(f"/v1/lists/{lst['id']}/contacts", json={"contactId": contact["id"]})
        r = client.delete(f"/v1/lists/{lst['id']}")
        assert r.json() == {"deleted": True, "id": lst["id"], "removedMemberships": 1}
        assert client.get(f"/v1/lists/{lst['id']}").status_code == 404
        assert client.get(f"/v1/contacts/{contact['id']}").status_code == 200


def test_browser_edits_a_contact_and_opts_it_out(page, parley):
    with parley.client(params=key_of(parley)) as client:
        ada = client.post("/v1/contacts", json={"firstName": "Ada", "phone": "+14155550201"}).json()
        bob = client.post("/v1/contacts", json={"firstName": "Bob", "phone": "+14155550202"}).json()
    sign_in(page, parley)
    page.goto(parley.base + f"/contacts/{ada['id']}")
    page.fill("#phone", "+1 415 555 0202")
    page.fill("#lastName", "Lovelace")
    page.click("#contact-form button[type=submit]")
    assert page.text_content("#phone-error") == f"Bob ({bob['id']}) already has this phone"
    assert page.get_attribute("#phone", "aria-invalid") == "true"
    # The contact that has it is a link away (issue 43 §9).
    assert page.get_attribute("#existing-contact a", "href") == f"/contacts/{bob['id']}"
    assert page.text_content("#existing-contact a") == "Open Bob"
    assert page.input_value("#lastName") == "Lovelace"  # what was typed stays
    page.fill("#phone", "+1 415 555 0299")
    page.click("#contact-form button[type=submit]")
    page.wait_for_selector("text=Contact saved.")
    assert page.input_value("#phone") == "+14155550299"
    page.click("#opt-out")
    page.wait_for_selector("#opt-in")
    state = page.text_content("#opt-out-state")
    assert f"Yes, by {parley.first_run['login']} on" in " ".join(state.split())
    page.click("#opt-in")
    page.wait_for_selector("#opt-out")
    assert "opted back in by" in page.text_content("#opt-out-state")
    with parley.client(params=key_of(parley)) as client:
        got = client.get(f"/v1/contacts/{ada['id']}").json()
    assert got["optedOut"] is False and got["optOutChange"]["by"] == parley.first_run["login"]


def test_browser_removes_checked_members_renames_and_deletes_a_list(page, parley):
    with parley.client(params=key_of(parley)) as client:
        lst = client.post("/v1/lists", json={"name": "Browser list"}).json()
        ids = []
        for i in range(3):
            c = client.post("/v1/contacts", json={"firstName": f"Member{i}", "phone": f"+1415555030{i}"}).json()
            client.post(f"/v1/lists/{lst['id']}/contacts", json={"contactId": c["id"]})
            ids.append(c["id"])
    sign_in(page, parley)
    page.goto(parley.base + f"/lists/{lst['id']}")
    page.check(f"input[name=contactIds][value={ids[0]}]")
    page.check(f"input[name=contactIds][value={ids[1]}]")
    page.click("#remove-selected")
    page.wait_for_selector("text=Removed 2 contacts from the list.")
    assert page.locator("input[name=contactIds]").count() == 1
    page.fill("#name", "Renamed browser list")
    page.click("#rename-form button")
    page.wait_for_selector("h1:has-text('Renamed browser list')")
    page.click("#delete-list")
    assert "1 membership" in page.text_content("#delete-summary")
    page.click("#confirm-delete")
    page.wait_for_selector("text=List deleted with its 1 membership; the contacts stay.")
    assert page.url == parley.base + "/lists"
    with parley.client(params=key_of(parley)) as client:
        assert client.get(f"/v1/lists/{lst['id']}").status_code == 404
        assert all(client.get(f"/v1/contacts/{i}").status_code == 200 for i in ids)
