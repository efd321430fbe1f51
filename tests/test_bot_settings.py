"""The bot's settings object (docs/design.md#api-decisions "Bot") in PATCH /v1/account/settings and GET /v1/account: validation
naming the field, merge-patch semantics, the write-only provider key encrypted at rest, campaign overrides."""
import asyncio

import pytest

from common.errors import Invalid
from services import accounts, bot_settings


SETTINGS = "/v1/account/settings"
RULES = [{"keywords": ["price", "cost"], "answer": "Plans start at $10."}]
PROVIDER = {"baseUrl": "http://127.0.0.1:9/v1", "model": "tiny", "apiKey": "sk-secret-123",
            "systemPrompt": "You sell bikes.", "timeoutSeconds": 5}


async def patch_bot(api, key, bot):
    return await api.patch(SETTINGS, {"bot": bot}, key=key)


async def stored_settings(services, account_id):
    cx = services.db.connect_sync()
    try:
        return cx.execute("SELECT settings FROM accounts WHERE id = ?", (account_id,)).fetchone()[0]
    finally:
        cx.close()


async def test_the_bot_object_round_trips_through_patch_and_get(api, account):
    """docs/design.md#api-decisions: "The `bot` settings object (API and UI alike)" with the keys it shows."""
    key = account["api_key"]
    bot = {"active": True, "greeting": "Hi!", "fallback": "A person will answer soon.", "rules": RULES,
           "handoffKeywords": ["human", "agent"], "provider": PROVIDER, "pauseMinutesAfterHumanReply": 30,
           "campaigns": {"spring": {"greeting": "Spring sale!", "rules": []}}}
    r = await patch_bot(api, key, bot)
    assert r.code == 200, r.body
    shown = {**bot, "provider": {**{k: v for k, v in PROVIDER.items() if k != "apiKey"}, "apiKeySet": True}}
    assert r.json["bot"] == shown  # PATCH answers the whole settings object
    assert (await api.get("/v1/account", key=key)).json["settings"]["bot"] == shown


