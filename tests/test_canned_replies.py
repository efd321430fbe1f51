"""Canned replies (issue 21): the API (validation naming the field, codes unique per account without case,
tenancy), placeholders rendered by the campaigns' renderer for the thread's contact, and the Canned replies
page (XSRF forms)."""
import json

import pytest

from storage.db import reads
from tests.inbound_helpers import inbound

PATH = "/v1/canned-replies"


@reads
def _rows(cx, account_id):
    return [tuple(r) for r in cx.execute("SELECT id, code, body FROM canned_replies WHERE account_id = ? ORDER BY id",
                                         (account_id,))]


async def test_create_list_get_change_and_delete(api, account):
    key = account["api_key"]
    r = await api.post(PATH, {"code": "thanks", "body": "Thanks {{firstName}}, we are on it."}, key=key)
    assert r.code == 201, r.body
    created = r.json
    assert created["id"].startswith("cr_") and created["code"] == "thanks"
    assert created["body"] == "Thanks {{firstName}}, we are on it."  # stored as typed, rendered per contact
    await api.post(PATH, {"code": "Address", "body": "We are at 1 Main St."}, key=key)
    assert [c["code"] for c in (await api.get(PATH, key=key)).json["data"]] == ["Address", "thanks"]
    assert (await api.get(f"{PATH}/{created['id']}", key=key)).json == created

    r = await api.patch(f"{PATH}/{created['id']}", {"code": "ty", "body": "Thank you {{ firstName }}!"}, key=key)
    assert r.code == 200, r.body
    assert (r.json["code"], r.json["body"]) == ("ty", "Thank you {{ firstName }}!")
    assert r.json["updatedAt"] >= created["updatedAt"]
    r = await api.delete(f"{PATH}/{created['id']}", key=key)
    assert (r.code, r.json) == (200, {"deleted": True, "id": created["id"]})
    assert (await api.get(f"{PATH}/{created['id']}", key=key)).code == 404
    assert [c["code"] for c in (await api.get(PATH, key=key)).json["data"]] == ["Address"]


@pytest.mark.parametrize("body,field,words", [
    ({"code": "has space", "body": "Hi"}, "code", "letters, digits, - or _"),
    ({"code": "a/b", "body": "Hi"}, "code", "letters, digits, - or _"),
    ({"code": "", "body": "Hi"}, "code", "code"),
    ({"code": "x" * 41, "body": "Hi"}, "code", "code"),
    ({"code": "ok", "body": "  "}, "body", "blank"),
    ({"code": "ok", "body": "Hi {{firstname}}"}, "body", "unknown placeholder {{firstname}}"),
    ({"code": "ok", "body": "{{firstName}} "}, "body", "text besides its placeholders"),
    ({"code": "ok"}, "body", "body"),
    ({"body": "Hi"}, "code", "code"),
    ({"code": "ok", "body": "Hi", "extra": 1}, "extra", "extra"),
])
async def test_bad_input_is_400_naming_the_field_and_stores_nothing(api, account, services, body, field, words):
    r = await api.post(PATH, body, key=account["api_key"])
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR"
    assert field in r.json["error"]["message"] and words in r.json["error"]["message"]
    assert await _rows(services.db, account["account_id"]) == []


async def test_an_unknown_placeholder_is_refused_as_campaigns_refuse_it(api, account):
    """The same parser as a campaign's body: the same message, word for word."""
    key = account["api_key"]
    await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "http://127.0.0.1:9/hook"}, key=key)
    lst = (await api.post("/v1/lists", {"name": "L"}, key=key)).json
    campaign = await api.post("/v1/campaigns", {"name": "C", "listId": lst["id"], "body": "Hi {{first_name}}"},
                              key=key)
    canned = await api.post(PATH, {"code": "hi", "body": "Hi {{first_name}}"}, key=key)
    assert campaign.code == canned.code == 400
    assert canned.json["error"]["message"] == campaign.json["error"]["message"]


async def test_codes_are_unique_per_account_without_case(api, account, other_account, services):
    first = (await api.post(PATH, {"code": "Thanks", "body": "One"}, key=account["api_key"])).json
    r = await api.post(PATH, {"code": "thanks", "body": "Two"}, key=account["api_key"])
    assert r.code == 409 and r.json["error"]["existingId"] == first["id"] and "thanks" in r.json["error"]["message"].lower()
    other = (await api.post(PATH, {"code": "other", "body": "Three"}, key=account["api_key"])).json
    r = await api.patch(f"{PATH}/{other['id']}", {"code": "THANKS"}, key=account["api_key"])
    assert r.code == 409
    assert (await api.post(PATH, {"code": "thanks", "body": "Theirs"}, key=other_account["api_key"])).code == 201
    assert [r[1:] for r in await _rows(services.db, account["account_id"])] == [("Thanks", "One"), ("other", "Three")]


async def test_another_accounts_key_sees_and_changes_nothing(api, account, other_account, services):
    mine = (await api.post(PATH, {"code": "mine", "body": "Mine"}, key=account["api_key"])).json
    theirs = other_account["api_key"]
    assert (await api.get(PATH, key=theirs)).json == {"data": []}
    assert (await api.get(f"{PATH}/{mine['id']}", key=theirs)).code == 404
    assert (await api.patch(f"{PATH}/{mine['id']}", {"body": "Stolen"}, key=theirs)).code == 404
    assert (await api.delete(f"{PATH}/{mine['id']}", key=theirs)).code == 404
    assert await _rows(services.db, account["account_id"]) == [(mine["id"], "mine", "Mine")]


