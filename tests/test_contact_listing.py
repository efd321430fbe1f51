"""Issue 41: every contact by cursor (GET /v1/contacts without phoneNumber or email, filtered by tag and listId), contact
tags (normalised, at most 50, in create and PATCH, filterable), and the streamed CSV export (API and the Contacts
page's Export button). Another account's key sees, changes and learns nothing."""
import csv
import io

from services import contacts as contact_service


async def create(api, key, **body):
    r = await api.post("/v1/contacts", body, key=key)
    assert r.code in (200, 201), r.body
    return r.json


async def all_pages(api, key, query=""):
    """Every contact the listing gives, following nextCursor (pages of 2)."""
    seen, cursor = [], None
    while True:
        r = await api.get("/v1/contacts?limit=2" + query + (f"&cursor={cursor}" if cursor else ""), key=key)
        assert r.code == 200, r.body
        assert len(r.json["data"]) <= 2
        seen += r.json["data"]
        cursor = r.json["nextCursor"]
        if cursor is None:
            return seen


async def test_contacts_listed_by_cursor_and_filtered_by_tag_and_list(api, account, other_account):
    key, other_key = account["api_key"], other_account["api_key"]
    ada = await create(api, key, firstName="Ada", phone="+14155552671", tags=["  VIP  Customer", "vip customer", "Leads"])
    assert ada["tags"] == ["leads", "vip customer"]  # normalised, duplicates dropped, sorted
    bob = await create(api, key, firstName="Bob", email="bob@example.com", tags=["leads"])
    cyd = await create(api, key, firstName="Cyd", phone="+14155552673")
    dan = await create(api, key, firstName="Dan", phone="+14155552674", tags=["VIP customer"])
    stranger = await create(api, other_key, firstName="Eve", phone="+14155552675", tags=["leads"])

    listed = await all_pages(api, key)
    assert [c["id"] for c in listed] == sorted(c["id"] for c in (ada, bob, cyd, dan))
    assert listed[0]["tags"] == ada["tags"] and "createdAt" in listed[0]
    assert [c["id"] for c in await all_pages(api, key, "&tag=Leads")] == sorted([ada["id"], bob["id"]])
    assert [c["id"] for c in await all_pages(api, key, "&tag=vip%20%20customer")] == sorted([ada["id"], dan["id"]])
    assert await all_pages(api, key, "&tag=vip") == []  # a whole tag, not a part of one

    lst = (await api.post("/v1/lists", {"name": "Newsletter"}, key=key)).json
    for contact in (ada, cyd):
        assert (await api.post(f"/v1/lists/{lst['id']}/contacts", {"contactId": contact["id"]}, key=key)).code == 200
    assert [c["id"] for c in await all_pages(api, key, f"&listId={lst['id']}")] == sorted([ada["id"], cyd["id"]])
    assert [c["id"] for c in await all_pages(api, key, f"&listId={lst['id']}&tag=leads")] == [ada["id"]]

    # The spec's lookup keeps its meaning: one contact, not a page.
    r = await api.get("/v1/contacts?phoneNumber=%2B14155552671", key=key)
    assert r.code == 200 and r.json["id"] == ada["id"]

    # Another account: its own contacts only; this account's list is not found; its tag names nobody here.
    assert [c["id"] for c in await all_pages(api, other_key)] == [stranger["id"]]
    assert [c["id"] for c in await all_pages(api, other_key, "&tag=leads")] == [stranger["id"]]
    r = await api.get(f"/v1/contacts?listId={lst['id']}", key=other_key)
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND"

    for query, field in (("?tag=", "tag"), ("?tag=a%22b", "tag"), ("?limit=0", "limit"), ("?cursor=nope", "cursor"),
                         ("?phonenumber=%2B14155552671", "phonenumber")):
        r = await api.get("/v1/contacts" + query, key=key)
        assert r.code == 400 and field in r.json["error"]["message"], (query, r.body)


