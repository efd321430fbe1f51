"""Several named API keys per account (issue 44 §4): GET/POST /v1/account/api-keys, DELETE …/{id}; the secret
shown once, keys stored hashed, last use written at most once a minute, audited, scoped to the account; a key
rotation under load fails no request made with a key that was valid at the time. On both databases."""
import asyncio

from services import keys
from storage import db as db_module
from storage.db import fetch_all

KEYS = "/v1/account/api-keys"


async def create(api, key, name):
    r = await api.post(KEYS, {"name": name}, key=key)
    assert r.code == 201, r.body
    return r.json


async def wait_for(predicate, timeout=10.0):
    for _ in range(int(timeout / 0.05)):
        if await predicate():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_new_key_is_live_beside_the_old_one_until_that_is_revoked(services, api, account):
    old = account["api_key"]
    r = await api.get(KEYS, key=old)
    assert r.code == 200, r.body
    [default] = r.json["data"]
    assert default["name"] == "Default" and old.startswith(default["prefix"]) and "key" not in default

    made = await create(api, old, "CRM bridge")
    assert made["key"].startswith(made["prefix"]) and made["name"] == "CRM bridge" and made["lastUsedAt"] is None
    stored = await services.db.read(fetch_all, "SELECT key_hash FROM api_keys WHERE id = ?", (made["id"],))
    assert [row["key_hash"] for row in stored] == [keys.hash_api_key(made["key"])]  # hashed, never the key
    listed = (await api.get(KEYS, key=made["key"])).json["data"]
    assert [k["id"] for k in listed] == [default["id"], made["id"]] and all("key" not in k for k in listed)
    assert (await api.get("/v1/account", key=old)).code == 200  # both live

    r = await api.delete(f"{KEYS}/{default['id']}", key=made["key"])
    assert r.code == 200 and r.json["id"] == default["id"], r.body
    assert (await api.get("/v1/account", key=old)).code == 401  # dead at once
    assert (await api.get("/v1/account", key=made["key"])).code == 200
    r = await api.delete(f"{KEYS}/{made['id']}", key=made["key"])
    assert r.code == 409 and "last key" in r.json["error"]["message"]

    audit = (await api.get("/v1/audit", key=made["key"])).json["data"]
    actions = [(e["action"], e["subjectId"], e["detail"].get("name")) for e in audit]
    assert ("api_key.created", made["id"], "CRM bridge") in actions
    assert ("api_key.revoked", default["id"], "Default") in actions


async def test_last_use_is_written_at_most_once_a_minute(services, api, account):
    key = account["api_key"]
    [default] = (await api.get(KEYS, key=key)).json["data"]

    async def last_used():
        rows = await services.db.read(fetch_all, "SELECT last_used_at FROM api_keys WHERE id = ?", (default["id"],))
        return rows[0]["last_used_at"]
    assert await wait_for(last_used)
    first = await last_used()
    for _ in range(5):
        assert (await api.get("/v1/account", key=key)).code == 200
    await asyncio.sleep(0.2)
    assert await last_used() == first  # the same minute: no write per request
    assert (await api.get(KEYS, key=key)).json["data"][0]["lastUsedAt"] == first


async def test_another_accounts_key_sees_and_revokes_nothing(api, account, other_account):
    mine = await create(api, account["api_key"], "mine")
    theirs = (await api.get(KEYS, key=other_account["api_key"])).json["data"]
    assert mine["id"] not in [k["id"] for k in theirs] and len(theirs) == 1
    r = await api.delete(f"{KEYS}/{mine['id']}", key=other_account["api_key"])
    assert r.code == 404, r.body
    assert (await api.get("/v1/account", key=mine["key"])).code == 200


async def test_bad_names_are_400_naming_the_field_and_store_nothing(services, api, account):
    key = account["api_key"]
    for body in ({}, {"name": ""}, {"name": "   "}, {"name": "x" * 101}, {"name": 5}, {"name": "ok", "extra": 1}):
        r = await api.post(KEYS, body, key=key)
        assert r.code == 400, (body, r.body)
        assert ("extra" if "extra" in body else "name") in r.json["error"]["message"], (body, r.json)
    assert len((await api.get(KEYS, key=key)).json["data"]) == 1


