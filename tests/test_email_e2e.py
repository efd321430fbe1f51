"""The email channel through the real server process (HTTPS, --allow-private-webhooks), pointed at a real IMAP
server (pymap) and a real SMTP server (aiosmtpd): a customer's mail arrives, an agent answers through the API, the
answer reaches the customer by SMTP, and the customer's reply threads back to the same conversation; the owner who
chose it is emailed about the new conversation, and GET /v1/account says how the import goes."""
from email.message import EmailMessage

from tests import db_direct
from tests.mail_server import ImapServer, MailServer
from tests.parley_process import ParleyProcess
from tests.waiting import wait_until

ADDRESS = "help@acme.example"


def test_a_customer_mail_is_answered_from_the_api_and_the_reply_threads_back(tmp_path):
    imap, smtp = ImapServer().start(), MailServer().start()
    try:
        with ParleyProcess(tmp_path / "data", "--allow-private-webhooks", "--worker-lease-seconds", "3",
                           http=False) as parley, parley.client() as client:
            key = {"apiKey": parley.first_run["api_key"]}
            r = client.patch("/v1/account/settings", params=key, json={"email": {
                "address": ADDRESS, "imap": imap.settings(), "smtp": smtp.settings()}})
            assert r.status_code == 200, r.text
            # The mailbox's first look records where new mail starts (mail from then on is imported).
            wait_until(lambda: db_direct.rows(parley, "SELECT last_uid FROM mail_checkpoints"))
            # The owner chose to be emailed on a new conversation (queued in the writer process with the message).
            [owner] = client.get("/v1/users", params=key).json()["data"]
            r = client.patch(f"/v1/users/{owner['id']}", params=key,
                             json={"emailNotifications": {"newConversation": True}})
            assert r.status_code == 200, r.text

            mail = EmailMessage()
            mail["From"], mail["To"], mail["Subject"] = "Ann Lee <ann@customer.example>", ADDRESS, "Parcel 7"
            mail["Message-ID"] = "<first@customer.example>"
            mail.set_content("My parcel has not arrived.")
            imap.append(mail)
            contact = wait_until(lambda: (r := client.get("/v1/contacts", params={**key, "email": "ann@customer.example"}))
                                 .status_code == 200 and r.json())  # the contact of its From address
            [inbound] = client.get(f"/v1/contacts/{contact['id']}/messages", params=key).json()["data"]
            assert inbound["channel"] == "email" and inbound["subject"] == "Parcel 7"
            assert inbound["body"] == "My parcel has not arrived." and inbound["fromId"] == "ann@customer.example"
            [told] = smtp.wait_for(1, timeout=30)
            assert told["To"] == owner["email"] and "New conversation" in told["Subject"]
            assert f"/inbox/{contact['id']}" in told.get_content() and "My parcel has not arrived." in told.get_content()
            # Written once the look that stored it ends (just after the message commits).
            status = wait_until(lambda: (shown := client.get("/v1/account", params=key).json()["settings"]["email"]
                                         ["importStatus"])["lastImport"] and shown)
            assert status["ok"] is True and status["idle"] is True and status["lastImport"]["count"] == 1

            r = client.post(f"/v1/contacts/{contact['id']}/messages", params=key,
                            json={"body": "It left our warehouse today."})
            assert r.status_code == 201, r.text
            reply_id = r.json()["id"]
            sent = smtp.wait_for(2, timeout=30)[1]
            assert sent["To"] == "ann@customer.example" and sent["Subject"] == "Re: Parcel 7"
            assert sent["In-Reply-To"] == "<first@customer.example>"
            wait_until(lambda: client.get(f"/v1/messages/{reply_id}", params=key).json()["status"] == "Sent")

            answer = EmailMessage()
            answer["From"], answer["To"], answer["Subject"] = "Ann <ann.lee@home.example>", ADDRESS, "Re: Parcel 7"
            answer["Message-ID"], answer["In-Reply-To"] = "<second@home.example>", sent["Message-ID"]
            answer["References"] = f"<first@customer.example> {sent['Message-ID']}"
            answer.set_content("Thank you!\n\nOn Tue, 3 Mar 2026, Acme <help@acme.example> wrote:\n> It left our "
                               "warehouse today.\n")
            imap.append(answer)
            thread = wait_until(lambda: (data := client.get(f"/v1/contacts/{contact['id']}/messages",
                                                            params=key).json()["data"]) and len(data) == 3 and data)
            assert [m["body"] for m in thread] == ["My parcel has not arrived.", "It left our warehouse today.",
                                                   "Thank you!"]
            assert thread[2]["fromId"] == "ann.lee@home.example" and thread[2]["quoted"].startswith("On Tue")
    finally:
        imap.stop()
        smtp.stop()
