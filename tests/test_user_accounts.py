"""One person, several accounts (issue 36 §5): an email is unique per account, not per server. An invitation to an
address that is a user elsewhere works like any other and tells nothing; the person signs in once and chooses
among the accounts whose password matches, and switches between them (the session is in one at a time);
removing a user erases their email and name in that account (ids stay: "Removed user"), ends their sessions
there, and leaves their other accounts alone. Another account's key removes nothing. (The migration's test is in test_users.py, the browser's in
test_users_ui.py.)"""
from urllib.parse import unquote

import pytest

from services import accounts, messaging
from tests import db_direct
from tests.team_users import add_user
from tests.ui_helpers import PASSWORD, FormClient

PAT = "pat@agency.example"
PAT_PASSWORD = "pat's one passphrase"


@pytest.fixture
def bikes(io_loop, services):
    """A second account with an owner user who can sign in."""
    return io_loop.run_sync(lambda: accounts.create_account(
        services.db, services.box, services.keys, name="Bikes", email="owner@bikes.example", password=PASSWORD))


def user_ids_of(services, email):
    """{account_id: user id} of the email's users (removed ones have no email)."""
    return {r["account_id"]: r["id"] for r in db_direct.rows(services, "SELECT account_id, id FROM users WHERE email = ?",
                                                             email)}


def account_of(page_text):
    """The account name the navigation's switcher shows (None without a switcher)."""
    marker = 'id="switch-account" href="/accounts" title="Switch account">'
    if marker not in page_text:
        return None
    return page_text.split(marker, 1)[1].split("<", 1)[0]


async def test_an_invitation_to_an_address_of_another_account_works_and_tells_nothing(
        api, services, http_server_client, ui_account, bikes):
    await add_user(services, bikes["account_id"], PAT, "the bikes password", role="admin")
    key = ui_account["api_key"]
    fresh = await api.post("/v1/users", {"email": "nobody-yet@agency.example", "role": "agent"}, key=key)
    known = await api.post("/v1/users", {"email": " PAT@agency.example ", "role": "agent"}, key=key)
    owner_elsewhere = await api.post("/v1/users", {"email": bikes["email"], "role": "agent"}, key=key)
    assert fresh.code == known.code == owner_elsewhere.code == 201, known.body
    assert set(known.json) == set(fresh.json) and known.json["invitationPending"] is True
    assert "Bikes" not in known.body.decode() and bikes["account_id"] not in known.body.decode()
    # Within the account the address is taken: 409, naming this account only.
    again = await api.post("/v1/users", {"email": PAT, "role": "agent"}, key=key)
    assert again.code == 409 and again.json["error"]["message"] == f"email {PAT} is already a user of this account"
    # The Users page's invitation is the same: the link, no "already a user".
    owner = FormClient(http_server_client)
    assert (await owner.login(ui_account["email"])).code == 303
    page = await owner.post("/users", {"email": "owner@bikes.example", "name": "", "role": "agent"})
    assert page.code == 409 and "already a user of this account" in page.text and "Bikes" not in page.text
    # The invitation's link sets this account's password only: the bikes password still opens Bikes alone.
    token = known.json["signInUrl"].rsplit("/", 1)[1]
    invitee = FormClient(http_server_client)
    await invitee.get(f"/invite/{token}")
    r = await invitee.post(f"/invite/{token}", {"password": "the acme password", "password_again": "the acme password"})
    assert r.code == 303
    assert [m["account_id"] for m in await accounts.sign_in(services.db, PAT, "the bikes password")] == [
        bikes["account_id"]]
    assert [m["account_id"] for m in await accounts.sign_in(services.db, PAT, "the acme password")] == [
        ui_account["account_id"]]


