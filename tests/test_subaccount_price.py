"""Issue 18 item 4: what a sub-account pays per bot reply is its agency's to set (PATCH /v1/subaccounts/{id}
and the Agency pages); the sub-account's own key cannot change it (bot.creditsPerReply is refused)."""
import json

import pytest

from tests.recharge import grant
from tests.bot_helpers import BOT_SETTINGS, RULES, configure, rows, say

pytestmark = pytest.mark.settings(**BOT_SETTINGS)  # as tests/test_bot.py


def spends(services, account_id):
    return [r["amount"] for r in rows(services, "SELECT amount FROM credit_transactions WHERE account_id = ?"
                                                " AND kind = 'spend' ORDER BY id", account_id)]


async def set_price(api, agency, sub, price):
    return await api.patch(f"/v1/subaccounts/{sub['account_id']}", {"creditsPerReply": price}, key=agency["api_key"])


@pytest.mark.parametrize("bot", [{"creditsPerReply": 0}, {"creditsPerReply": 0.01},
                                 {"campaigns": {"spring": {"creditsPerReply": 0}}}])
async def test_a_sub_account_cannot_set_its_own_price(api, services, agency, sub, bot):
    """The hole: `creditsPerReply: 0` from the sub-account's own key gave free bot replies. Now it is 400
    naming the field (it is not one of the account's own settings), nothing is stored, and a reply still
    costs the agency's price (the default, 1)."""
    await grant(api, agency, sub, 5)
    key = sub["api_key"]
    await configure(api, key, {"active": True, "rules": RULES})
    r = await api.patch("/v1/account/settings", {"bot": {"active": True, **bot}}, key=key)
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR"
    assert "creditsPerReply is set by the agency" in r.json["error"]["message"]
    assert r.json["error"]["message"].startswith("bot.")
    assert (await say(api, services, key, "price?", campaignId="spring"))["bot"]["outcome"] == "rule"
    assert spends(services, sub["account_id"]) == [-100]
    assert (await api.get("/v1/account", key=key)).json["credits"] == 4


async def test_the_agency_sets_the_price(api, services, agency, sub):
    """PATCH /v1/subaccounts/{id} {"creditsPerReply": n}: 0 makes replies free, 2.5 costs 2.5, null is the
    default 1 again; GET shows it."""
    await grant(api, agency, sub, 10)
    key = sub["api_key"]
    await configure(api, key, {"active": True, "rules": RULES})
    assert (await api.get(f"/v1/subaccounts/{sub['account_id']}", key=agency["api_key"])).json["creditsPerReply"] == 1
    for price, spent in ((0, []), (2.5, [-250]), (None, [-250, -100])):
        r = await set_price(api, agency, sub, price)
        assert r.code == 200, r.body
        assert r.json["creditsPerReply"] == (1 if price is None else price)
        assert (await say(api, services, key, "price?"))["bot"]["outcome"] == "rule"
        assert spends(services, sub["account_id"]) == spent
    listed = (await api.get("/v1/subaccounts", key=agency["api_key"])).json["data"]
    assert [s["creditsPerReply"] for s in listed] == [1]


@pytest.mark.parametrize("body, message", [
    ({"creditsPerReply": -1}, "creditsPerReply"), ({"creditsPerReply": 0.001}, "creditsPerReply"),
    ({"creditsPerReply": 1001}, "creditsPerReply"), ({"creditsPerReply": "1"}, "creditsPerReply"),
    ({"creditsPerReply": True}, "creditsPerReply"), ({}, "autoRecharge or creditsPerReply is required")])
async def test_a_bad_price_is_400_naming_the_field_and_changes_nothing(api, agency, sub, body, message):
    assert (await set_price(api, agency, sub, 3)).code == 200
    r = await api.patch(f"/v1/subaccounts/{sub['account_id']}", body, key=agency["api_key"])
    assert r.code == 400 and message in r.json["error"]["message"], r.body
    assert (await api.get(f"/v1/subaccounts/{sub['account_id']}", key=agency["api_key"])).json["creditsPerReply"] == 3


async def test_only_its_own_agency_sets_the_price(api, agency, sub, other_agency):
    """Tenancy: another agency's key is 404 (nothing revealed); the sub-account's own key is 403."""
    assert (await set_price(api, other_agency, sub, 0)).code == 404
    r = await set_price(api, sub, sub, 0)
    assert r.code == 403 and r.json["error"]["code"] == "FORBIDDEN"
    assert (await api.get(f"/v1/subaccounts/{sub['account_id']}", key=agency["api_key"])).json["creditsPerReply"] == 1


async def test_a_price_stored_in_the_bot_settings_before_is_ignored(api, services, agency, sub):
    """A `creditsPerReply: 0` a sub-account saved before this change is not its price (nor shown); saving the
    bot again drops it."""
    await grant(api, agency, sub, 5)
    key = sub["api_key"]
    await configure(api, key, {"active": True, "rules": RULES})
    cx = services.db.connect_sync()
    try:
        settings = json.loads(cx.execute("SELECT settings FROM accounts WHERE id = ?",
                                         (sub["account_id"],)).fetchone()[0])
        settings["bot"]["creditsPerReply"] = 0
        with cx:
            cx.execute("UPDATE accounts SET settings = ? WHERE id = ?", (json.dumps(settings), sub["account_id"]))
    finally:
        cx.close()
    assert "creditsPerReply" not in (await api.get("/v1/account", key=key)).json["settings"]["bot"]
    assert (await say(api, services, key, "price?"))["bot"]["outcome"] == "rule"
    assert spends(services, sub["account_id"]) == [-100]
    assert (await api.patch("/v1/account/settings", {"bot": {"greeting": "Hi"}}, key=key)).code == 200
    stored = rows(services, "SELECT settings FROM accounts WHERE id = ?", sub["account_id"])[0]["settings"]
    assert "creditsPerReply" not in json.loads(stored)["bot"]
