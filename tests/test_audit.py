"""The audit list (issue 21): settings, keys, the signing secret and credit grants each leave one entry, in
the change's own transaction; GET /v1/audit pages it newest first, scoped to the account; the Audit page
shows it."""
from datetime import datetime, timezone

from services import accounts, reports
from tests.live_helpers import inbound
from tests.ui_helpers import PASSWORD, FormClient


async def entries(api, key, **query):
    suffix = "&".join(f"{k}={v}" for k, v in query.items())
    r = await api.get("/v1/audit" + (f"?{suffix}" if suffix else ""), key=key)
    assert r.code == 200, r.body
    return r.json


async def test_api_changes_are_audited_as_the_key_newest_first(api, account):
    key = account["api_key"]
    assert (await api.patch("/v1/account/settings", {"optOutKeywords": ["STOP", "QUIT"]}, key=key)).code == 200
    assert (await api.post("/v1/account/webhook-secret/rotate", key=key)).code == 200
    page = await entries(api, key)
    assert [e["action"] for e in page["data"]] == ["webhook_secret.rotated", "settings.updated"]
    newest, oldest = page["data"]
    assert oldest["detail"] == {"changed": ["optOutKeywords"]}
    assert (oldest["actor"], oldest["actorLabel"]) == ("api-key", None)
    assert newest["id"] > oldest["id"] and page["nextCursor"] is None


async def test_pages_follow_the_cursor_and_bad_paging_is_400(api, account):
    key = account["api_key"]
    for _ in range(3):
        await api.patch("/v1/account/settings", {"customChannelWebhookUrl": None}, key=key)
    first = await entries(api, key, limit=2)
    assert len(first["data"]) == 2 and first["nextCursor"]
    second = await entries(api, key, limit=2, cursor=first["nextCursor"])
    assert len(second["data"]) == 1 and second["nextCursor"] is None
    assert second["data"][0]["id"] < first["data"][-1]["id"]
    for query in ("limit=0", "limit=x", "cursor=nope"):
        r = await api.get(f"/v1/audit?{query}", key=key)
        assert r.code == 400 and r.json["error"]["code"] == "VALIDATION_ERROR"


async def test_another_account_sees_nothing_of_it(api, account, other_account):
    await api.patch("/v1/account/settings", {"customChannelWebhookUrl": None}, key=account["api_key"])
    assert (await entries(api, other_account["api_key"]))["data"] == []
    assert (await api.get("/v1/audit")).code == 401


async def test_a_grant_is_audited_for_the_agency_and_the_sub_account(api, agency, sub):
    r = await api.post("/v1/subaccounts/credits", {"email": sub["email"], "amount": 5}, key=agency["api_key"],
                       query_key=False)
    assert r.code == 200, r.body
    for key in (agency["api_key"], sub["api_key"]):
        (entry,) = (await entries(api, key))["data"]
        assert (entry["action"], entry["subjectId"], entry["detail"]["amount"]) == ("credits.granted",
                                                                                  sub["account_id"], 5)


async def test_a_refused_change_leaves_no_entry(api, agency, sub):
    r = await api.post("/v1/subaccounts/credits", {"email": "nobody@example.com", "amount": 5},
                       key=agency["api_key"], query_key=False)
    assert r.code == 404
    assert (await entries(api, agency["api_key"]))["data"] == []


async def test_ui_changes_name_the_user_and_the_cli_the_operator(signed_in, api, services, ui_account):
    r = await signed_in.post("/settings/webhook", {"customChannelWebhookUrl": ""})
    assert r.code == 303
    assert (await signed_in.post("/settings/api-key")).code == 200
    await accounts.rotate_key(services.db, services.keys, ui_account["account_id"], by={"actor": "operator"})
    key = await accounts.rotate_key(services.db, services.keys, ui_account["account_id"])  # unaudited: by=None
    data = (await entries(api, key))["data"]
    assert [(e["action"], e["actorLabel"] or e["actor"]) for e in data] == [
        ("api_key.rotated", "operator"), ("api_key.rotated", ui_account["email"]),
        ("settings.updated", ui_account["email"])]


async def test_the_audit_page_lists_entries(signed_in):
    await signed_in.post("/settings/webhook", {"customChannelWebhookUrl": ""})
    page = await signed_in.get("/audit")
    assert page.code == 200 and "settings.updated" in page.text and "owner@acme.example" in page.text
    assert 'href="/audit"' in page.text


# ---- issue 36 §10: "View as" is credited to the viewer; the changes that were not audited are --------------

