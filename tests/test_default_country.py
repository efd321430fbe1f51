"""An account's default country (issue 43 §9): with one, a phone typed without its country code is read as a number of
that country and stored E.164 where a person types it (POST/PATCH /v1/contacts and the lookup, the contact forms,
adding a list member, imports); without one the old rule stays (400 INVALID_PHONE). A list member is also added by
name, helped by suggestions from the account's own contacts. In-process on the test's database (SQLite or
PostgreSQL)."""
import json
import re

from services import accounts, contacts
from tests.ui_helpers import FormClient

SETTINGS = "/v1/account/settings"


async def test_the_api_sets_a_checked_default_country_and_reads_national_numbers_in_it(api, account):
    key = account["api_key"]
    r = await api.post("/v1/contacts", {"firstName": "Hans", "phone": "030 901820"}, key=key)
    assert (r.code, r.json["error"]["code"]) == (400, "INVALID_PHONE")  # no default country: as before
    assert "defaultCountry" in r.json["error"]["message"]

    for bad in ("XX", "Germany", "", 49):
        r = await api.patch(SETTINGS, {"defaultCountry": bad}, key=key)
        assert r.code == 400 and "defaultCountry" in r.json["error"]["message"], (bad, r.body)
    assert "defaultCountry" not in (await api.get("/v1/account", key=key)).json["settings"]

    r = await api.patch(SETTINGS, {"defaultCountry": "de"}, key=key)
    assert r.code == 200 and r.json["defaultCountry"] == "DE"
    r = await api.post("/v1/contacts", {"firstName": "Hans", "phone": "030 901820"}, key=key)
    assert r.code == 201 and r.json["phone"] == "+4930901820"
    hans = r.json["id"]
    # International numbers are read as before; the same number typed nationally finds the same contact.
    assert (await api.post("/v1/contacts", {"phone": "+1 415 555 2671"}, key=key)).json["phone"] == "+14155552671"
    r = await api.post("/v1/contacts", {"phone": "+49 30 901820", "email": "hans@example.de"}, key=key)
    assert (r.code, r.json["id"]) == (200, hans)
    assert (await api.get("/v1/contacts?phoneNumber=030%20901820", key=key)).json["id"] == hans
    r = await api.patch(f"/v1/contacts/{hans}", {"phone": "0151 23456789"}, key=key)
    assert r.code == 200 and r.json["phone"] == "+4915123456789"
    r = await api.patch(f"/v1/contacts/{hans}", {"phone": "12"}, key=key)
    assert (r.code, r.json["error"]["code"]) == (400, "INVALID_PHONE") and "region DE" in r.json["error"]["message"]

    r = await api.patch(SETTINGS, {"defaultCountry": None}, key=key)
    assert r.code == 200 and "defaultCountry" not in r.json
    r = await api.post("/v1/contacts", {"phone": "030 901821"}, key=key)
    assert (r.code, r.json["error"]["code"]) == (400, "INVALID_PHONE")


def _flash(html):
    found = re.search(r'class="flash[^"]*"[^>]*>(.*?)<', html, re.S)
    return found and found.group(1).strip()


async def test_the_settings_page_sets_the_country_and_the_contact_forms_use_it(signed_in, services, ui_account):
    page = (await signed_in.get("/settings")).text
    assert '<option value="CH">Switzerland +41</option>' in page and 'id="defaultCountry"' in page
    r = await signed_in.post("/settings/default-country", {"defaultCountry": "ZZ"})
    assert r.code == 400 and "defaultCountry &#39;ZZ&#39; is not an ISO 3166 country code" in r.text
    r = await signed_in.post("/settings/default-country", {"defaultCountry": "CH"})
    assert r.code == 303
    page = (await signed_in.get("/settings")).text
    assert _flash(page) == "Default country saved: CH." and '<option value="CH" selected>' in page

    r = await signed_in.post("/contacts", {"firstName": "Heidi", "lastName": "", "phone": "044 668 18 00",
                                           "email": ""})
    assert r.code == 303
    contact_id = r.headers["Location"].rsplit("/", 1)[1]
    row = await contacts.get_contact_row(services.db, ui_account["account_id"], contact_id)
    assert row["phone"] == "+41446681800"
    r = await signed_in.post(f"/contacts/{contact_id}", {"firstName": "Heidi", "lastName": "", "phone": "031 322 21 11",
                                                         "email": ""})
    assert r.code == 303
    assert (await contacts.get_contact_row(services.db, ui_account["account_id"], contact_id))["phone"] == \
        "+41313222111"


