"""Parley's own mail (issue 39): invitations and "Forgot password?" links, queued in the outbox with what they carry
and sent by the delivery worker through the account's SMTP server, here a real aiosmtpd (tests/mail_server.py).
In-process, on both databases."""
import asyncio
import re


from services import accounts, forgot_password
from services.delivery import DeliveryWorker
from storage.outbox import list_outbox
from tests.ui_helpers import PASSWORD, FormClient

NEW_PASSWORD = "a brand new password 42"


async def _set_smtp(services, account_id, mail_server, address="help@acme.example"):
    await accounts.update_settings(services.db, account_id, {"email": {"address": address,
                                                                       "smtp": mail_server.settings()}},
                                   box=services.box)


def _page(response):
    """A page without what differs between any two answers (the XSRF token, nonces, the request id)."""
    return re.sub(r'(value|nonce)="[^"]*"|Request id\s+\w+', "", response.text)


def _link(message):
    return re.search(r"https?://\S+/(?:invite|reset)/[A-Za-z0-9_-]+", message.get_content()).group(0)


async def test_an_invitation_is_emailed_from_the_accounts_address(api, services, account, other_account,
                                                                  mail_server):
    await _set_smtp(services, account["account_id"], mail_server)
    r = await api.post("/v1/users", {"email": "sam@acme.example", "name": "Sam", "role": "agent"},
                       key=account["api_key"])
    assert r.code == 201, r.body
    assert r.json["invitationEmailed"] is True  # and the link is still in the answer
    [row] = await list_outbox(services.db, account["account_id"], kind="mail")
    token = r.json["signInUrl"].rsplit("/", 1)[1]
    assert token not in row["payload"]  # sealed at rest, like the link's hash
    assert await services.delivery.run_due() == 1
    [mail] = mail_server.messages
    assert mail["To"] == "sam@acme.example" and mail["From"] == "Account 1 <help@acme.example>"
    assert mail["Auto-Submitted"] == "auto-generated" and "Account 1" in mail["Subject"]
    assert _link(mail) == r.json["signInUrl"]
    assert mail_server.envelopes == [("help@acme.example", ["sam@acme.example"])]
    [row] = await list_outbox(services.db, account["account_id"], kind="mail")
    assert row["status"] == "sent"
    r = await api.delete(f"/v1/users/{r.json['id']}", key=account["api_key"])  # removed: the address is erased
    assert r.code == 200, r.body
    assert await list_outbox(services.db, account["account_id"], kind="mail") == []

    # Tenancy: another account without SMTP mails nothing (and never through this account's server).
    r = await api.post("/v1/users", {"email": "kim@other.example", "role": "agent"}, key=other_account["api_key"])
    assert r.code == 201 and r.json["invitationEmailed"] is False
    assert await list_outbox(services.db, other_account["account_id"], kind="mail") == []
    assert await services.delivery.run_due() == 0 and len(mail_server.messages) == 1


async def test_two_processes_send_each_mail_once(api, services, account, mail_server):
    """Several server processes on one database (PostgreSQL): each claims the mails it sends, as webhooks."""
    await _set_smtp(services, account["account_id"], mail_server)
    for n in range(6):
        r = await api.post("/v1/users", {"email": f"agent{n}@acme.example", "role": "agent"}, key=account["api_key"])
        assert r.code == 201 and r.json["invitationEmailed"], r.body
    first, second = (DeliveryWorker(services, per_account=6, concurrency=6) for _ in range(2))
    second.owner = "another process"
    try:
        done = await asyncio.gather(first.run_due(), second.run_due())
        done += await asyncio.gather(first.run_due(), second.run_due())
    finally:
        await first.stop()
        await second.stop()
    ids = [mail["Message-ID"] for mail in mail_server.messages]
    assert sum(done) == 6 and len(ids) == 6 and len(set(ids)) == 6
    assert sorted(mail["To"] for mail in mail_server.messages) == [f"agent{n}@acme.example" for n in range(6)]


async def test_a_mail_that_cannot_be_sent_is_retried_and_shown(api, services, signed_in, ui_account, mail_server):
    await _set_smtp(services, ui_account["account_id"], mail_server)
    mail_server.stop()  # the server is down: the attempt fails, a retry is scheduled
    r = await signed_in.post("/users", {"email": "sam@acme.example", "name": "", "role": "agent"})
    assert r.code == 201 and 'id="invite-emailed"' in r.text
    assert await services.delivery.run_due() == 1
    [row] = await list_outbox(services.db, ui_account["account_id"], kind="mail")
    assert row["status"] == "pending" and row["attempts"] == 1
    assert f"could not connect to 127.0.0.1:{mail_server.port}" in row["last_error"]
    page = (await signed_in.get("/settings")).text
    assert re.search(r'id="email-outbox".*sam@acme\.example.*retrying \(1 attempts\).*could not connect to 127\.0\.0\.1',
                     page, re.S), page


async def test_forgot_password_emails_a_one_time_link_and_says_the_same_for_anyone(services, ui_account,
                                                                                  signed_in, http_server_client,
                                                                                  mail_server):
    await _set_smtp(services, ui_account["account_id"], mail_server)
    visitor = FormClient(http_server_client)
    await visitor.get("/login")
    assert 'href="/forgot-password"' in (await visitor.get("/login")).text

    async def ask(email):
        await visitor.get("/forgot-password")
        response = await visitor.post("/forgot-password", {"email": email})
        await asyncio.gather(*forgot_password._tasks)  # the work done after the answer
        return response

    unknown = await ask("nobody@acme.example")
    assert await list_outbox(services.db, ui_account["account_id"], kind="mail") == []
    known = await ask(ui_account["email"].upper())
    assert known.code == unknown.code == 200
    assert _page(known) == _page(unknown)  # no enumeration
    assert "a link to choose a new password is on its way" in known.text

    assert await services.delivery.run_due() == 1
    [mail] = mail_server.messages
    assert mail["To"] == ui_account["email"]
    link = _link(mail).split("/", 3)[3]  # the path: /reset/<token>
    assert (await visitor.get("/" + link)).code == 200
    await visitor.get("/" + link)
    r = await visitor.post("/" + link, {"password": NEW_PASSWORD, "password_again": NEW_PASSWORD})
    assert r.code == 303, r.text
    assert (await visitor.get("/inbox")).code == 200  # signed in
    assert (await signed_in.get("/inbox")).code in (302, 303)  # the user's other session ended
    assert (await visitor.get("/" + link)).code == 404  # once only
    assert (await FormClient(http_server_client).login(ui_account["email"], PASSWORD)).code == 401
    assert (await FormClient(http_server_client).login(ui_account["email"], NEW_PASSWORD)).code == 303

    # Limited per email: the burst, then 429 (the same for an address that is nobody's).
    for _ in range(2):
        assert (await ask(ui_account["email"])).code == 200
    limited = await ask(ui_account["email"])
    assert limited.code == 429 and "Too many requests" in limited.text


async def test_forgot_password_reaches_the_first_runs_owner_who_signs_in_as_admin_at_localhost(services, mail_server):
    # The first start's owner signs in as admin@localhost, which is no valid contact email: folded as sign-in does.
    account = await accounts.create_account(services.db, services.box, services.keys, name="First run",
                                            email="admin@localhost", password=PASSWORD)
    await _set_smtp(services, account["account_id"], mail_server)
    assert await forgot_password.send_links(services, "https://parley.test", " Admin@Localhost") == 1
    assert await services.delivery.run_due() == 1
    assert [m["To"] for m in mail_server.messages] == ["admin@localhost"]
