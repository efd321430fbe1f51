"""Auth, error envelopes and the Account API, in-process (docs/design.md#api-decisions Auth, Errors, Account API)."""
import logging

from handlers.base import ApiHandler
from services.keys import hash_api_key
from tests.parley_process import ParleyProcess
from tests import db_direct


async def test_missing_and_wrong_key_are_401(api):
    """Spec §5.6: "A missing or invalid key yields status 401." """
    for key in (None, "pk_wrong"):
        r = await api.get("/v1/account", key=key)
        assert r.code == 401
        assert r.json["error"]["code"] == "UNAUTHORIZED"


async def test_key_in_query_or_header(api, account):
    """Spec §5.2: pass the key as the query parameter apiKey; docs/design.md#api-decisions: also as x-api-key."""
    r1 = await api.get("/v1/account", key=account["api_key"])
    r2 = await api.get("/v1/account", key=account["api_key"], query_key=False)
    assert r1.code == r2.code == 200
    assert r1.json["id"] == r2.json["id"] == account["account_id"]
    assert r1.json["type"] == "standard"
    assert "webhook_secret" not in r1.body.decode() and account["api_key"] not in r1.body.decode()


async def test_unknown_path_is_404_json(api, account):
    for path in ("/nope", "/v1/nope", "/v1/account/x/y"):
        r = await api.get(path, key=account["api_key"])
        assert r.code == 404, path
        assert r.json["error"]["code"] == "NOT_FOUND"
        assert r.headers["X-Request-Id"]


async def test_every_response_has_request_id_and_hsts(api, account):
    ok = await api.get("/v1/account", key=account["api_key"])
    bad = await api.get("/v1/account")
    ids = {ok.headers["X-Request-Id"], bad.headers["X-Request-Id"]}
    assert len(ids) == 2 and all(len(i) == 16 for i in ids)
    assert "max-age" in ok.headers["Strict-Transport-Security"]


class _Boom(ApiHandler):
    async def get(self):
        raise RuntimeError("secret internals /etc/passwd")


async def test_unhandled_error_is_500_without_traceback(app, api, account, caplog):
    """Spec §7: 500 "Server-side error"; DESIGN: logged with a request id, never a traceback to the client."""
    app.add_handlers(r".*", [(r"/v1/boom", _Boom)])
    with caplog.at_level(logging.ERROR, logger="parley.http"):
        r = await api.get("/v1/boom", key=account["api_key"])
    assert r.code == 500
    assert r.json["error"]["code"] == "INTERNAL"
    rid = r.headers["X-Request-Id"]
    assert rid in r.json["error"]["message"]
    text = r.body.decode()
    assert "Traceback" not in text and "secret internals" not in text and "passwd" not in text
    logged = "\n".join(rec.getMessage() + str(rec.exc_info) for rec in caplog.records)
    assert rid in logged and "secret internals" in logged


async def test_wrong_method_is_405_with_allow(api, account):
    r = await api.call("DELETE", "/v1/account", key=account["api_key"])
    assert r.code == 405
    assert r.headers["Allow"] == "GET, PATCH"  # PATCH renames the account (issue 43)
    assert r.json["error"]["code"] == "METHOD_NOT_ALLOWED"


async def test_body_must_be_json(api, account):
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", key=key, raw="customChannelWebhookUrl=x",
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.code == 415 and r.json["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"
    r = await api.patch("/v1/account/settings", key=key, raw="{not json", headers={"Content-Type": "application/json"})
    assert r.code == 400 and "JSON" in r.json["error"]["message"]
    r = await api.patch("/v1/account/settings", key=key, raw="[1]", headers={"Content-Type": "application/json"})
    assert r.code == 400 and r.json["error"]["code"] == "VALIDATION_ERROR"


async def test_oversized_body_is_413(api, account, settings):
    big = "x" * (settings.max_body_bytes + 1)
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": big}, key=account["api_key"])
    assert r.code == 413 and r.json["error"]["code"] == "PAYLOAD_TOO_LARGE"


# The opt-out keywords are shown with their defaults until an account sets its own (docs/api.md "Campaigns").
KEYWORD_DEFAULTS = {"optOutKeywords": ["STOP", "UNSUBSCRIBE"], "optInKeywords": ["START"]}


async def test_patch_settings_validates_and_names_the_field(api, account):
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "ftp://example.com/x"}, key=key)
    assert r.code == 400 and "customChannelWebhookUrl" in r.json["error"]["message"]
    r = await api.patch("/v1/account/settings", {"unknownSetting": 1}, key=key)
    assert r.code == 400 and "unknownSetting" in r.json["error"]["message"]
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"contact.deleted": "http://127.0.0.1/x"}}, key=key)
    assert r.code == 400 and "notificationUrls" in r.json["error"]["message"]
    # Nothing changed by the bad requests.
    assert (await api.get("/v1/account", key=key)).json["settings"] == KEYWORD_DEFAULTS


async def test_patch_settings_merges_and_null_removes(api, account):
    key = account["api_key"]
    url = "http://127.0.0.1:9/hook"  # the test settings allow private webhooks
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": url}, key=key)
    assert r.code == 200 and r.json == {"customChannelWebhookUrl": url, **KEYWORD_DEFAULTS}
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"contact.created": url}}, key=key)
    assert r.json == {"customChannelWebhookUrl": url, "notificationUrls": {"contact.created": url}, **KEYWORD_DEFAULTS}
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": None}, key=key)
    assert r.json == {"notificationUrls": {"contact.created": url}, **KEYWORD_DEFAULTS}
    assert (await api.get("/v1/account", key=key)).json["settings"] == r.json


