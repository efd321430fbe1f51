"""Issue 41: a person's data (GET /v1/contacts/{id}/export and the contact page's "Download data"): everything held on
the contact as JSON, audited; another account's key gets a 404 and leaves no audit entry."""
import json

from handlers.contact_schemas import ContactExport
from tests.contact_helpers import inbound


async def test_export_holds_everything_on_the_person_and_is_audited(api, account, other_account):
    key = account["api_key"]
    contact_id = await inbound(api, key, "m1", "+14155550001", "Hello, I need help")
    await inbound(api, key, "m2", "+14155550002", "Someone else")  # another person: not in the export
    r = await api.patch(f"/v1/contacts/{contact_id}", {"firstName": "Ada", "email": "ada@example.com",
                                                        "tags": ["VIP"], "optedOut": True}, key=key)
    assert r.code == 200, r.body
    assert (await api.patch(f"/v1/contacts/{contact_id}", {"optedOut": False}, key=key)).code == 200
    r = await api.post(f"/v1/conversations/{contact_id}/notes", {"body": "Called back on Monday"}, key=key)
    assert r.code == 201, r.body
    lst = (await api.post("/v1/lists", {"name": "Leads"}, key=key)).json
    await api.post(f"/v1/lists/{lst['id']}/contacts", {"contactId": contact_id}, key=key)

    r = await api.get(f"/v1/contacts/{contact_id}/export", key=key)
    assert r.code == 200, r.body
    data = ContactExport.model_validate(r.json).model_dump()  # the document's schema describes it
    assert data["contact"]["id"] == contact_id and data["contact"]["tags"] == ["vip"]
    assert data["contact"]["email"] == "ada@example.com"
    assert data["identities"] == [{"fromId": "+14155550001"}]
    assert [m["body"] for m in data["messages"]] == ["Hello, I need help"]
    assert [n["body"] for n in data["notes"]] == ["Called back on Monday"]
    assert data["lists"] == [{"id": lst["id"], "name": "Leads"}]
    assert [(h["optedOut"], h["via"]) for h in data["optOutHistory"]] == [(True, "api"), (False, "api")]
    assert data["conversation"]["status"] == "open"
    assert "Someone else" not in r.body.decode()

    # Another account: 404, as for an unknown id, and nothing recorded.
    r = await api.get(f"/v1/contacts/{contact_id}/export", key=other_account["api_key"])
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND"
    audit = (await api.get("/v1/audit", key=key)).json["data"]
    exported = [e for e in audit if e["action"] == "contact.exported"]
    assert [(e["subjectId"], e["actor"]) for e in exported] == [(contact_id, "api-key")]
    assert exported[0]["detail"] == {"identities": 1, "messages": 1, "notes": 1, "lists": 1}
    other_audit = (await api.get("/v1/audit", key=other_account["api_key"])).json["data"]
    assert not [e for e in other_audit if e["action"] == "contact.exported"]


async def test_contact_page_download_data_button(signed_in, services, ui_account, api):
    key = ui_account["api_key"]
    contact_id = await inbound(api, key, "m1", "+14155550001", "Hello")
    page = (await signed_in.get(f"/contacts/{contact_id}")).text
    assert f'href="/contacts/{contact_id}/export" id="export-contact"' in page
    r = await signed_in.get(f"/contacts/{contact_id}/export")
    assert r.code == 200 and f'filename="{contact_id}.json"' in r.headers["Content-Disposition"]
    data = json.loads(r.body)
    assert data["contact"]["id"] == contact_id and [m["body"] for m in data["messages"]] == ["Hello"]
    audit = (await api.get("/v1/audit", key=key)).json["data"]
    assert [e["actorLabel"] for e in audit if e["action"] == "contact.exported"] == [ui_account["email"]]