async def test_work_done_viewing_as_is_credited_to_the_agency_user_as_the_sub_account(
        api, services, http_server_client):
    """Notes, replies, opt-outs, contact edits, canned replies and the first-response report name the agency user
    "as" the sub-account, never its owner; starting and ending the view are in both accounts' audit lists."""
    agency = await accounts.create_account(services.db, services.box, services.keys, name="Agency",
                                           email="boss@agency.example", account_type="agency", password=PASSWORD)
    sub = await accounts.create_account(services.db, services.box, services.keys, name="Rossi Ltd",
                                        email="rossi@client.example", agency_email=agency["email"],
                                        password=PASSWORD)
    sub_id, as_label = sub["account_id"], "boss@agency.example as Rossi Ltd"
    await accounts.update_settings(services.db, sub_id, {"customChannelWebhookUrl": "http://127.0.0.1:9/x"})
    message = await inbound(services, sub_id, "sid-1")
    contact_id = message["contact_id"]
    browser = FormClient(http_server_client)
    assert (await browser.login(agency["email"])).code == 303
    assert (await browser.post(f"/agency/subaccounts/{sub_id}/view-as")).code == 303
    assert (await browser.post(f"/inbox/{contact_id}/notes", {"body": "Call back"})).code == 303
    assert (await browser.post(f"/inbox/{contact_id}/reply", {"body": "On it"})).code == 303
    assert (await browser.post(f"/contacts/{contact_id}", {"firstName": "Ann", "phone": message["from_id"],
                                                          "lastName": "", "email": ""})).code == 303
    assert (await browser.post(f"/contacts/{contact_id}/opt-out", {"optedOut": "1"})).code == 303
    assert (await browser.post("/canned-replies", {"code": "hi", "body": "Hello"})).code == 303
    thread = (await browser.get(f"/inbox/{contact_id}")).text
    assert f"Note by {as_label}" in thread and f"User {as_label}" in thread
    assert f"by {as_label}" in (await browser.get(f"/contacts/{contact_id}")).text
    assert (await browser.post("/view-as/end")).code == 303
    today = datetime.now(timezone.utc).date()
    report = await reports.build(services.db, [sub_id], "first-response", today, today)
    assert [row["name"] for row in report["rows"]] == ["All people", as_label]  # the people's figure, then each
    notes = (await api.get(f"/v1/conversations/{contact_id}/notes", key=sub["api_key"])).json["data"]
    assert [n["authorEmail"] for n in notes] == ["boss@agency.example"]  # the API's field stays an email
    sub_entries = (await entries(api, sub["api_key"]))["data"]
    assert [e["action"] for e in sub_entries] == ["view_as.ended", "canned_reply.created", "contact.opted_out",
                                                  "contact.updated", "view_as.started"]
    viewer_id = sub_entries[0]["actor"]
    assert viewer_id.startswith("usr_") and {(e["actor"], e["actorLabel"]) for e in sub_entries} == {
        (viewer_id, as_label), (viewer_id, "boss@agency.example")}  # started from the agency's own page
    assert sub_entries[3]["detail"] == {"fields": ["first_name"]}  # which fields, never the values
    agency_entries = (await entries(api, agency["api_key"]))["data"]
    assert [(e["action"], e["subjectId"]) for e in agency_entries] == [("view_as.ended", sub_id),
                                                                       ("view_as.started", sub_id)]


async def test_the_changes_issue_36_names_are_audited(api, services, http_server_client):
    """Price per reply and auto-recharge, a sub-account created, a password changed, a campaign sent and
    cancelled, a list deleted, a contact edited and opted out by hand, canned replies changed: each one entry."""
    agency = await accounts.create_account(services.db, services.box, services.keys, name="Agency",
                                           email="boss@agency.example", account_type="agency", password=PASSWORD)
    key = agency["api_key"]
    created = await api.post("/v1/subaccounts", {"name": "Rossi", "email": "rossi@client.example"}, key=key)
    sub_id = created.json["id"]
    assert (await api.patch(f"/v1/subaccounts/{sub_id}", {"creditsPerReply": 2}, key=key)).code == 200
    assert (await api.patch(f"/v1/subaccounts/{sub_id}", {"autoRecharge": {"threshold": 5, "amount": 10}},
                            key=key)).code == 200
    await accounts.update_settings(services.db, agency["account_id"],
                                   {"customChannelWebhookUrl": "http://127.0.0.1:9/x"})
    list_id = (await api.post("/v1/lists", {"name": "Spring"}, key=key)).json["id"]
    campaign = (await api.post("/v1/campaigns", {"name": "Sale", "listId": list_id, "body": "Hi",
                                                 "startAt": "2099-01-01T00:00:00Z"}, key=key)).json
    assert (await api.post(f"/v1/campaigns/{campaign['id']}/cancel", key=key)).code == 200
    assert (await api.delete(f"/v1/lists/{list_id}", key=key)).code == 200
    contact_id = (await api.post("/v1/contacts", {"phone": "+14155552671"}, key=key)).json["id"]
    assert (await api.patch(f"/v1/contacts/{contact_id}", {"firstName": "Ann"}, key=key)).code == 200
    assert (await api.patch(f"/v1/contacts/{contact_id}", {"optedOut": True}, key=key)).code == 200
    reply_id = (await api.post("/v1/canned-replies", {"code": "hi", "body": "Hello"}, key=key)).json["id"]
    assert (await api.patch(f"/v1/canned-replies/{reply_id}", {"body": "Hello!"}, key=key)).code == 200
    assert (await api.delete(f"/v1/canned-replies/{reply_id}", key=key)).code == 200
    browser = FormClient(http_server_client)
    assert (await browser.login(agency["email"])).code == 303
    r = await browser.post("/settings/password", {"current_password": PASSWORD, "new_password": "x" * 20,
                                                  "new_password_again": "x" * 20})
    assert r.code == 303
    page = (await entries(api, key))["data"]
    assert [(e["action"], e["subjectId"]) for e in reversed(page)] == [
        ("subaccount.created", sub_id), ("subaccount.updated", sub_id), ("subaccount.updated", sub_id),
        ("campaign.sent", campaign["id"]), ("campaign.cancelled", campaign["id"]), ("list.deleted", list_id),
        ("contact.updated", contact_id), ("contact.opted_out", contact_id), ("canned_reply.created", reply_id),
        ("canned_reply.updated", reply_id), ("canned_reply.deleted", reply_id),
        ("password.changed", page[0]["actor"])]
    assert page[0]["actorLabel"] == "boss@agency.example" and page[-1]["actor"] == "api-key"
