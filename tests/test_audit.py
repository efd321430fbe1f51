"""The audit list (issue 21): settings, keys, the signing secret and credit grants each leave one entry, in
the change's own transaction; GET /v1/audit pages it newest first, scoped to the account; the Audit page
shows it."""
from services import accounts
from tests.test_ui import PASSWORD, FormClient, browser, signed_in, ui_account  # noqa: F401 (fixtures)


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
