"""Users and roles (issue 21): invite through a one-time link, change role, name and active over the API
and on the Users page; deactivating ends the user's sessions at once; the account keeps an active owner;
another account's key sees and changes nothing."""

import re
import sqlite3

import pytest

from storage.db import migrate
from tests import db_direct
from tests.migration_helpers import database_before
from tests.team_users import NEW_PASSWORD, accept, invite

from tests.ui_helpers import FormClient

async def test_invite_then_the_invitee_signs_in_through_the_link(api, http_server_client, ui_account):
    key = ui_account["api_key"]
    user = await invite(api, key, "Sam@Acme.example", name="Sam")
    assert (user["email"], user["name"], user["role"], user["active"]) == ("sam@acme.example", "Sam", "agent", True)
    assert "/invite/" in user["signInUrl"] and user["signInExpiresAt"]
    sam = await accept(http_server_client, user["signInUrl"])
    assert (await sam.get("/inbox")).code == 200
    again = FormClient(http_server_client)
    assert (await again.get(user["signInUrl"][user["signInUrl"].index("/invite/"):])).code == 404  # spent
    assert (await again.login("sam@acme.example", NEW_PASSWORD)).code == 303
    listed = (await api.get("/v1/users", key=key)).json["data"]
    assert [(u["email"], u["role"]) for u in listed] == [(ui_account["email"], "owner"), ("sam@acme.example", "agent")]


async def test_an_invitation_is_pending_until_used_and_a_new_link_replaces_the_first(
        api, http_server_client, signed_in, ui_account):
    """Issue 43 §11: invitationPending until the invitee chooses a password; the Users page's "New link" (POST
    /users/{id}/invite-link) makes a new link and the first one dies; after acceptance it is refused (409)."""
    key = ui_account["api_key"]
    user = await invite(api, key, "pat@acme.example")
    assert user["invitationPending"] is True
    [owner, pat] = (await api.get("/v1/users", key=key)).json["data"]
    assert (owner["invitationPending"], pat["invitationPending"]) == (False, True)
    page = (await signed_in.get("/users")).text
    row = page[page.index(f'id="user-{user["id"]}"'):]
    row = row[:row.index("</tr>")]
    assert "Invitation pending" in row and ">Active<" not in row and f'action="/users/{user["id"]}/invite-link"' in row
    r = await signed_in.post(f"/users/{user['id']}/invite-link", {})
    assert r.code == 200 and "A new sign-in link for pat@acme.example" in r.text
    new_url = re.search(r'id="invite-link"[^>]*value="([^"]+)"', r.text).group(1)
    assert new_url != user["signInUrl"]
    assert (await FormClient(http_server_client).get(user["signInUrl"][user["signInUrl"].index("/invite/"):])).code \
        == 404  # the first link died
    await accept(http_server_client, new_url)
    assert (await api.get(f"/v1/users/{user['id']}", key=key)).json["invitationPending"] is False
    r = await signed_in.post(f"/users/{user['id']}/invite-link", {})
    assert r.code == 409 and "accepted the invitation already" in r.text


async def test_an_invited_user_cannot_sign_in_before_choosing_a_password(api, browser, ui_account):
    await invite(api, ui_account["api_key"], "new@acme.example")
    assert (await browser.login("new@acme.example", "!invited")).code == 401


async def test_bad_input_names_the_field_and_changes_nothing(api, ui_account, services):
    key = ui_account["api_key"]
    for body, field in (({"email": "not-an-email", "role": "agent"}, "email"),
                        ({"email": "a@acme.example", "role": "boss"}, "role"),
                        ({"email": "a@acme.example"}, "role"),
                        ({"email": "a@acme.example", "role": "agent", "extra": 1}, "extra")):
        r = await api.post("/v1/users", body, key=key)
        assert r.code == 400 and field in r.json["error"]["message"], r.body
    r = await api.post("/v1/users", {"email": ui_account["email"], "role": "agent"}, key=key)
    assert r.code == 409 and "email" in r.json["error"]["message"]
    user = await invite(api, key, "b@acme.example")
    for body, field in (({"role": "boss"}, "role"), ({"active": "no"}, "active"), ({}, "")):
        r = await api.patch(f"/v1/users/{user['id']}", body, key=key)
        assert r.code == 400 and field in r.json["error"]["message"], r.body
    assert db_direct.value(services, "SELECT COUNT(*) FROM users") == 2