async def test_tags_in_patch_and_create_are_normalised_and_capped(api, account, other_account):
    key = account["api_key"]
    ada = await create(api, key, phone="+14155552671", tags=["a"])
    r = await api.patch(f"/v1/contacts/{ada['id']}", {"tags": [" Zeta ", "alpha", "ALPHA"]}, key=key)
    assert r.code == 200 and r.json["tags"] == ["alpha", "zeta"]
    # Creating an existing contact adds its tags to the ones it has.
    again = await create(api, key, phone="+1 415 555 2671", tags=["Beta"])
    assert again["id"] == ada["id"] and again["tags"] == ["alpha", "beta", "zeta"]
    r = await api.patch(f"/v1/contacts/{ada['id']}", {"tags": [f"t{i}" for i in range(51)]}, key=key)
    assert r.code == 400 and "tags" in r.json["error"]["message"], r.body
    r = await api.post("/v1/contacts", {"phone": "+14155552671", "tags": [f"t{i}" for i in range(48)]}, key=key)
    assert r.code == 400 and "at most 50" in r.json["error"]["message"], r.body
    for bad in (["ok", "  "], ["x" * 51], ["a,b"], ["back\\slash"], "vip", [1]):
        r = await api.patch(f"/v1/contacts/{ada['id']}", {"tags": bad}, key=key)
        assert r.code == 400 and "tags" in r.json["error"]["message"], (bad, r.body)
    assert (await api.get(f"/v1/contacts/{ada['id']}", key=key)).json["tags"] == ["alpha", "beta", "zeta"]
    r = await api.patch(f"/v1/contacts/{ada['id']}", {"tags": []}, key=key)
    assert r.code == 200 and r.json["tags"] == []
    # Another account's key cannot tag the contact, nor learn it exists.
    r = await api.patch(f"/v1/contacts/{ada['id']}", {"tags": ["mine"]}, key=other_account["api_key"])
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND"
    assert (await api.get(f"/v1/contacts/{ada['id']}", key=key)).json["tags"] == []


def read_csv(response):
    assert response.code == 200, response.body
    assert response.headers["Content-Type"] == "text/csv; charset=UTF-8"
    assert 'filename="contacts.csv"' in response.headers["Content-Disposition"]
    return list(csv.DictReader(io.StringIO(response.body.decode())))


async def test_csv_export_streams_every_contact_with_formulas_escaped(api, services, account, other_account):
    key = account["api_key"]
    ada = await create(api, key, firstName="=HYPERLINK(\"http://x\")", lastName="Lovelace", phone="+14155552671",
                       tags=["vip", "@home"])
    bob = await create(api, key, firstName="Bob", email="bob@example.com")
    await create(api, other_account["api_key"], firstName="Eve", phone="+14155552675", tags=["vip"])
    r = await api.client.fetch(f"/v1/contacts/export.csv?apiKey={key}")
    rows = read_csv(r)
    assert [row["id"] for row in rows] == sorted([ada["id"], bob["id"]])
    first = next(row for row in rows if row["id"] == ada["id"])
    assert first == {"id": ada["id"], "firstName": "'=HYPERLINK(\"http://x\")", "lastName": "Lovelace",
                     "phone": "'+14155552671", "email": "", "tags": "'@home, vip", "optedOut": "false",
                     "createdAt": ada["createdAt"]}
    r = await api.client.fetch(f"/v1/contacts/export.csv?tag=VIP&apiKey={key}")
    assert [row["id"] for row in read_csv(r)] == [ada["id"]]  # Eve (another account's vip) is not there
    r = await api.client.fetch(f"/v1/contacts/export.csv?listId=lst_nope&apiKey={key}", raise_error=False)
    assert r.code == 404 and b"LIST_NOT_FOUND" in r.body

    # A page at a time: with pages of one contact, the export comes in one chunk per page (and the last, empty).
    chunks = [chunk async for chunk in contact_service.contacts_csv(services.db, account["account_id"], page_size=1)]
    assert len(chunks) == 3 and chunks[0].startswith("id,firstName") and ada["id"] in chunks[0]
    assert bob["id"] in chunks[1] and chunks[2] == ""


async def test_contacts_page_tags_filter_and_export_button(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    r = await signed_in.post("/contacts", {"firstName": "Ada", "phone": "+14155552671", "tags": "VIP, leads"})
    assert r.code == 303, r.body
    ada = await contact_service.lookup_contact(services.db, account_id, phone_number="+14155552671")
    assert ada["tags"] == ["leads", "vip"]
    await contact_service.create_contact(services.db, account_id, first_name="Bob", phone="+14155552672")
    page = (await signed_in.get("/contacts?tag=VIP")).text
    assert 'id="tag-filter"' in page and ">Ada</a>" in page and ">Bob</a>" not in page
    assert 'href="/contacts/export.csv?tag=vip"' in page or 'href="/contacts/export.csv?tag=VIP"' in page
    r = await signed_in.get("/contacts/export.csv?tag=vip")
    assert [row["firstName"] for row in read_csv(r)] == ["Ada"]
    r = await signed_in.post(f"/contacts/{ada['id']}", {"firstName": "Ada", "lastName": "", "phone": "+14155552671",
                                                        "email": "", "tags": "vip, a\"b"})
    assert r.code == 400 and 'id="tags-error"' in r.text
    r = await signed_in.post(f"/contacts/{ada['id']}", {"firstName": "Ada", "lastName": "", "phone": "+14155552671",
                                                        "email": "", "tags": "customer"})
    assert r.code == 303
    assert (await contact_service.get_contact(services.db, account_id, ada["id"]))["tags"] == ["customer"]
