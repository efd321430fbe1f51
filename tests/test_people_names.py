"""People by name, not email (issue 43 §3): a user sets their own name and sign-in email (Settings for owners and
admins, Your account for agents; a new email needs the current password), and the thread then credits their
replies and notes to that name, shows the assignee by it, and presence says who is viewing by it. A user without a
name is still shown by email. In-process on the test's database (SQLite or PostgreSQL); presence by name is in
test_presence.py."""
import re

from services import accounts, messaging
from storage.db import fetch_one
from tests.team_users import add_user
from tests.ui_helpers import PASSWORD, FormClient

WEBHOOK = "http://127.0.0.1:9/replies"  # the reply's outbox row is what counts here: no delivery runs


async def inbound(services, account_id, body):
    message, _ = await messaging.receive_inbound(services, account_id, message_sid="names-sid-1",
                                                 from_id="+14155552671", to_id="shop", body=body)
    return message


def _flash(html):
    found = re.search(r'class="flash[^"]*"[^>]*>(.*?)<', html, re.S)
    return found and found.group(1).strip()


async def test_a_user_names_themselves_and_the_thread_credits_replies_notes_and_assignment_by_name(
        signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    await accounts.update_settings(services.db, account_id, {"customChannelWebhookUrl": WEBHOOK})
    contact_id = (await inbound(services, account_id, body="Do you deliver?"))["contact_id"]

    # Without a name the thread shows the email, as before.
    r = await signed_in.post(f"/inbox/{contact_id}/reply", {"body": "Yes, on Fridays"})
    assert r.code == 303
    assert "User owner@acme.example" in (await signed_in.get(f"/inbox/{contact_id}")).text

    r = await signed_in.post("/settings/profile", {"name": "  Olive Baker ", "email": "owner@acme.example",
                                                   "current_password": ""})
    assert (r.code, r.headers["Location"]) == (303, "/settings")
    assert _flash((await signed_in.get("/settings")).text) == "Saved."

    me = await services.db.read(fetch_one, "SELECT id, name FROM users WHERE email = 'owner@acme.example'")
    assert me["name"] == "Olive Baker"
    assert (await signed_in.post(f"/inbox/{contact_id}/notes", {"body": "Friday route only"})).code == 303
    r = await signed_in.post(f"/inbox/{contact_id}/state", {"action": "assign", "assignee": me["id"]})
    assert r.code == 303, r.text

    page = (await signed_in.get(f"/inbox/{contact_id}")).text
    assert "User Olive Baker" in page and "Note by Olive Baker" in page
    assert "Assigned to <strong>Olive Baker</strong>" in page
    assert "owner@acme.example" not in page.split('id="profile"')[0].split("<main", 1)[-1]
    listing = (await signed_in.get("/inbox/conversations?filter=all")).text
    assert 'title="Assignee">Olive Baker<' in listing


async def test_a_new_sign_in_email_needs_the_current_password_and_must_be_free(signed_in, services, ui_account):
    await add_user(services, ui_account["account_id"], "sam@acme.example")
    r = await signed_in.post("/settings/profile", {"name": "Olive", "email": "olive@bakery.example",
                                                   "current_password": "wrong password"})
    assert r.code == 400 and "Current password is not right" in r.text
    assert 'value="olive@bakery.example"' in r.text and 'value="Olive"' in r.text  # kept as typed
    r = await signed_in.post("/settings/profile", {"name": "Olive", "email": "SAM@acme.example",
                                                   "current_password": PASSWORD})
    assert r.code == 409 and "sam@acme.example is already a user of this account" in r.text
    r = await signed_in.post("/settings/profile", {"name": "Olive", "email": "not an email",
                                                   "current_password": PASSWORD})
    assert r.code == 400 and "Email is not a valid email address" in r.text
    user = await services.db.read(fetch_one, "SELECT email, name FROM users WHERE id = (SELECT MIN(id) FROM users"
                                             " WHERE account_id = ? AND role = 'owner')", (ui_account["account_id"],))
    assert dict(user) == {"email": "owner@acme.example", "name": None}  # nothing changed by a refused form

    r = await signed_in.post("/settings/profile", {"name": "Olive", "email": "Olive@Bakery.example",
                                                   "current_password": PASSWORD})
    assert r.code == 303
    assert _flash((await signed_in.get("/settings")).text) == "Saved. You sign in as olive@bakery.example from now on."
    assert (await signed_in.get("/settings")).code == 200  # this session stays signed in
    again = FormClient(signed_in.client)
    assert (await again.login("olive@bakery.example")).code == 303
    assert (await FormClient(signed_in.client).login("owner@acme.example")).code != 303
    # The account's email was this login (the ops commands' --email): it follows.
    account = await accounts.get_account(services.db, ui_account["account_id"])
    assert account["email"] == "olive@bakery.example"


async def test_an_agent_names_themselves_on_your_account(services, ui_account, http_server_client):
    await add_user(services, ui_account["account_id"], "sam@acme.example")
    agent = FormClient(http_server_client)
    assert (await agent.login("sam@acme.example")).code == 303
    page = (await agent.get("/account")).text
    assert 'action="/settings/profile"' in page and 'id="profile-email"' in page
    r = await agent.post("/settings/profile", {"name": "Sam Porter", "email": "sam@acme.example",
                                               "current_password": ""})
    assert (r.code, r.headers["Location"]) == (303, "/account")
    assert "Sam Porter" in (await agent.get("/account")).text
    r = await agent.post("/settings/profile", {"name": "Sam Porter", "email": "sam@elsewhere.example",
                                               "current_password": ""})
    assert r.code == 400 and "Your account" in r.text and "needed to change the sign-in email" in r.text