async def test_settings_are_per_account(api, account, other_account):
    """Tenancy: another account's key sees, changes and learns nothing."""
    a, b = account, other_account
    await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "http://127.0.0.1:9/a"}, key=a["api_key"])
    rb = await api.get("/v1/account", key=b["api_key"])
    assert rb.json["id"] == b["account_id"] and rb.json["settings"] == KEYWORD_DEFAULTS


async def test_webhook_secret_rotation_keeps_previous_for_overlap(api, account, services, io_loop):
    from services import accounts
    key = account["api_key"]
    first = (await api.get("/v1/account/webhook-secret", key=key)).json
    assert first["secret"].startswith("whsec_") and first["previousSecretExpiresAt"] is None
    rotated = await api.post("/v1/account/webhook-secret/rotate", key=key)
    assert rotated.code == 200
    second = rotated.json
    assert second["secret"] != first["secret"] and second["previousSecretExpiresAt"]
    assert (await api.get("/v1/account/webhook-secret", key=key)).json == second
    row = await accounts.get_account(services.db, account["account_id"])
    assert accounts.signing_secrets(services.box, row) == [second["secret"], first["secret"]]
    # Encrypted at rest: the plaintext secret is nowhere in the row.
    assert second["secret"] not in str(row)


async def test_keys_are_stored_hashed(services, account, io_loop):
    dump = db_direct.dump_text(services)
    assert account["api_key"] not in dump
    from services.keys import hash_api_key
    assert hash_api_key(account["api_key"]) in dump


async def test_a_key_read_just_before_a_rotation_is_not_cached(services, account):
    """Issue 9: a lookup that read the account before a rotation committed must not cache it, or the old
    key would keep working until the next key change. (The rotation here is the registry's signal;
    the read in flight started before it.)"""
    import asyncio

    from services.keys import hash_api_key

    key_hash = hash_api_key(account["api_key"])
    registry = services.keys
    registry.changed()  # an empty cache: the lookup must read
    lookup = asyncio.ensure_future(registry.principal_for(key_hash))
    await asyncio.sleep(0)  # the lookup is now waiting for its read
    registry.changed()  # a rotation commits meanwhile
    assert (await lookup).account_id == account["account_id"]  # its own request was already under way
    assert registry.cached(key_hash) is None
    assert (await registry.principal_for(key_hash)).account_id == account["account_id"]  # the next reads again
    assert registry.cached(key_hash) is not None


# --- issue 27 items 4 and 5: the key in an Authorization header, keys out of the logs, Server ----------

async def test_key_as_authorization_bearer(api, account, agency, sub):
    """Beside ?apiKey= and x-api-key: query strings end up in proxy and browser logs. The credit endpoint
    stays header-only (docs/api.md#basics): Bearer counts there, the query parameter does not."""
    key = account["api_key"]
    for scheme in ("Bearer", "bearer"):
        r = await api.get("/v1/account", headers={"Authorization": f"{scheme} {key}"})
        assert r.code == 200 and r.json["id"] == account["account_id"], r.body
    for authorization in (f"Bearer {key}x", f"Basic {key}", "Bearer", "Bearer "):
        r = await api.get("/v1/account", headers={"Authorization": authorization})
        assert r.code == 401, authorization
    grant = {"email": sub["email"], "amount": 1}
    r = await api.post("/v1/subaccounts/credits", grant, headers={"Authorization": f"Bearer {agency['api_key']}"})
    assert r.code == 200, r.body
    r = await api.post("/v1/subaccounts/credits", grant, key=agency["api_key"])  # ?apiKey=: not here
    assert r.code == 401
    assert "Authorization: Bearer" in r.json["error"]["message"]


async def test_every_answer_says_server_parley_without_a_version(api, account):
    """Tornado's default named itself and its version on every answer."""
    for path in (f"/v1/account?apiKey={account['api_key']}", "/v1/account", "/nope", "/login",
                 "/static/parley.css", "/v1/openapi.json"):
        r = await api.client.fetch(path, raise_error=False)
        assert r.headers["Server"] == "Parley", (path, r.code)


def test_api_keys_never_reach_the_log_in_any_form(tmp_path):
    """The real server at --log-level debug: a key in ?apiKey= (any case, percent-encoded), in another
    parameter, in the path, in the headers, right or wrong, leaves no trace in its log."""
    data_dir = tmp_path / "data"
    with ParleyProcess(data_dir, "--log-level", "debug", http=False) as server:
        key = server.first_run["api_key"]
        encoded = "".join(f"%{b:02X}" for b in key.encode())
        with server.client() as client:
            for path in (f"/v1/account?apiKey={key}", f"/v1/account?APIKEY={key}x", f"/v1/account?apiK%65y={key}",
                         f"/v1/account?apiKey={encoded}", f"/v1/account?key={key}", f"/v1/{key}",
                         f"/v1/{encoded}?x=1", f"/v1/account?note={encoded}&apiKey=1", f"/login?next=/{key}"):
                client.get(path)
            client.post(f"/v1/contacts?apiKey={key}", content=b"{not json")
            client.get("/v1/account", headers={"x-api-key": key + "x"})
            client.get("/v1/account", headers={"Authorization": f"Bearer {key}"})
            client.request("BREW", f"/v1/account?apiKey={key}")
        server.stop()
    logged = server.log.name and open(server.log.name, encoding="utf-8", errors="replace").read()
    assert "GET /v1/account" in logged  # the access log is there, at debug level
    for form in (key, key[3:], encoded, key[3:].lower(), hash_api_key(key)):
        assert form not in logged