async def test_rotation_under_load_fails_no_request_made_with_a_valid_key(services, api, account):
    """Clients keep calling with the old key while a new key is created; they move to it, and the old key is
    revoked once no request with it is in flight: every request, before, during and after, succeeds. The old
    key fails at once afterwards."""
    state = {"key": account["api_key"], "in_flight": {}, "stop": False}
    results = []

    async def client():
        while not state["stop"]:
            key = state["key"]
            state["in_flight"][key] = state["in_flight"].get(key, 0) + 1
            try:
                r = await api.get("/v1/account", key=key, query_key=False)
            finally:
                state["in_flight"][key] -= 1
            results.append((key, r.code))

    clients = [asyncio.ensure_future(client()) for _ in range(8)]
    assert await wait_for(lambda: _true(len(results) >= 20), timeout=120)
    new = await create(api, state["key"], "rotated")  # made while the old key is under load
    old, state["key"] = state["key"], new["key"]
    assert await wait_for(lambda: _true(state["in_flight"].get(old, 0) == 0), timeout=120)
    old_id = next(k["id"] for k in (await api.get(KEYS, key=new["key"])).json["data"] if k["name"] == "Default")
    assert (await api.delete(f"{KEYS}/{old_id}", key=new["key"])).code == 200
    count = len(results)
    assert await wait_for(lambda: _true(len(results) >= count + 20), timeout=120)
    state["stop"] = True
    await asyncio.gather(*clients)

    assert [r for r in results if r[1] != 200] == []
    assert {k for k, _ in results} == {old, new["key"]} and len(results) >= 60
    assert (await api.get("/v1/account", key=old, query_key=False)).code == 401


async def _true(value):
    return value


async def test_the_settings_page_lists_creates_and_revokes_keys(signed_in, api, ui_account, other_account):
    """Settings > API Key: every key with its name, prefix, created and last-used time; Create shows the new
    key once; Revoke ends one key (the others live on); another account's key id is refused."""
    old = ui_account["api_key"]
    page = await signed_in.get("/settings")
    assert page.code == 200 and 'id="api-keys"' in page.text and "Default" in page.text
    r = await signed_in.post("/settings/api-keys", {"name": "Zapier <b>"})
    assert r.code == 200, r.text
    new_key = r.text.split('id="new-api-key" class="secret" type="text" readonly value="')[1].split('"')[0]
    assert "Zapier &lt;b&gt;" in r.text and "works now, beside" in r.text
    assert (await api.get("/v1/account", key=new_key)).code == 200
    assert (await api.get("/v1/account", key=old)).code == 200
    page = await signed_in.get("/settings")
    assert new_key[:10] in page.text and new_key not in page.text  # shown once, then only its prefix
    listed = (await api.get(KEYS, key=new_key)).json["data"]
    old_id = next(k["id"] for k in listed if k["name"] == "Default")
    assert f"/settings/api-keys/{old_id}/revoke" in page.text

    theirs = (await api.get(KEYS, key=other_account["api_key"])).json["data"][0]["id"]
    r = await signed_in.post(f"/settings/api-keys/{theirs}/revoke")
    assert r.code == 404 and (await api.get("/v1/account", key=other_account["api_key"])).code == 200
    assert (await signed_in.post(f"/settings/api-keys/{old_id}/revoke", {}, xsrf=False)).code == 403
    r = await signed_in.post(f"/settings/api-keys/{old_id}/revoke")
    assert r.code == 303, r.text
    assert (await api.get("/v1/account", key=old)).code == 401
    assert (await api.get("/v1/account", key=new_key)).code == 200
    page = await signed_in.get("/settings")
    assert "is revoked" in page.text and old_id not in page.text
    r = await signed_in.post("/settings/api-keys", {"name": " "})
    assert r.code == 400 and "name is required" in r.text


async def test_the_key_made_before_keys_had_names_lives_on_as_default(services, api, account):
    """Migration 0446 on a database whose key was stored without id, name or last use: the key still works,
    is listed as Default, and is revoked like any other once a new one exists."""
    cx = services.db.connect_sync()
    try:  # the table as it was before 0446, holding the account's key
        cx.execute("DROP INDEX api_keys_id")
        for column in ("last_used_at", "name", "id"):
            cx.execute(f"ALTER TABLE api_keys DROP COLUMN {column}")
        cx.execute("DELETE FROM schema_migrations WHERE version = 446")
        db_module.migrate(cx)
    finally:
        cx.close()
    services.keys.changed()
    old = account["api_key"]
    [default] = (await api.get(KEYS, key=old)).json["data"]
    assert default["name"] == "Default" and default["id"].startswith("key_") and old.startswith(default["prefix"])
    made = await create(api, old, "next")
    assert (await api.delete(f"{KEYS}/{default['id']}", key=made["key"])).code == 200
    assert (await api.get("/v1/account", key=old)).code == 401