async def test_one_person_signs_in_once_chooses_and_switches_each_page_scoped(
        services, http_server_client, ui_account, bikes):
    acme_id = await add_user(services, ui_account["account_id"], PAT, PAT_PASSWORD, role="admin")
    bikes_id = await add_user(services, bikes["account_id"], PAT, PAT_PASSWORD, role="admin")
    pat = FormClient(http_server_client)
    r = await pat.login(PAT, PAT_PASSWORD, next_url="/users")
    assert r.code == 303 and unquote(r.headers["Location"]) == "/accounts?next=/users"
    chooser = (await pat.get("/accounts")).text
    assert "Acme" in chooser and "Bikes" in chooser and acme_id in chooser and bikes_id in chooser
    first = await pat.get("/users")  # the session starts in the first account: Acme's users only
    assert ui_account["email"] in first.text and bikes["email"] not in first.text
    assert account_of(first.text).startswith("Acme")
    old_cookies = dict(pat.cookies)

    r = await pat.post("/accounts", {"user": bikes_id, "next": "/users"})
    assert r.code == 303 and r.headers["Location"] == "/users"
    page = await pat.get("/users")
    assert bikes["email"] in page.text and ui_account["email"] not in page.text and account_of(page.text) == "Bikes"
    stale = FormClient(http_server_client)
    stale.cookies = old_cookies  # the session it switched from is over, and so are forms of its pages
    assert (await stale.get("/users")).code == 302
    # Only the accounts this sign-in proved: not another user's membership.
    owner_of_acme = user_ids_of(services, ui_account["email"])[ui_account["account_id"]]
    refused = await pat.post("/accounts", {"user": owner_of_acme})
    assert refused.code == 404 and bikes["email"] in (await pat.get("/users")).text

    assert (await pat.post("/accounts", {"user": acme_id})).code == 303
    assert ui_account["email"] in (await pat.get("/users")).text


async def test_the_password_decides_which_accounts_a_sign_in_opens(services, http_server_client, ui_account, bikes):
    await add_user(services, ui_account["account_id"], PAT, "the acme password", role="agent")
    await add_user(services, bikes["account_id"], PAT, "the bikes password", role="agent")
    pat = FormClient(http_server_client)
    r = await pat.login(PAT, "the bikes password")
    assert r.code == 303 and r.headers["Location"] == "/inbox"  # one account: no chooser
    inbox = (await pat.get("/inbox")).text
    assert account_of(inbox) is None and "Acme" not in inbox
    assert "the only account this sign-in opens" in (await pat.get("/accounts")).text
    wrong = await FormClient(http_server_client).login(PAT, "neither password")
    unknown = await FormClient(http_server_client).login("nobody@agency.example", "neither password")
    assert wrong.code == unknown.code == 401 and wrong.text.count("Wrong email or password.") == 1


async def test_removing_a_user_erases_their_email_and_name_there_and_ends_their_sessions(
        api, services, http_server_client, ui_account, bikes):
    key, account_id = ui_account["api_key"], ui_account["account_id"]
    invited = await api.post("/v1/users", {"email": PAT, "name": "Pat Doe", "role": "agent"}, key=key)
    pat_id = invited.json["id"]
    token = invited.json["signInUrl"].rsplit("/", 1)[1]
    pat = FormClient(http_server_client)
    await pat.get(f"/invite/{token}")
    assert (await pat.post(f"/invite/{token}", {"password": PAT_PASSWORD, "password_again": PAT_PASSWORD})).code == 303
    await add_user(services, bikes["account_id"], PAT, PAT_PASSWORD)
    message, _ = await messaging.receive_inbound(services, account_id, message_sid="sid-1", from_id="+14155552671",
                                                 to_id="shop", body="Where is my order?")
    contact_id = message["contact_id"]
    assert (await pat.post(f"/inbox/{contact_id}/notes", {"body": "Checking the courier"})).code == 303
    assert (await api.patch(f"/v1/conversations/{contact_id}", {"assigneeUserId": pat_id}, key=key)).code == 200
    assert (await api.patch(f"/v1/users/{pat_id}", {"name": "Pat D."}, key=key)).code == 200

    r = await api.delete(f"/v1/users/{pat_id}", key=key)
    assert r.code == 200 and r.json == {"id": pat_id, "removed": True, "unassignedConversations": 1}
    assert (await pat.get("/inbox")).code == 302  # signed out of this account at once
    assert db_direct.rows(services, "SELECT email, name, active FROM users WHERE id = ?", pat_id) == [
        {"email": None, "name": None, "active": 0}]
    assert pat_id not in (await api.get("/v1/users", key=key)).body.decode()
    assert (await api.get(f"/v1/users/{pat_id}", key=key)).code == 404
    assert (await api.delete(f"/v1/users/{pat_id}", key=key)).code == 404
    audit = (await api.get("/v1/audit", key=key)).json["data"]
    assert "pat" not in str(audit).lower().replace(pat_id, "")  # neither email nor name; the id stays
    assert [e["subjectId"] for e in audit if e["action"] == "user.removed"] == [pat_id]
    owner = FormClient(http_server_client)
    assert (await owner.login(ui_account["email"])).code == 303
    thread = (await owner.get(f"/inbox/{contact_id}")).text
    assert "Note by Removed user" in thread and "Checking the courier" in thread and PAT not in thread
    # Their other account is theirs still; this one is not offered any more, and the address is free here.
    assert [m["account_id"] for m in await accounts.sign_in(services.db, PAT, PAT_PASSWORD)] == [bikes["account_id"]]
    assert (await api.post("/v1/users", {"email": PAT, "role": "agent"}, key=key)).code == 201


