"""Issue 41 end to end, as a new user tries it: the real server.py over HTTPS and Debian's Chromium. Tags typed on a
contact's page and a tag chosen on Contacts, the Export button's CSV download, merging a duplicate that asks which
phone to keep (a message from the other's identity then reaches the kept contact, through the API), and the
contact page's "Download data"."""
import csv
import io
import json
import re

import pytest

from tests.parley_process import ParleyProcess
from tests.ui_helpers import open_page, sign_in


@pytest.fixture(scope="module")
def parley(tmp_path_factory):
    with ParleyProcess(tmp_path_factory.mktemp("contacts-data") / "data") as process:
        yield process


@pytest.fixture
def page(chromium):
    context, page = open_page(chromium, accept_downloads=True)
    yield page
    # A form answered 409 (the merge's choice) logs "Failed to load resource"; anything else (CSP) is a fault.
    assert [e for e in page.console_errors if not e.startswith("Failed to load resource")] == []
    context.close()


def test_tags_export_merge_and_personal_data_in_chromium(parley, page):
    key = {"apiKey": parley.first_run["api_key"]}
    with parley.client(params=key) as client:
        ada = client.post("/v1/contacts", json={"firstName": "Ada", "phone": "+14155550101"}).json()
        r = client.post("/v1/incoming_custom_channel_message", json={"customData": {
            "messageSid": "e2e-1", "fromId": "visitor-9", "toId": "shop", "body": "Hi from the chat",
            "firstName": "Augusta"}})
        assert r.status_code == 200, r.text
        other_id = client.get(f"/v1/messages/{r.json()['messageId']}").json()["contactId"]
        assert client.patch(f"/v1/contacts/{other_id}", json={"phone": "+14155550102"}).status_code == 200
    sign_in(page, parley)

    # Tags on the contact's page, then the tag as a filter on Contacts, and the Export button's file.
    page.goto(f"{parley.base}/contacts/{ada['id']}")
    page.fill("#tags", "VIP,  Newsletter ")
    page.click("#contact-form button[type=submit]")
    page.wait_for_selector("#tags-hint a.tag:has-text('vip')")
    assert page.input_value("#tags") == "newsletter, vip"
    page.click("#tags-hint a.tag:has-text('vip')")
    page.wait_for_selector("#tag-filter")
    assert page.locator("table tbody tr").count() == 1
    with page.expect_download() as download:
        page.click("#export-contacts")
    rows = list(csv.DictReader(io.StringIO(open(download.value.path(), encoding="utf-8").read())))
    assert [(row["id"], row["tags"]) for row in rows] == [(ada["id"], "newsletter, vip")]

    # Merge the chat visitor into Ada, typed by phone: both have a phone, so the page asks which to keep.
    page.goto(f"{parley.base}/contacts/{ada['id']}")
    page.fill("#other", "+1 415 555 0102")
    page.click("#merge-submit")
    page.wait_for_selector("#keep-phone")
    page.check("#keep-phone input[value=this]")
    page.click("#merge-submit")
    page.wait_for_url(re.compile(rf".*/contacts/{ada['id']}$"))
    page.wait_for_selector("text=Merged")
    assert page.locator("#message-count").inner_text() == "1"
    with parley.client(params=key) as client:
        assert client.get(f"/v1/contacts/{other_id}").status_code == 404
        r = client.post("/v1/incoming_custom_channel_message", json={"customData": {
            "messageSid": "e2e-2", "fromId": "visitor-9", "toId": "shop", "body": "Me again"}})
        assert client.get(f"/v1/messages/{r.json()['messageId']}").json()["contactId"] == ada["id"]

    # Everything held on Ada, as a file.
    page.reload()
    with page.expect_download() as download:
        page.click("#export-contact")
    data = json.loads(open(download.value.path(), encoding="utf-8").read())
    assert data["contact"]["id"] == ada["id"] and data["contact"]["phone"] == "+14155550101"
    assert [m["body"] for m in data["messages"]] == ["Hi from the chat", "Me again"]
    assert data["identities"] == [{"fromId": "visitor-9"}]
