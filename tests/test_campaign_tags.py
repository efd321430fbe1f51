"""A campaign's audience is a list or a tag (issue 41, docs/api.md "Campaigns"): exactly one of listId and tag, the
tag normalised as contact tags are; the snapshot at start takes the account's contacts that carry the tag then (opted-out
ones skipped when their turn comes, as for a list); the UI's create form makes one."""
import re

import pytest

from services import contacts
from tests.campaign_helpers import (api_campaigns, assert_counts_add_up, campaign, campaign_form, deliver_all, recipients,
                                    run_all, set_webhook)
from tests.ui_helpers import field_error, unescape

BODY = "Hi {{firstName}}!"


async def tagged(services, account, phone, tags, **fields):
    contact, _ = await contacts.create_contact(services.db, account["account_id"], phone=phone, tags=tags, **fields)
    return contact["id"]


async def tag(api, account, contact_id, tags):
    r = await api.patch(f"/v1/contacts/{contact_id}", {"tags": tags}, key=account["api_key"])
    assert r.code == 200, r.body


async def test_a_tag_campaign_reaches_exactly_the_accounts_contacts_tagged_when_it_starts(
        api, services, account, other_account, receiver, runner, worker):
    await set_webhook(api, account, receiver.url)
    await set_webhook(api, other_account, receiver.url)
    vip = await tagged(services, account, "+14155550101", ["VIP"], first_name="Ann")
    opted_out = await tagged(services, account, "+14155550102", ["vip", "old"], first_name="Bob")
    r = await api.patch(f"/v1/contacts/{opted_out}", {"optedOut": True}, key=account["api_key"])
    assert r.code == 200, r.body
    tagged_before_start = await tagged(services, account, "+14155550103", [], first_name="Cy")
    await tagged(services, account, "+14155550104", ["vip customer"])  # another tag, however alike
    await tagged(services, other_account, "+14155550105", ["vip"])  # another account's

    r = await api.post("/v1/campaigns", {"name": "VIPs", "tag": "  VIP ", "body": BODY, "draft": True},
                       key=account["api_key"])
    assert r.code == 201, r.body
    made = r.json
    assert (made["tag"], made["listId"], made["status"], made["counts"]["total"]) == ("vip", None, "draft", 0)
    preview = (await api.post(f"/v1/campaigns/{made['id']}/preview", {}, key=account["api_key"])).json
    assert preview["recipients"] == {"total": 2, "optedOut": 1}
    assert [s["id"] for s in preview["sample"]] == sorted([vip, opted_out])

    await tag(api, account, tagged_before_start, ["vip"])  # tagged after the draft, before the start: taken
    r = await api.post(f"/v1/campaigns/{made['id']}/start", {}, key=account["api_key"])
    assert r.code == 200, r.body
    assert r.json["counts"]["total"] == 3 and r.json["tag"] == "vip"
    late = await tagged(services, account, "+14155550106", ["vip"])  # tagged after the start: not taken
    await run_all(runner)
    await deliver_all(worker)
    done = await campaign(api, account, made["id"])
    assert (done["status"], done["counts"]["total"], done["counts"]["sent"], done["counts"]["skipped"]) == (
        "completed", 3, 2, 1)
    assert_counts_add_up(done)
    got = {row["contactId"]: row["status"] for row in await recipients(api, account, made["id"])}
    assert got == {vip: "sent", opted_out: "skipped", tagged_before_start: "sent"}
    assert late not in got
    assert len(receiver.requests) == 2


async def test_a_tag_no_contact_has_makes_a_campaign_of_no_recipients_as_an_empty_list_does(api, services, account,
                                                                                            receiver):
    await set_webhook(api, account, receiver.url)
    empty_list = (await api.post("/v1/lists", {"name": "Empty"}, key=account["api_key"])).json
    by_list = await api.post("/v1/campaigns", {"name": "L", "listId": empty_list["id"], "body": BODY},
                             key=account["api_key"])
    by_tag = await api.post("/v1/campaigns", {"name": "T", "tag": "nobody", "body": BODY}, key=account["api_key"])
    assert by_list.code == by_tag.code == 201, (by_list.body, by_tag.body)
    shape = lambda c: (c["status"], c["counts"], c["finishedAt"] is not None)  # noqa: E731
    assert shape(by_tag.json) == shape(by_list.json) == ("completed", by_list.json["counts"], True)
    assert by_tag.json["counts"]["total"] == 0


@pytest.mark.parametrize("audience, field", [
    ({"listId": "LIST", "tag": "vip"}, "tag"),
    ({}, "listId"),
    ({"tag": "   "}, "tag"),
    ({"tag": "x" * 51}, "tag"),
    ({"tag": "a,b"}, "tag"),
    ({"listId": None, "tag": None}, "listId"),
])
async def test_both_neither_or_a_bad_tag_is_400_naming_the_field_and_stores_nothing(api, account, receiver, audience,
                                                                                    field):
    await set_webhook(api, account, receiver.url)
    lst = (await api.post("/v1/lists", {"name": "Leads"}, key=account["api_key"])).json
    audience = {k: lst["id"] if v == "LIST" else v for k, v in audience.items()}
    r = await api.post("/v1/campaigns", {"name": "Bad", "body": BODY, **audience}, key=account["api_key"])
    assert r.code == 400, r.body
    assert r.json["error"]["message"].startswith(field), r.body
    assert (await api.get("/v1/campaigns", key=account["api_key"])).json["data"] == []


async def test_the_form_makes_a_tag_campaign_and_its_pages_show_the_tag(signed_in, api, services, ui_account,
                                                                       receiver):
    await set_webhook(api, ui_account, receiver.url)
    ann = await tagged(services, ui_account, "+14155550111", ["vip"], first_name="Ann")
    page = await signed_in.get("/campaigns")
    assert 'name="audience" value="tag"' in page.text and 'id="tag" name="tag"' in page.text

    expected = await api.post("/v1/campaigns", {"name": "Spring sale", "tag": "  ", "body": BODY},
                              key=ui_account["api_key"])
    blank = await signed_in.post("/campaigns", campaign_form("", audience="tag", tag="  "))
    assert blank.code == expected.code == 400
    assert unescape(field_error(blank.text, "tag")) == expected.json["error"]["message"]
    assert await api_campaigns(api, ui_account) == []

    r = await signed_in.post("/campaigns", campaign_form("", audience="tag", tag=" VIP "))
    assert r.code == 303, r.text
    campaign_id = r.headers["Location"].removeprefix("/campaigns/")
    made = await campaign(api, ui_account, campaign_id)
    assert (made["tag"], made["listId"], made["status"]) == ("vip", None, "draft")
    shown = await signed_in.get(r.headers["Location"])
    assert '<dd id="campaign-tag">vip ' in shown.text
    assert re.search(r'id="send-facts">1 contact has the tag <strong>vip</strong> now', shown.text), shown.text
    assert f'<option value="{ann}" selected>Ann</option>' in shown.text  # the preview's contact: the tagged one
    rows = await signed_in.get("/campaigns/rows")
    assert "tag <strong>vip</strong>" in rows.text
    # A list chosen (the default choice) with a tag typed too sends the list alone: the list is the audience.
    lst = (await api.post("/v1/lists", {"name": "Leads"}, key=ui_account["api_key"])).json
    r = await signed_in.post("/campaigns", campaign_form(lst["id"], tag="vip", name="By list"))
    assert r.code == 303, r.text
    by_list = await campaign(api, ui_account, r.headers["Location"].removeprefix("/campaigns/"))
    assert (by_list["listId"], by_list["tag"]) == (lst["id"], None)