async def test_a_removal_ends_the_switch_to_that_account_and_the_session_there(
        api, services, http_server_client, ui_account, bikes):
    acme_id = await add_user(services, ui_account["account_id"], PAT, PAT_PASSWORD, role="admin")
    bikes_id = await add_user(services, bikes["account_id"], PAT, PAT_PASSWORD, role="admin")
    in_acme, in_bikes = FormClient(http_server_client), FormClient(http_server_client)
    for browser in (in_acme, in_bikes):
        assert (await browser.login(PAT, PAT_PASSWORD)).code == 303
    assert (await in_bikes.post("/accounts", {"user": bikes_id})).code == 303
    assert (await api.delete(f"/v1/users/{acme_id}", key=ui_account["api_key"])).code == 200
    assert (await in_acme.get("/inbox")).code == 302
    assert (await in_bikes.get("/inbox")).code == 200  # another account's session goes on
    assert (await in_bikes.post("/accounts", {"user": acme_id})).code == 404
    assert account_of((await in_bikes.get("/inbox")).text) is None  # nothing left to switch to


async def test_removal_follows_the_role_rules_and_stays_in_the_account(
        api, services, http_server_client, ui_account, bikes):
    key = ui_account["api_key"]
    owner_id = user_ids_of(services, ui_account["email"])[ui_account["account_id"]]
    admin_id = await add_user(services, ui_account["account_id"], "ada@acme.example", role="admin")
    agent_id = await add_user(services, ui_account["account_id"], "sam@acme.example", role="agent")
    # Another account's key: 404, nothing removed.
    assert (await api.delete(f"/v1/users/{agent_id}", key=bikes["api_key"])).code == 404
    last = await api.delete(f"/v1/users/{owner_id}", key=key)
    assert last.code == 409 and last.json["error"]["code"] == "LAST_OWNER"
    admin, agent = FormClient(http_server_client), FormClient(http_server_client)
    assert (await admin.login("ada@acme.example")).code == 303 and (await agent.login("sam@acme.example")).code == 303
    assert (await agent.post(f"/users/{admin_id}/remove")).code == 403
    assert (await admin.post(f"/users/{owner_id}/remove")).code == 403
    confirm = await admin.get(f"/users/{agent_id}/remove")
    assert confirm.code == 200 and "sam@acme.example" in confirm.text and 'id="confirm-remove"' in confirm.text
    r = await admin.post(f"/users/{agent_id}/remove")
    assert r.code == 303 and r.headers["Location"] == "/users"
    assert "sam@acme.example: removed from this account." in (await admin.get("/users")).text
    assert [u["id"] for u in (await api.get("/v1/users", key=key)).json["data"]] == [owner_id, admin_id]
    # The owner removes themselves once another owner is there.
    assert (await api.patch(f"/v1/users/{admin_id}", {"role": "owner"}, key=key)).code == 200
    owner = FormClient(http_server_client)
    assert (await owner.login(ui_account["email"])).code == 303
    assert (await owner.post(f"/users/{owner_id}/remove")).code == 303
    assert (await owner.get("/inbox")).code == 302