async def test_a_list_member_is_added_by_name_or_national_number_and_suggested_from_this_account_only(
        signed_in, services, ui_account, api, other_account):
    account_id = ui_account["account_id"]
    await accounts.update_settings(services.db, account_id, {"defaultCountry": "DE"})
    made = {}
    for first, last, phone in (("Ada", "Lovelace", "+4930901820"), ("Adam", "Smith", "+4930901821"),
                               ("Grace", "Hopper", "+4930901822")):
        contact, _ = await contacts.create_contact(services.db, account_id, first_name=first, last_name=last,
                                                   phone=phone)
        made[first] = contact["id"]
    # Another account's Ada: never suggested, never added.
    await contacts.create_contact(services.db, other_account["account_id"], first_name="Ada", last_name="Lovelace",
                                  phone="+4930909999")
    list_id = (await api.post("/v1/lists", {"name": "Bakery regulars"}, key=ui_account["api_key"])).json["id"]

    options = (await signed_in.get("/contacts/suggest?q=ada")).text
    assert re.findall(r'<option value="([^"]+)">([^<]+)</option>', options) == [
        ("+4930901821", "Adam Smith · +4930901821"), ("+4930901820", "Ada Lovelace · +4930901820")]
    assert "+4930909999" not in options and (await signed_in.get("/contacts/suggest?q=")).text.strip() == ""

    r = await signed_in.post(f"/lists/{list_id}", {"contact": "ada"})  # Ada and Adam: which?
    assert r.code == 400 and "2 contacts match &#39;ada&#39;: pick one from the suggestions" in r.text
    r = await signed_in.post(f"/lists/{list_id}", {"contact": "ada lovelace"})
    assert r.code == 303
    r = await signed_in.post(f"/lists/{list_id}", {"contact": "Hopper"})
    assert r.code == 303
    r = await signed_in.post(f"/lists/{list_id}", {"contact": "030 901821"})  # Adam, typed nationally
    assert r.code == 303
    r = await signed_in.post(f"/lists/{list_id}", {"contact": "Nobody Here"})
    assert r.code == 400 and "no contact is called" in r.text
    members = (await api.get(f"/v1/lists/{list_id}/contacts", key=ui_account["api_key"])).json["data"]
    assert sorted(m["id"] for m in members) == sorted(made.values())


async def test_an_import_starts_with_the_account_default_country(io_loop, http_server_client, services, ui_account):
    await accounts.update_settings(services.db, ui_account["account_id"], {"defaultCountry": "DE"})
    browser = FormClient(http_server_client)
    assert (await browser.login(ui_account["email"])).code == 303
    r = await http_server_client.fetch("/contacts/import/upload?name=c.csv", method="POST",
                                       body=b"Name,Telefon\r\nHans,030 901820\r\n", raise_error=False,
                                       headers={"Content-Type": "text/csv", "X-XSRFToken": browser.cookies["_xsrf"],
                                                "Cookie": "; ".join(f"{k}={v}" for k, v in browser.cookies.items())})
    assert r.code == 201, r.body
    import_id = json.loads(r.body)["id"]
    job = await browser.get(f"/contacts/import/{import_id}")
    assert '<option value="DE" selected>' in job.text
    r = await browser.post(f"/contacts/import/{import_id}/start", {
        "firstName": "0", "lastName": "", "phone": "1", "email": "", "defaultCountry": "DE", "list": "",
        "newListName": ""})
    assert r.code == 303
    await services.imports.drain()
    found = await contacts.lookup_contact(services.db, ui_account["account_id"], phone_number="+4930901820")
    assert found["firstName"] == "Hans"