@pytest.mark.parametrize("bot, field", [
    ({"rules": [{"keywords": [], "answer": "x"}]}, "bot.rules[0].keywords"),
    ({"rules": [RULES[0], {"keywords": ["a"], "answer": "   "}]}, "bot.rules[1].answer"),
    ({"rules": [{"keywords": ["ok", " "], "answer": "x"}]}, "bot.rules[0].keywords[1]"),
    ({"handoffKeywords": "human"}, "bot.handoffKeywords"),
    ({"creditsPerReply": 0}, "bot.creditsPerReply"),  # the agency's to set (issue 18 item 4)
    ({"creditsPerReply": 1}, "bot.creditsPerReply"),
    ({"campaigns": {"spring": {"creditsPerReply": 0}}}, "bot.campaigns.spring.creditsPerReply"),
    ({"pauseMinutesAfterHumanReply": 1.5}, "bot.pauseMinutesAfterHumanReply"),
    ({"provider": {"baseUrl": "http://127.0.0.1:9/v1"}}, "bot.provider.model"),
    ({"provider": {"baseUrl": "ftp://example.com/v1", "model": "m"}}, "bot.provider.baseUrl"),
    ({"provider": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m", "timeoutSeconds": 600}},
     "bot.provider.timeoutSeconds"),
    ({"colour": "blue"}, "bot.colour"),
    ({"campaigns": {"spring": {"rules": [{"keywords": ["x"]}]}}}, "bot.campaigns.spring.rules[0].answer"),
    ({"campaigns": {"spring": {"campaigns": {}}}}, "bot.campaigns.spring.campaigns"),
    # Read-only (issue 36 item 15): what reads show is refused in a write, whatever its value.
    ({"provider": {"apiKeySet": False}}, "bot.provider.apiKeySet is read-only"),
    ({"provider": {"apiKeySet": None}}, "bot.provider.apiKeySet is read-only"),
    ({"campaigns": {"0": {"provider": {"apiKeySet": False}}}}, "bot.campaigns.0.provider.apiKeySet is read-only"),
    # The keyword limits that bound the bot's matching (issue 18, item 1):
    ({"rules": [RULES[0]] * 3 + [{"keywords": [f"k{i}" for i in range(51)], "answer": "x"}]}, "bot.rules[3].keywords"),
    ({"rules": [RULES[0]] * 201}, "bot.rules"),
    ({"rules": [{"keywords": ["x" * 101], "answer": "x"}]}, "bot.rules[0].keywords[0]"),
    ({"rules": [{"keywords": [f"k{i}" for i in range(50)], "answer": "x"}] * 21}, "bot.rules have 1050 keywords"),
    ({"rules": [{"keywords": [f"k{i}" for i in range(50)], "answer": "x"}] * 20, "handoffKeywords": ["human"]},
     "bot.handoffKeywords and the rules have 1001 keywords"),
    ({"campaigns": {"s": {"rules": [{"keywords": [f"k{i}" for i in range(50)], "answer": "x"}] * 21}}},
     "bot.campaigns.s.rules have 1050"),
])
async def test_an_invalid_bot_is_400_naming_the_field_and_changes_nothing(api, account, services, bot, field):
    """Brief: "400 naming the field (e.g. bot.rules[0].keywords)"; house rule: bad input changes nothing."""
    key = account["api_key"]
    assert (await patch_bot(api, key, {"active": True, "rules": RULES})).code == 200
    before = await stored_settings(services, account["account_id"])
    r = await patch_bot(api, key, bot)
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR"
    assert r.json["error"]["message"].startswith(field), r.json["error"]["message"]
    assert await stored_settings(services, account["account_id"]) == before


async def test_a_patch_merges_into_the_stored_bot(api, account):
    """docs/api.md "Bot": `bot` is a JSON Merge Patch (RFC 7386): objects merge, null removes, arrays replace."""
    key = account["api_key"]
    await patch_bot(api, key, {"active": True, "greeting": "Hi", "rules": RULES, "provider": PROVIDER,
                               "campaigns": {"spring": {"greeting": "Spring!"}, "autumn": {"active": False}}})
    r = await patch_bot(api, key, {"rules": [{"keywords": ["hours"], "answer": "9 to 5"}], "greeting": None,
                                   "provider": {"model": "bigger"}, "campaigns": {"autumn": None}})
    bot = r.json["bot"]
    assert bot["active"] is True and "greeting" not in bot
    assert bot["rules"] == [{"keywords": ["hours"], "answer": "9 to 5"}]  # an array replaces
    assert bot["provider"]["model"] == "bigger" and bot["provider"]["baseUrl"] == PROVIDER["baseUrl"]
    assert bot["provider"]["apiKeySet"] is True  # a PATCH that does not mention the key keeps it
    assert bot["campaigns"] == {"spring": {"greeting": "Spring!"}}
    r = await api.patch(SETTINGS, {"bot": None}, key=key)
    assert r.code == 200 and "bot" not in r.json


async def test_the_provider_key_is_write_only_and_encrypted_at_rest(api, account, services):
    """docs/design.md#api-decisions: "`apiKey` is write-only (reads show whether one is set)"; §4 "Secrets at rest (... provider
    keys ...) are encrypted"."""
    key, account_id = account["api_key"], account["account_id"]
    r = await patch_bot(api, key, {"provider": PROVIDER})
    assert "sk-secret-123" not in r.body.decode()
    assert "sk-secret-123" not in (await api.get("/v1/account", key=key)).body.decode()
    raw = await stored_settings(services, account_id)
    assert "sk-secret-123" not in raw and "apiKeyEncrypted" in raw
    account_row = await accounts.get_account(services.db, account_id)
    token = account_row["settings"]["bot"]["provider"][bot_settings.KEY]
    assert services.box.decrypt(token) == "sk-secret-123"
    # Rules only: the key stays. Another key replaces it; null clears it.
    assert (await patch_bot(api, key, {"rules": RULES})).json["bot"]["provider"]["apiKeySet"] is True
    await patch_bot(api, key, {"provider": {"apiKey": "sk-other"}})
    account_row = await accounts.get_account(services.db, account_id)
    assert services.box.decrypt(account_row["settings"]["bot"]["provider"][bot_settings.KEY]) == "sk-other"
    r = await patch_bot(api, key, {"provider": {"apiKey": None}})
    assert r.json["bot"]["provider"]["apiKeySet"] is False


async def test_a_stored_key_never_follows_the_provider_to_another_host(api, account):
    """A key that is write-only must not be readable by pointing baseUrl at a host that logs it: moving to
    another host needs the key sent again (or null). The same host keeps it."""
    key = account["api_key"]
    await patch_bot(api, key, {"provider": PROVIDER})
    r = await patch_bot(api, key, {"provider": {"baseUrl": "http://127.0.0.2:9/v1"}})
    assert r.code == 400 and r.json["error"]["message"].startswith("bot.provider.apiKey must be sent again")
    r = await patch_bot(api, key, {"provider": {"baseUrl": "http://127.0.0.1:9/other/v1"}})
    assert r.code == 200 and r.json["bot"]["provider"]["apiKeySet"] is True
    r = await patch_bot(api, key, {"provider": {"baseUrl": "http://127.0.0.2:9/v1", "apiKey": None}})
    assert r.code == 200 and r.json["bot"]["provider"]["apiKeySet"] is False
    # A GET answer sent back as a PATCH is 400 naming the read-only apiKeySet (issue 36 item 15); without it,
    # it changes nothing.
    shown = (await api.get("/v1/account", key=key)).json["settings"]["bot"]
    r = await patch_bot(api, key, shown)
    assert r.code == 400 and r.json["error"]["message"].startswith("bot.provider.apiKeySet is read-only")
    written = {**shown, "provider": {k: v for k, v in shown["provider"].items() if k != "apiKeySet"}}
    assert (await patch_bot(api, key, written)).json["bot"] == shown


async def test_provider_urls_are_checked_like_webhook_urls():
    """Brief: the provider goes through "the same SSRF guard as webhooks (private addresses only with
    --allow-private-webhooks)"; checked when saved (and again when connecting, tests/test_bot.py)."""
    changes = {"bot": {"campaigns": {"spring": {"provider": {"baseUrl": "https://127.0.0.1/v1", "model": "m"}}}}}
    with pytest.raises(Invalid, match=r"^bot\.campaigns\.spring\.provider\.baseUrl must be publicly reachable"):
        await accounts.validate_settings_changes(changes, allow_private=False)
    with pytest.raises(Invalid, match=r"^bot\.provider\.baseUrl must be an https:// URL"):
        await accounts.validate_settings_changes({"bot": {"provider": {"baseUrl": "http://example.com/v1"}}},
                                                 allow_private=False)
    assert await accounts.validate_settings_changes(changes, allow_private=True) == (changes, [])


def test_a_campaign_overrides_the_accounts_keys():
    """docs/design.md#api-decisions: "campaigns: {<campaignId>: {…the same keys, overriding the account's…}}". A campaign's
    provider overrides field by field and keeps the account's key only on the same host."""
    bot = {"active": False, "greeting": "Hi", "rules": RULES,
           "provider": {"baseUrl": "https://a.example/v1", "model": "m", bot_settings.KEY: "token"},
           "campaigns": {"spring": {"active": True, "greeting": "", "provider": {"systemPrompt": "Spring."}},
                         "elsewhere": {"provider": {"baseUrl": "https://b.example/v1"}}}}
    account = bot_settings.effective(bot)
    assert (account["active"], account["greeting"], account["pauseMinutesAfterHumanReply"]) == (False, "Hi", 30)
    spring = bot_settings.effective(bot, "spring")
    assert spring["active"] is True and spring["greeting"] == "" and spring["rules"] == RULES
    assert spring["provider"] == {"baseUrl": "https://a.example/v1", "model": "m", bot_settings.KEY: "token",
                                  "systemPrompt": "Spring."}
    assert bot_settings.KEY not in bot_settings.effective(bot, "elsewhere")["provider"]
    assert bot_settings.effective(bot, "unknown") == account
    assert bot_settings.active_anywhere(bot) and not bot_settings.active_anywhere({"active": False})


async def test_the_keyword_matcher_is_built_when_the_settings_are_saved_once_per_version(api, account, services):
    """Issue 18, item 1: one compiled matcher per settings version, built at save, reused by every message;
    a new save makes a new version (and matcher); the version is never shown."""
    from services import bot_match
    from storage import bot_state
    key, account_id = account["api_key"], account["account_id"]
    r = await patch_bot(api, key, {"active": True, "rules": RULES})
    assert "version" not in r.json["bot"]
    config = (await services.db.read(bot_state.context_in_tx, account_id, None, None))["config"]
    assert config["matcherKey"] in bot_match._cache  # built by the save, before any message
    assert bot_match.matcher(config) is bot_match.matcher(config)
    assert bot_match.matcher(config).first("the PRICE?") == (0, "price")
    await patch_bot(api, key, {"rules": [{"keywords": ["hours"], "answer": "9 to 5"}]})
    newer = (await services.db.read(bot_state.context_in_tx, account_id, None, None))["config"]
    assert newer["matcherKey"] != config["matcherKey"] and newer["matcherKey"] in bot_match._cache
    assert bot_match.matcher(newer).first("the PRICE?") is None


async def test_another_account_sees_nothing_of_the_bot(api, account, other_account):
    """House rule: another account's key sees, changes and learns nothing."""
    await patch_bot(api, account["api_key"], {"active": True, "rules": RULES, "provider": PROVIDER})
    assert "bot" not in (await api.get("/v1/account", key=other_account["api_key"])).json["settings"]
    await patch_bot(api, other_account["api_key"], {"active": False})
    assert (await api.get("/v1/account", key=account["api_key"])).json["settings"]["bot"]["active"] is True


async def test_two_bot_patches_at_once_both_land(api, account, services):
    """A bot PATCH is a merge patch of the stored bot, merged and validated before its write (services/accounts.py
    update_settings): of two at once, each changing another key, neither is lost; the write that finds the bot
    changed since its merge writes nothing and is merged again."""
    key, account_id = account["api_key"], account["account_id"]
    await patch_bot(api, key, {"active": True})
    first, second = await asyncio.gather(patch_bot(api, key, {"greeting": "Hi!"}),
                                         patch_bot(api, key, {"fallback": "A person will answer."}))
    assert first.code == second.code == 200, (first.body, second.body)
    bot = (await accounts.get_account(services.db, account_id))["settings"]["bot"]
    assert (bot["active"], bot["greeting"], bot["fallback"]) == (True, "Hi!", "A person will answer.")
    audit = await services.db.read(lambda cx: cx.execute(
        "SELECT COUNT(*) FROM audit_log WHERE account_id = ? AND action = 'settings.updated'", (account_id,)).fetchone()[0])
    assert audit == 3  # one entry per PATCH: the write merged again left none of its own