async def test_the_last_active_owner_cannot_be_demoted_or_deactivated(api, ui_account):
    key = ui_account["api_key"]
    owner = (await api.get("/v1/users", key=key)).json["data"][0]
    for body, field in (({"role": "admin"}, "role"), ({"active": False}, "active")):
        r = await api.patch(f"/v1/users/{owner['id']}", body, key=key)
        assert (r.code, r.json["error"]["code"]) == (409, "LAST_OWNER") and field in r.json["error"]["message"]
    second = await invite(api, key, "co@acme.example", role="owner")
    r = await api.patch(f"/v1/users/{owner['id']}", {"role": "admin"}, key=key)
    assert r.code == 200 and r.json["role"] == "admin"
    r = await api.patch(f"/v1/users/{second['id']}", {"active": False}, key=key)
    assert r.code == 409  # now it is the last one


async def test_another_account_sees_and_changes_nothing(api, ui_account, other_account):
    user = await invite(api, ui_account["api_key"], "c@acme.example")
    other = other_account["api_key"]
    assert (await api.get("/v1/users", key=other)).json["data"] == []
    assert (await api.get(f"/v1/users/{user['id']}", key=other)).code == 404
    r = await api.patch(f"/v1/users/{user['id']}", {"role": "admin"}, key=other)
    assert r.code == 404 and r.json["error"]["code"] == "USER_NOT_FOUND"
    assert (await api.get(f"/v1/users/{user['id']}", key=ui_account["api_key"])).json["role"] == "agent"


async def test_deactivating_ends_the_users_session_at_once_and_audits(api, http_server_client, ui_account):
    key = ui_account["api_key"]
    user = await invite(api, key, "d@acme.example")
    agent = await accept(http_server_client, user["signInUrl"])
    assert (await agent.get("/inbox")).code == 200
    r = await api.patch(f"/v1/users/{user['id']}", {"active": False}, key=key)
    assert r.code == 200 and r.json["active"] is False
    refused = await agent.get("/inbox")
    assert refused.code == 302 and refused.headers["Location"].startswith("/login")
    assert (await FormClient(http_server_client).login("d@acme.example", NEW_PASSWORD)).code == 401
    actions = [(e["action"], e["detail"]) for e in (await api.get("/v1/audit", key=key)).json["data"]]
    assert actions[0] == ("user.updated", {"email": "d@acme.example", "active": [True, False]})
    assert actions[1][0] == "user.invited"
    assert (await api.patch(f"/v1/users/{user['id']}", {"active": True}, key=key)).code == 200
    assert (await FormClient(http_server_client).login("d@acme.example", NEW_PASSWORD)).code == 303


async def test_the_users_page_invites_changes_role_and_deactivates(signed_in, api, ui_account, http_server_client):
    page = await signed_in.get("/users")
    assert page.code == 200 and ui_account["email"] in page.text
    r = await signed_in.post("/users", {"email": "e@acme.example", "name": "Eve", "role": "agent"})
    assert r.code == 201 and "/invite/" in r.text and 'id="invite-link"' in r.text
    r = await signed_in.post("/users", {"email": "bad", "name": "", "role": "agent"})
    assert r.code == 400 and "email" in r.text
    user = next(u for u in (await api.get("/v1/users", key=ui_account["api_key"])).json["data"]
                if u["email"] == "e@acme.example")
    r = await signed_in.post(f"/users/{user['id']}", {"role": "admin"})
    assert (r.code, r.headers["Location"]) == (303, "/users")
    r = await signed_in.post(f"/users/{user['id']}", {"active": "0"})
    assert r.code == 303
    user = (await api.get(f"/v1/users/{user['id']}", key=ui_account["api_key"])).json
    assert (user["role"], user["active"]) == ("admin", False)
    assert (await signed_in.post(f"/users/{user['id']}", {"role": "admin"}, xsrf=False)).code == 403


async def test_an_admin_cannot_touch_owners_or_make_one(api, http_server_client, ui_account):
    key = ui_account["api_key"]
    admin_user = await invite(api, key, "adm@acme.example", role="admin")
    admin = await accept(http_server_client, admin_user["signInUrl"])
    owner_id = (await api.get("/v1/users", key=key)).json["data"][0]["id"]
    r = await admin.post(f"/users/{owner_id}", {"active": "0"})
    assert r.code == 403 and "owner" in r.text
    r = await admin.post("/users", {"email": "x@acme.example", "name": "", "role": "owner"})
    assert r.code == 403
    r = await admin.post("/users", {"email": "y@acme.example", "name": "", "role": "agent"})
    assert r.code == 201
    assert 'value="owner"' not in r.text  # the role lists offer no owner
    roles = {u["email"]: (u["role"], u["active"]) for u in (await api.get("/v1/users", key=key)).json["data"]}
    assert roles[ui_account["email"]] == ("owner", True) and "x@acme.example" not in roles


