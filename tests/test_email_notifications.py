"""Parley's mail to its people (issue 39), through real servers: aiosmtpd (mail_server) and pymap (imap_server).
- Agents choose to be emailed on a new conversation, a handoff, an assignment to them (services/agent_mail.py):
  each mail once, to the right agent only, none when not chosen, none for one's own action, none across accounts.
- A web visitor who left their email gets an agent's reply by mail when their chat did not show it, signed and
  threaded, and their answer by mail lands in the same conversation (services/visitor_mail.py).
- The mailbox import's state in GET /v1/account and on Settings > Email (services/mail_in.py).
In-process, on both databases."""
import asyncio
import inspect
import json
from datetime import timedelta
from email.message import EmailMessage

import pytest

from common.ids import utcnow
from services import accounts, mail_out
from storage.mail import VISITOR_MAIL_DELAY
from services.delivery import DeliveryWorker
from storage import messages as message_store
from storage.outbox import list_outbox
from tests.bot_helpers import BOT_SETTINGS, RULES, configure, say
from tests.mail_server import importing
from tests.team_users import PASSWORD, add_user
from tests.ui_helpers import FormClient
from tests.widget_helpers import Visitor, enable

pytestmark = pytest.mark.settings(**BOT_SETTINGS)

ADDRESS = "help@acme.example"
ALL = {"newConversation": True, "handoff": True, "assigned": True}
NONE = {"newConversation": False, "handoff": False, "assigned": False}


async def set_mailbox(services, account_id, smtp=None, imap=None):
    email = {"address": ADDRESS, **({"smtp": smtp} if smtp else {}), **({"imap": imap} if imap else {})}
    await accounts.update_settings(services.db, account_id, {"email": email}, box=services.box)


async def queued(services, account_id):
    """(to, what) of the account's agent mails in the outbox, in the order queued."""
    return [(json.loads(r["payload"])["to"], json.loads(r["payload"])["agent"]["kind"])
            for r in await list_outbox(services.db, account_id, kind="mail") if "agent" in r["payload"]]


async def choose(api, key, user_id, choice):
    r = await api.patch(f"/v1/users/{user_id}", {"emailNotifications": choice}, key=key)
    assert r.code == 200, r.body
    return r.json