async def test_a_patch_needs_something_to_change(api, account):
    mine = (await api.post(PATH, {"code": "mine", "body": "Mine"}, key=account["api_key"])).json
    r = await api.patch(f"{PATH}/{mine['id']}", {}, key=account["api_key"])
    assert r.code == 400 and "code or body" in r.json["error"]["message"]
    r = await api.patch(f"{PATH}/{mine['id']}", {"body": "{{nope}}"}, key=account["api_key"])
    assert r.code == 400 and "body" in r.json["error"]["message"]
    assert (await api.get(f"{PATH}/{mine['id']}", key=account["api_key"])).json["body"] == "Mine"


# ---- the thread's picker: every reply rendered for the contact ----------------------------------------

async def test_the_thread_gets_each_reply_rendered_for_its_contact(signed_in, api, services, ui_account):
    key = ui_account["api_key"]
    await api.post(PATH, {"code": "hi", "body": "Hi {{firstName}} {{ lastName }} ({{email}}, {{phone}})."}, key=key)
    await api.post(PATH, {"code": "plain", "body": "No placeholders {here}."}, key=key)
    ada = await inbound(services, ui_account["account_id"], "+14155552671", first_name="Ada", last_name="Lovelace")
    r = await signed_in.get(f"/inbox/{ada['contact_id']}/canned-replies")
    assert r.code == 200 and r.headers["Content-Type"].startswith("application/json")
    items = {i["code"]: i["body"] for i in json.loads(r.body)["items"]}
    # A missing value (no email) is empty, as in campaigns; single braces are text.
    assert items == {"hi": "Hi Ada Lovelace (, +14155552671).", "plain": "No placeholders {here}."}


async def test_the_thread_picker_of_another_accounts_contact_is_404(signed_in, services, other_account):
    theirs = await inbound(services, other_account["account_id"], "+14155550000")
    assert (await signed_in.get(f"/inbox/{theirs['contact_id']}/canned-replies")).code == 404


async def test_the_thread_has_the_picker(signed_in, services, ui_account):
    ada = await inbound(services, ui_account["account_id"], "+14155552671")
    page = (await signed_in.get(f"/inbox/{ada['contact_id']}")).text
    assert f'data-source="/inbox/{ada["contact_id"]}/canned-replies"' in page and "canned.js" in page


# ---- the Canned replies page -----------------------------------------------------------------------

async def test_the_page_creates_edits_and_deletes_with_xsrf_forms(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    page = await signed_in.get("/canned-replies")
    assert page.code == 200 and "No canned replies yet." in page.text and 'name="_xsrf"' in page.text
    r = await signed_in.post("/canned-replies", {"code": "hours", "body": "We open at 9, {{firstName}}."})
    assert r.code == 303 and r.headers["Location"] == "/canned-replies"
    page = await signed_in.get("/canned-replies")
    assert "/hours" in page.text and "We open at 9, {{firstName}}." in page.text and "saved" in page.text
    [(reply_id, _, _)] = await _rows(services.db, account_id)

    r = await signed_in.post(f"/canned-replies/{reply_id}", {"code": "open", "body": "Open at 9."})
    assert r.code == 303
    assert await _rows(services.db, account_id) == [(reply_id, "open", "Open at 9.")]
    assert (await signed_in.post(f"/canned-replies/{reply_id}/delete", {}, xsrf=False)).code == 403
    r = await signed_in.post(f"/canned-replies/{reply_id}/delete")
    assert r.code == 303
    assert await _rows(services.db, account_id) == []


async def test_the_page_shows_the_error_by_its_field_and_keeps_the_input(signed_in, services, ui_account):
    r = await signed_in.post("/canned-replies", {"code": "two words", "body": "Kept <b>text</b>"})
    assert r.code == 400
    assert 'id="code-error"' in r.text and "letters, digits, - or _" in r.text
    assert "Kept &lt;b&gt;text&lt;/b&gt;" in r.text and 'aria-invalid="true"' in r.text
    r = await signed_in.post("/canned-replies", {"code": "ok", "body": "Hi {{name}}"})
    assert r.code == 400 and 'id="body-error"' in r.text and "unknown placeholder" in r.text
    assert (await signed_in.post("/canned-replies", {"code": "ok", "body": "Hi"}, xsrf=False)).code == 403
    assert await _rows(services.db, ui_account["account_id"]) == []


async def test_another_accounts_reply_is_a_404_page(signed_in, api, services, other_account):
    theirs = (await api.post(PATH, {"code": "theirs", "body": "Theirs"}, key=other_account["api_key"])).json
    assert (await signed_in.get(f"/canned-replies/{theirs['id']}")).code == 404
    assert (await signed_in.post(f"/canned-replies/{theirs['id']}", {"code": "mine", "body": "x"})).code == 404
    assert (await signed_in.post(f"/canned-replies/{theirs['id']}/delete")).code == 404
    assert await _rows(services.db, other_account["account_id"]) == [(theirs["id"], "theirs", "Theirs")]