def test_migration_0221_makes_the_first_user_owner_and_the_others_admins(tmp_path, monkeypatch):
    """Users from before roles: is_owner = 1 becomes owner; any other user could do everything, so admin."""
    cx = database_before(tmp_path, monkeypatch, 221)
    try:
        cx.executemany("INSERT INTO users (id, account_id, email, password_hash, is_owner, created_at)"
                       " VALUES (?, 'acc_1', ?, 'x', ?, '2026-01-01T00:00:00.000Z')",
                       [("usr_1", "a@x.example", 1), ("usr_2", "b@x.example", 0)])
        migrate(cx)
        rows = [tuple(r) for r in cx.execute("SELECT id, role, active, name FROM users ORDER BY id")]
        assert rows == [("usr_1", "owner", 1, None), ("usr_2", "admin", 1, None)]
    finally:
        cx.close()


def test_migration_0390_unassigns_what_users_deactivated_before_it_still_hold(tmp_path, monkeypatch):
    """Deactivated before the deactivation unassigned: their open, pending and snoozed conversations go back to
    the queue; a resolved one keeps its assignee, and an active user's stay theirs."""
    cx = database_before(tmp_path, monkeypatch, 390)
    try:
        cx.executemany("INSERT INTO users (id, account_id, email, password_hash, is_owner, active, created_at)"
                       " VALUES (?, 'acc_1', ?, 'x', 0, ?, '2026-01-01T00:00:00.000Z')",
                       [("usr_gone", "g@x.example", 0), ("usr_here", "h@x.example", 1)])
        cx.executemany("INSERT INTO conversations (account_id, contact_id, last_message_id, last_message_at,"
                       " last_direction, last_preview, status, assignee_user_id) VALUES ('acc_1', ?, ?,"
                       " '2026-01-01T00:00:00.000Z', 'inbound', 'hi', ?, ?)",
                       [(f"ct_{n}", f"msg_{n}", status, user) for n, (status, user) in enumerate(
                           [("open", "usr_gone"), ("pending", "usr_gone"), ("snoozed", "usr_gone"),
                            ("resolved", "usr_gone"), ("open", "usr_here")])])
        migrate(cx)
        rows = [tuple(r) for r in cx.execute("SELECT status, assignee_user_id FROM conversations ORDER BY contact_id")]
        assert rows == [("open", None), ("pending", None), ("snoozed", None), ("resolved", "usr_gone"),
                        ("open", "usr_here")]
    finally:
        cx.close()


async def test_a_login_changes_unique_and_the_session_stays(api, http_server_client, ui_account, other_account):
    """Issue 43 §3: admin@localhost could not change. PATCH {"email"} changes a login: unique in the account
    (409 naming the conflict, nothing changed; issue 36 §5: another account's user's email is no conflict, and
    is not told of); the user's session stays; the new login signs in."""
    key = ui_account["api_key"]
    user = await invite(api, key, "e@acme.example")
    agent = await accept(http_server_client, user["signInUrl"])
    taken = await api.patch(f"/v1/users/{user['id']}", {"email": ui_account["email"]}, key=key)
    assert taken.code == 409 and taken.json["error"]["message"] == (
        f"email {ui_account['email']} is already a user of this account")
    elsewhere = await api.patch(f"/v1/users/{user['id']}", {"email": other_account["email"]}, key=key)
    assert elsewhere.code == 200 and elsewhere.json["email"] == other_account["email"]
    assert (await api.patch(f"/v1/users/{user['id']}", {"email": " "}, key=key)).code == 400
    r = await api.patch(f"/v1/users/{user['id']}", {"email": "Erin@Acme.example"}, key=key)
    assert r.code == 200 and r.json["email"] == "erin@acme.example"
    assert (await agent.get("/inbox")).code == 200  # the same person, still signed in
    assert (await FormClient(http_server_client).login("e@acme.example", NEW_PASSWORD)).code == 401
    assert (await FormClient(http_server_client).login("erin@acme.example", NEW_PASSWORD)).code == 303
    # The owner's login is the account's email too: both move, and the old one is free again.
    owner = (await api.get("/v1/users", key=key)).json["data"][0]
    r = await api.patch(f"/v1/users/{owner['id']}", {"email": "boss@acme.example"}, key=key)
    assert r.code == 200 and (await api.get("/v1/account", key=key)).json["email"] == "boss@acme.example"
    again = await api.patch(f"/v1/users/{user['id']}", {"email": ui_account["email"]}, key=key)
    assert again.code == 200
    assert (await api.get("/v1/account", key=other_account["api_key"])).json["email"] == other_account["email"]