async def wait_for(predicate, timeout=15.0):
    """Wait on a state (predicate() true, or an awaitable of true), looked at every 20 ms; AssertionError after
    timeout."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        done = predicate()
        if inspect.isawaitable(done):
            done = await done
        if done:
            return
        assert asyncio.get_running_loop().time() < deadline, "state not reached in time"
        await asyncio.sleep(0.02)


async def test_agents_are_emailed_once_about_what_they_chose(api, account, other_account, services, mail_server,
                                                           http_server_client):
    key, account_id = account["api_key"], account["account_id"]
    ann = await add_user(services, account_id, "ann@acme.example")
    bob = await add_user(services, account_id, "bob@acme.example")  # chose nothing (the default)
    kim = await add_user(services, other_account["account_id"], "kim@other.example")
    await set_mailbox(services, account_id, smtp=mail_server.settings())  # after the invitations: none mailed
    await set_mailbox(services, other_account["account_id"], smtp=mail_server.settings())
    assert (await choose(api, key, ann, ALL))["emailNotifications"] == ALL
    assert (await api.get(f"/v1/users/{bob}", key=key)).json["emailNotifications"] == NONE
    audited = (await api.get("/v1/audit", key=key)).json["data"][0]  # named as the API names them
    assert (audited["action"], audited["detail"]) == ("user.updated", {
        "email": "ann@acme.example", **{f"emailNotifications.{kind}": [False, True] for kind in ALL}})
    await choose(api, other_account["api_key"], kim, ALL)
    r = await api.patch(f"/v1/users/{ann}", {"emailNotifications": NONE}, key=other_account["api_key"])
    assert r.code == 404  # another account's key cannot see or change her

    await configure(api, key, {"active": True, "rules": RULES, "handoffKeywords": ["human"]})
    first = await say(api, services, key, "Hello, where is my order?", fromId="cust-1")
    await say(api, services, key, "It was due Monday.", fromId="cust-1")  # the same conversation: no mail
    assert await queued(services, account_id) == [("ann@acme.example", "newConversation")]
    handoff = await say(api, services, key, "a HUMAN please", fromId="cust-1")
    assert handoff["bot"]["outcome"] == "handoff"
    conversation = first["contactId"]
    r = await api.patch(f"/v1/conversations/{conversation}", {"assigneeUserId": ann}, key=key)  # by the API key
    assert r.code == 200, r.body
    r = await api.patch(f"/v1/conversations/{conversation}", {"status": "pending"}, key=key)  # not an assignment
    assert r.code == 200, r.body
    assert await queued(services, account_id) == [("ann@acme.example", kind)
                                                  for kind in ("newConversation", "handoff", "assigned")]

    # Her own action: Ann takes another conversation herself in the inbox; nobody is mailed about it.
    second = await say(api, services, key, "Hi again", fromId="cust-2")
    as_ann = FormClient(http_server_client)
    assert (await as_ann.login("ann@acme.example", PASSWORD)).code == 303
    await as_ann.get(f"/inbox/{second['contactId']}")
    r = await as_ann.post(f"/inbox/{second['contactId']}/state", {"action": "assign", "assignee": ann})
    assert r.code in (204, 303), r.text
    r = await api.get(f"/v1/conversations/{second['contactId']}", key=key)
    assert r.json["assigneeUserId"] == ann
    # Bob assigned by the API: he chose nothing.
    r = await api.patch(f"/v1/conversations/{second['contactId']}", {"assigneeUserId": bob}, key=key)
    assert r.code == 200
    mine = await queued(services, account_id)
    assert mine == [("ann@acme.example", kind) for kind in ("newConversation", "handoff", "assigned",
                                                            "newConversation")]

    # The other account's conversation mails its own user only, and this account's users nothing.
    await configure(api, other_account["api_key"], {"active": False})
    await say(api, services, other_account["api_key"], "Hello from elsewhere", fromId="cust-9")
    assert await queued(services, other_account["account_id"]) == [("kim@other.example", "newConversation")]
    assert await queued(services, account_id) == mine

    # Sent once, also by two delivery workers at once (two processes sharing the outbox).
    first_worker, second_worker = DeliveryWorker(services), DeliveryWorker(services)
    second_worker.owner = "another process"
    try:
        for _ in range(3):
            await asyncio.gather(first_worker.run_due(), second_worker.run_due())
    finally:
        await first_worker.stop()
        await second_worker.stop()
    mails = mail_server.wait_for(5)
    assert sorted(m["To"] for m in mails) == ["ann@acme.example"] * 4 + ["kim@other.example"]
    assert len({m["Message-ID"] for m in mails}) == 5
    to_ann = [m for m in mails if m["To"] == "ann@acme.example"]
    assert all(m["From"] == f"Account 1 <{ADDRESS}>" and m["Auto-Submitted"] == "auto-generated" for m in to_ann)
    assert sum("New conversation" in m["Subject"] for m in to_ann) == 2
    [assigned] = [m for m in to_ann if "assigned to you" in m["Subject"]]
    text = assigned.get_content()
    assert f"/inbox/{conversation}" in text and "a HUMAN please" in text and "assigned to you" in text
    [from_kim] = [m for m in mails if m["To"] == "kim@other.example"]
    assert "Hello from elsewhere" in from_kim.get_content() and "Account 1" not in from_kim.get_content()
    assert "HUMAN" not in from_kim.get_content() and f"/inbox/{conversation}" not in from_kim.get_content()
    assert [r["status"] for r in await list_outbox(services.db, account_id, kind="mail")] == ["sent"] * 4


async def test_automatic_assignment_mails_the_assignee_who_chose_it(api, account, services, mail_server):
    key, account_id = account["api_key"], account["account_id"]
    ann = await add_user(services, account_id, "ann@acme.example")
    bob = await add_user(services, account_id, "bob@acme.example")
    await set_mailbox(services, account_id, smtp=mail_server.settings())
    await choose(api, key, ann, {"assigned": True})
    await choose(api, key, bob, {"assigned": True})
    r = await api.patch(f"/v1/users/{bob}", {"available": False}, key=key)  # away: Ann gets them
    assert r.code == 200, r.body
    r = await api.patch("/v1/account/settings", {"assignment": {"mode": "round_robin", "awayAfterMinutes": None}},
                        key=key)
    assert r.code == 200, r.body
    await configure(api, key, {"active": False})
    new = await say(api, services, key, "Hello", fromId="cust-1")  # assigned with its message
    assert (await api.get(f"/v1/conversations/{new['contactId']}", key=key)).json["assigneeUserId"] == ann
    assert await queued(services, account_id) == [("ann@acme.example", "assigned")]
    r = await api.patch(f"/v1/conversations/{new['contactId']}", {"status": "resolved", "assigneeUserId": None},
                        key=key)
    assert r.code == 200, r.body
    await say(api, services, key, "Still there?", fromId="cust-1")  # reopened: given out again, to Ann
    assert (await api.get(f"/v1/conversations/{new['contactId']}", key=key)).json["assigneeUserId"] == ann
    assert await queued(services, account_id) == [("ann@acme.example", "assigned")] * 2
    # the Assigner's batch (storage/assignment.assign_queued_in_tx): a conversation that waited for someone goes to
    # Bob when he is back, and he gets the mail
    r = await api.patch(f"/v1/users/{ann}", {"available": False}, key=key)
    assert r.code == 200, r.body
    waited = await say(api, services, key, "Anyone?", fromId="cust-2")
    assert (await api.get(f"/v1/conversations/{waited['contactId']}", key=key)).json["assigneeUserId"] is None
    r = await api.patch(f"/v1/users/{bob}", {"available": True}, key=key)
    assert r.code == 200, r.body
    await services.assigner.round()
    assert (await api.get(f"/v1/conversations/{waited['contactId']}", key=key)).json["assigneeUserId"] == bob
    assert await queued(services, account_id) == [("ann@acme.example", "assigned")] * 2 + [("bob@acme.example",
                                                                                             "assigned")]
    assert await services.delivery.run_due() == 3
    assert sorted(m["To"] for m in mail_server.wait_for(3)) == ["ann@acme.example"] * 2 + ["bob@acme.example"]


async def test_a_preference_that_is_not_a_boolean_is_refused_and_nothing_changes(api, account, services):
    key, account_id = account["api_key"], account["account_id"]
    ann = await add_user(services, account_id, "ann@acme.example")
    await choose(api, key, ann, {"handoff": True})
    for bad, field in (({"assigned": "yes"}, "emailNotifications.assigned"),
                       ({"assigned": True, "handoff": 1}, "emailNotifications.handoff"),
                       ({"assigned": True, "sms": True}, "emailNotifications.sms"),
                       (True, "emailNotifications")):
        r = await api.patch(f"/v1/users/{ann}", {"emailNotifications": bad, "name": "Ann"}, key=key)
        assert r.code == 400, (bad, r.body)
        assert field in r.json["error"]["message"], (bad, r.json)
    user = (await api.get(f"/v1/users/{ann}", key=key)).json
    assert user["emailNotifications"] == {**NONE, "handoff": True} and user["name"] is None


async def test_every_user_sets_their_own_choice_on_their_page(api, services, ui_account, signed_in,
                                                              http_server_client):
    account_id = ui_account["account_id"]
    agent = await add_user(services, account_id, "sam@acme.example")
    as_agent = FormClient(http_server_client)
    assert (await as_agent.login("sam@acme.example", PASSWORD)).code == 303
    page = (await as_agent.get("/account")).text
    assert 'id="email-me"' in page and 'id="email-me-handoff"' in page
    r = await as_agent.post("/settings/email-me", {"handoff": "1", "assigned": "1"})
    assert r.code == 303, r.text
    assert 'id="email-me-handoff" name="handoff" type="checkbox" value="1" checked' in (await as_agent.get("/account")).text
    r = await signed_in.get("/settings")
    assert 'id="email-me"' in r.text and 'id="email-me-handoff" name="handoff" type="checkbox" value="1">' in r.text
    r = await signed_in.post("/settings/email-me", {"newConversation": "1"})  # the owner's own choice, not Sam's
    assert r.code == 303, r.text
    users = {u["email"]: u["emailNotifications"] for u in (await api.get("/v1/users", key=ui_account["api_key"])).json["data"]}
    assert users["sam@acme.example"] == {**NONE, "handoff": True, "assigned": True}
    assert users[ui_account["email"]] == {**NONE, "newConversation": True}
    assert agent


async def test_a_visitor_who_left_an_email_gets_a_reply_by_mail_and_answers_into_the_same_conversation(
        api, account, services, mail_server, imap_server):
    key, account_id = account["api_key"], account["account_id"]
    widget_id = await enable(api, account)
    await set_mailbox(services, account_id, smtp=mail_server.settings(), imap=imap_server.settings())
    async with importing(services, account_id) as box:
        visitor = Visitor(api, widget_id)
        r = await visitor.send("Do you ship to Norway?")
        assert r.code == 201, r.body
        r = await api.post(f"/widget/{widget_id}/email", {"email": "ada@example.com"}, headers=visitor.headers())
        assert r.code == 200, r.body
        visitor.token = r.json["token"]
        contact_id = (await api.get(f"/v1/messages/{(await visitor.history())['messages'][0]['id']}",
                                    key=key)).json["contactId"]
        r = await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "Yes, we do: 5 days."}, key=key)
        assert r.code == 201 and r.json["channel"] == "web", r.body
        reply_id = r.json["id"]

        # The visitor's chat is closed: nothing is sent at once (a chat that opens may still show it), then one mail.
        assert await services.delivery.run_due() == 0
        assert await services.delivery.run_due(utcnow() + VISITOR_MAIL_DELAY + timedelta(seconds=1)) == 1
        assert await services.delivery.run_due(utcnow() + 2 * VISITOR_MAIL_DELAY) == 0
        [mail] = mail_server.wait_for(1)
        key_ = mail_out.message_id_key(services.box)
        assert mail["To"] == "ada@example.com" and mail["From"] == f"Account 1 <{ADDRESS}>"
        assert mail_out.verified_message_id(key_, account_id, mail["Message-ID"].strip("<>")) == reply_id
        assert "Yes, we do: 5 days." in mail.get_content() and mail["Auto-Submitted"] is None
        assert "Reply to this email to write back" in mail.get_content()  # IMAP is set: the answer comes back

        # Her answer by mail, from her mail client: the same contact, the same conversation.
        answer = EmailMessage()
        answer["From"], answer["To"] = "Ada <ada@example.com>", ADDRESS
        answer["Subject"], answer["Message-ID"] = f"Re: {mail['Subject']}", "<answer-1@example.com>"
        answer["In-Reply-To"] = answer["References"] = mail["Message-ID"]
        answer.set_content("Great, I will order today.\n")
        await asyncio.to_thread(imap_server.append, answer)
        await wait_for(lambda: box.imported == 1)
        thread = await message_store.list_contact_messages(services.db, account_id, contact_id, limit=50)
        assert [(m["direction"], m["channel"], m["body"]) for m in sorted(thread, key=lambda m: m["id"])] == [
            ("inbound", "web", "Do you ship to Norway?"), ("outbound", "web", "Yes, we do: 5 days."),
            ("inbound", "email", "Great, I will order today.")]
        assert len((await api.get("/v1/contacts", key=key)).json["data"]) == 1  # no contact for her address

        # Her chat is open when the next reply comes: it shows it, and no mail goes.
        cursor = (await visitor.history())["cursor"]
        r = await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "Thanks!", "channel": "web"}, key=key)
        assert r.code == 201, r.body
        shown = await visitor.updates(cursor, wait=5)
        assert [m["body"] for m in shown.json["messages"]] == ["Thanks!"]
        assert await services.delivery.run_due(utcnow() + 2 * VISITOR_MAIL_DELAY) == 0
        # Opted out: no mail, even with the chat closed.
        r = await api.patch(f"/v1/contacts/{contact_id}", {"optedOut": True}, key=key)
        assert r.code == 200, r.body
        r = await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "One more thing", "channel": "web"}, key=key)
        assert r.code == 201, r.body
        assert await services.delivery.run_due(utcnow() + 2 * VISITOR_MAIL_DELAY) == 0
        assert len(mail_server.messages) == 1
        assert [r["webhook_id"] for r in await list_outbox(services.db, account_id, kind="mail")] == [
            f"vmail_{reply_id}"]
    # Erased, she leaves nothing in Parley's mail either (its list showed her address).
    r = await api.delete(f"/v1/contacts/{contact_id}", key=key)
    assert r.code == 200, r.body
    assert await list_outbox(services.db, account_id, kind="mail") == []


async def test_the_import_status_after_a_good_and_a_failed_connection(api, ui_account, other_account, services,
                                                                      imap_server, signed_in):
    key, account_id = ui_account["api_key"], ui_account["account_id"]
    await set_mailbox(services, account_id, imap=imap_server.settings())

    async def status():
        r = await api.get("/v1/account", key=key)
        assert r.code == 200, r.body
        return r.json["settings"]["email"]["importStatus"]

    assert await status() is None  # before the first look
    async with importing(services, account_id) as box:
        good = await status()
        assert good["ok"] is True and good["error"] is None and good["lastError"] is None
        assert good["idle"] is True and good["checkedAt"] and good["lastImport"] is None
        assert good["mailbox"] == f"127.0.0.1:{imap_server.port}/demouser/INBOX" and good["lastUid"] >= 0
        mail = EmailMessage()
        mail["From"], mail["To"], mail["Subject"] = "ann@customer.example", ADDRESS, "Hello"
        mail["Message-ID"] = "<status-1@customer.example>"
        mail.set_content("Hello")
        await asyncio.to_thread(imap_server.append, mail)
        await wait_for(lambda: box.imported == 1 and box.rounds >= 2)
        imported = await status()
        assert imported["lastImport"]["count"] == 1 and imported["lastUid"] == good["lastUid"] + 1
        assert imported["lastImport"]["at"] >= good["checkedAt"]

    imap_server.stop()  # the server is gone: the next connection fails, in words, with its time
    async with importing(services, account_id, first_look=False):
        async def failing():
            return (await status())["ok"] is False
        await wait_for(failing)
        failed = await status()
        assert f"127.0.0.1:{imap_server.port}" in failed["error"] and failed["lastError"]["message"] == failed["error"]
        assert failed["lastError"]["at"] >= imported["checkedAt"] and failed["since"] == failed["lastError"]["at"]
        assert failed["lastImport"] == imported["lastImport"] and failed["idle"] is True
        page = (await signed_in.get("/settings")).text
        assert 'id="email-import-status"' in page and "Mail import does not work" in page
        assert "1 mail(s)" in page and "IDLE" in page and f"could not connect to 127.0.0.1:{imap_server.port}" in page
    # Only the account's own mailbox: another account's answer has none of it.
    other = (await api.get("/v1/account", key=other_account["api_key"])).json
    assert "email" not in other["settings"] or other["settings"]["email"] is None