async def test_the_account_is_renamed(api, ui_account, other_account):
    """Issue 43 §3: PATCH /v1/account {"name"}; an empty name is 400 naming the field and changes nothing."""
    key = ui_account["api_key"]
    r = await api.patch("/v1/account", {"name": "  Bakery Bergmann "}, key=key)
    assert r.code == 200 and r.json["name"] == "Bakery Bergmann"
    assert (await api.get("/v1/account", key=key)).json["name"] == "Bakery Bergmann"
    empty = await api.patch("/v1/account", {"name": " "}, key=key)
    assert empty.code == 400 and "name" in empty.json["error"]["message"]
    assert (await api.get("/v1/account", key=key)).json["name"] == "Bakery Bergmann"
    assert (await api.get("/v1/account", key=other_account["api_key"])).json["name"] != "Bakery Bergmann"
    [entry, *_] = (await api.get("/v1/audit", key=key)).json["data"]
    assert entry["action"] == "account.renamed" and entry["detail"]["name"][1] == "Bakery Bergmann"


async def test_the_settings_page_renames_the_account(signed_in, api, ui_account):
    """Issue 43 §3: Settings shows the name in a form that renames the account; an empty one is refused there."""
    page = await signed_in.get("/settings")
    assert 'action="/settings/account-name"' in page.text
    r = await signed_in.post("/settings/account-name", {"name": "Bakery Bergmann"})
    assert r.code == 303 and r.headers["Location"] == "/settings"
    assert 'value="Bakery Bergmann"' in (await signed_in.get("/settings")).text
    refused = await signed_in.post("/settings/account-name", {"name": "  "})
    assert refused.code == 400 and "name is required" in refused.text
    assert (await api.get("/v1/account", key=ui_account["api_key"])).json["name"] == "Bakery Bergmann"


async def test_the_assignee_menu_names_people_by_name(signed_in, api, ui_account):
    """Issue 43 §3: the inbox's assignee menu showed logins; a person with a name is shown by it."""
    sam = await invite(api, ui_account["api_key"], "sam@acme.example", name="Sam Baker")
    page = (await signed_in.get("/inbox")).text
    assert f'<option value="assign:{sam["id"]}">Assign to Sam Baker</option>' in page


def test_migration_0480_keeps_every_user_and_makes_emails_unique_per_account(tmp_path, monkeypatch):
    cx = database_before(tmp_path, monkeypatch, 480)
    try:
        cx.executemany("INSERT INTO accounts (id, name, email, type, webhook_secret, created_at) VALUES"
                       " (?, ?, ?, 'standard', 's', '2026-01-01T00:00:00.000Z')",
                       [("acc_1", "One", "one@x.example"), ("acc_2", "Two", "two@x.example")])
        cx.executemany("INSERT INTO users (id, account_id, email, password_hash, is_owner, role, name, created_at)"
                       " VALUES (?, ?, ?, 'h', ?, ?, ?, '2026-01-01T00:00:00.000Z')",
                       [("usr_1", "acc_1", "one@x.example", 1, "owner", "Uno"),
                        ("usr_2", "acc_2", "two@x.example", 1, "owner", None)])
        cx.execute("INSERT INTO sessions (id_hash, user_id, account_id, created_at, expires_at) VALUES"
                   " ('h1', 'usr_1', 'acc_1', '2026-01-01T00:00:00.000Z', '2099-01-01T00:00:00.000Z')")
        cx.execute("PRAGMA foreign_keys=ON")
        migrate(cx)
        rows = [tuple(r) for r in cx.execute("SELECT id, account_id, email, role, name, active, removed_at"
                                             " FROM users ORDER BY id")]
        assert rows == [("usr_1", "acc_1", "one@x.example", "owner", "Uno", 1, None),
                        ("usr_2", "acc_2", "two@x.example", "owner", None, 1, None)]
        assert cx.execute("PRAGMA foreign_key_check").fetchall() == []
        cx.execute("INSERT INTO users (id, account_id, email, password_hash, created_at) VALUES"
                   " ('usr_3', 'acc_2', 'one@x.example', 'h', 'now')")  # the same person in another account
        with pytest.raises(sqlite3.IntegrityError):
            cx.execute("INSERT INTO users (id, account_id, email, password_hash, created_at) VALUES"
                       " ('usr_4', 'acc_2', 'one@x.example', 'h', 'now')")
        with pytest.raises(sqlite3.IntegrityError):  # references to users(id) still hold
            cx.execute("INSERT INTO sessions (id_hash, user_id, account_id, created_at, expires_at) VALUES"
                       " ('h2', 'usr_nobody', 'acc_1', 'now', 'then')")
    finally:
        cx.close()
