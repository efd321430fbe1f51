"""The email channel (issue 39): a mailbox's mail imported as inbound messages (services/mail_in.py) from a real IMAP
server (pymap, tests/mail_server.py), replies sent by SMTP to a real aiosmtpd with a signed Message-ID and the
customer's In-Reply-To/References (services/mail_out.py), the customer's answer threading back, automatic mail and
bounces. In-process, on both databases; the parsing alone in test_email_parse.py."""
import asyncio
import base64
import imaplib
import os
import re
from email.message import EmailMessage


from services import accounts, mail_in, mail_out, mail_parse, media, messaging
from services.mail_in import MailImporter
from storage import contacts as contact_store
from storage import mail as mail_store
from storage import messages as message_store
from tests.mail_server import importing

ADDRESS = "help@acme.example"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PNG_DATA_URI = f"data:image/png;base64,{PNG}"


def customer_mail(n, *, sender="Ann Lee <ann@customer.example>", subject=None, body=None, **headers):
    mail = EmailMessage()
    mail["From"], mail["To"] = sender, ADDRESS
    mail["Subject"] = subject or f"Order {n}"
    mail["Message-ID"] = headers.pop("message_id", None) or f"<mail-{n}@customer.example>"
    for name, value in headers.items():
        mail[name.replace("_", "-")] = value
    mail.set_content(body or f"Hello, this is mail {n}.")
    return mail


def append(server, *mails):
    """Put mails in the pymap folder as another client would (a blocking client, in a thread)."""
    return asyncio.to_thread(server.append, *mails)


async def wait_for(predicate, timeout=15.0):
    """Wait on a state (not a time): predicate() true, looked at every 20 ms; AssertionError after timeout."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "state not reached in time"
        await asyncio.sleep(0.02)


async def configure(services, account_id, imap=None, smtp=None):
    email = {"address": ADDRESS}
    if imap is not None:
        email["imap"] = imap
    if smtp is not None:
        email["smtp"] = smtp
    await accounts.update_settings(services.db, account_id, {"email": email}, box=services.box)


async def emails(services, account_id):
    """The account's email messages, oldest first."""
    rows = []
    for contact_id in await contacts_of(services, account_id):
        rows += await message_store.list_contact_messages(services.db, account_id, contact_id, limit=500)
    return sorted((r for r in rows if r["channel"] == "email"), key=lambda r: r["id"])


async def contacts_of(services, account_id):
    return [row["id"] for row in await contact_store.page_by_id(services.db, account_id, None, 500)]


async def test_a_mailbox_is_imported_once_across_restarts_and_nothing_is_missed(services, account, other_account,
                                                                                imap_server):
    """Mail already in the folder is the mailbox's past; new mail arrives through IDLE; the importer is stopped
    mid-stream (mail keeps arriving), started again, and its checkpoint is even set back (a crash between the
    store and the checkpoint): each mail is stored exactly once, none is missed; another account sees none."""
    account_id = account["account_id"]
    await configure(services, account_id, imap=imap_server.settings())
    async with importing(services, account_id) as box:  # the first look: the demo mail there is not imported
        assert await emails(services, account_id) == []
        assert (await mail_in.import_status(services.db, account_id))["error"] is None  # Settings > Email: works
        await append(imap_server, *(customer_mail(n) for n in range(1, 4)))
        await wait_for(lambda: box.imported == 3)  # IDLE told it
    await append(imap_server, *(customer_mail(n) for n in range(4, 7)))  # while Parley is down
    mark = await mail_store.checkpoint(services.db, account_id)
    first_mail_uid = sorted(int(n) for n in await _uids(imap_server))[-6]  # mail 1 (the demo mail before it)
    await mail_store.set_checkpoint(services.db, account_id, mark["mailbox"], mark["uidvalidity"], first_mail_uid,
                                    mark["updated_at"])  # as if it crashed before the checkpoint of mails 2 and 3
    async with importing(services, account_id) as box:
        assert box.imported == 3  # the three new ones; the two set back were stored already (their Message-IDs)
        await append(imap_server, customer_mail(7))
        await wait_for(lambda: box.imported == 4)
    # The folder made anew (another UIDVALIDITY): what arrived since the day before the checkpoint is looked at
    # again, the mails imported already are not stored twice, and the new one is.
    mark = await mail_store.checkpoint(services.db, account_id)
    await mail_store.set_checkpoint(services.db, account_id, mark["mailbox"], mark["uidvalidity"] + 1, 2,
                                    mark["updated_at"])
    await append(imap_server, customer_mail(8))
    async with importing(services, account_id, idle_seconds=None) as box:
        assert box.imported == 1
    assert (await mail_store.checkpoint(services.db, account_id))["uidvalidity"] == mark["uidvalidity"]
    stored = await emails(services, account_id)
    assert [m["body"] for m in stored] == [f"Hello, this is mail {n}." for n in range(1, 9)]
    assert [m["mail"]["subject"] for m in stored] == [f"Order {n}" for n in range(1, 9)]
    assert {m["from_id"] for m in stored} == {"ann@customer.example"}
    assert len({m["contact_id"] for m in stored}) == 1
    assert await emails(services, other_account["account_id"]) == []
    mark = await mail_store.checkpoint(services.db, account_id)
    assert mark["last_uid"] == max(int(n) for n in await _uids(imap_server))


async def _uids(server):
    def run():
        client = imaplib.IMAP4("127.0.0.1", server.port)
        client.login(server.USERNAME, server.PASSWORD)
        client.select("INBOX")
        found = client.uid("SEARCH", "ALL")[1][0].split()
        client.logout()
        return found
    return await asyncio.to_thread(run)


async def test_one_process_imports_a_mailbox_and_an_unreachable_one_is_retried(services, ui_account, signed_in):
    """Two importers on one database (two processes): the one holding the lease keeps the mailbox's connection, the
    other none; a server that cannot be reached is tried again with backoff, and Settings > Email says why."""
    account = ui_account
    from services.leases import Lease
    from tests.mail_server import closed_port
    await configure(services, account["account_id"],
                    imap={"host": "127.0.0.1", "port": closed_port(), "security": "none", "password": "x"})
    first, second = MailImporter(services), MailImporter(services)
    first.lease = Lease(services.db, first.name, 30, owner="process one")
    second.lease = Lease(services.db, second.name, 30, owner="process two")
    try:
        first.start()
        await wait_for(lambda: first.rounds_finished >= 1)
        second.start()
        box = first.boxes[account["account_id"]]
        await wait_for(lambda: box.last_error is not None)
        assert "could not connect to 127.0.0.1" in box.last_error
        assert box.task is not None and not box.task.done()  # it goes on trying
        assert not await second.lease.hold()  # the other process's: it keeps no connection
        assert second.boxes == {} and second.rounds_finished == 0
        page = (await signed_in.get("/settings")).text
        assert "Mail import does not work" in page and "could not connect to 127.0.0.1" in page
    finally:
        await first.stop()
        await second.stop()


def _html_mail_with_attachments():
    mail = customer_mail(1, subject="Broken  part")
    mail.set_content("fallback")
    mail.add_alternative("<p>It arrived <b>broken</b>.</p><div>On Mon, 2 Mar 2026 at 10:00, Shop &lt;help@acme.example&gt;"
                         " wrote:</div><blockquote>We shipped it.</blockquote>", subtype="html")
    mail.add_attachment(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n",
                        maintype="application", subtype="pdf", filename="receipt.pdf")
    mail.add_attachment(b"\x89PNG\r\n\x1a\n" + b"\0" * 64, maintype="image", subtype="png", filename="photo.png")
    mail.add_attachment(b"not a zip at all", maintype="application", subtype="zip", filename="fake.zip")
    return bytes(mail)


async def test_a_reply_goes_by_smtp_signed_and_the_answer_threads_back(api, services, account, other_account,
                                                                       mail_server):
    """The customer's HTML mail with attachments becomes one inbound message (plain text preferred: here the
    plain part; the quote trimmed), the agent's reply is sent by SMTP with a signed Message-ID, In-Reply-To and
    References and "Re:"; the customer's answer from another address that names it joins the same contact; a
    forged reference (a wrong signature, another account's id) does not; a send that fails is retried and the
    Retry button sends it again."""
    account_id, key = account["account_id"], account["api_key"]
    await configure(services, account_id, smtp=mail_server.settings())
    raw = _html_mail_with_attachments()
    assert await mail_in.import_mail(services, account_id, ADDRESS, raw, "1:1") == "stored"
    assert await mail_in.import_mail(services, account_id, ADDRESS, raw, "1:1") == "repeat"
    [first, photo] = await emails(services, account_id)
    assert first["body"].startswith("fallback")  # the plain part is preferred over the HTML one
    assert "[attachment fake.zip" in first["body"] and "not kept]" in first["body"]  # not what its type says
    assert first["media_content_type"] == "application/pdf" and first["media_url"].startswith("media:")
    assert photo["message_type"] == "attachment" and photo["media_content_type"] == "image/png"
    contact_id = first["contact_id"]
    r = await api.get(f"/v1/messages/{first['id']}", key=key)
    assert r.json["subject"] == "Broken part" and r.json["channel"] == "email"

    r = await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "Sorry! A new one is on its way."}, key=key)
    assert r.code == 201, r.body
    reply_id = r.json["id"]
    assert r.json["channel"] == "email" and r.json["subject"] == "Re: Broken part" and r.json["status"] == "Pending"
    assert await services.delivery.run_due() == 1
    [sent] = mail_server.wait_for(1)
    assert sent["To"] == "ann@customer.example" and sent["From"] == f"Account 1 <{ADDRESS}>"
    assert sent["Subject"] == "Re: Broken part" and sent.get_content().strip() == "Sorry! A new one is on its way."
    assert sent["In-Reply-To"] == "<mail-1@customer.example>" and sent["References"] == "<mail-1@customer.example>"
    ours = sent["Message-ID"].strip("<>")
    assert ours.startswith(f"{reply_id}.") and ours.endswith("@acme.example")
    assert sent["Auto-Submitted"] is None  # a person wrote it
    assert (await api.get(f"/v1/messages/{reply_id}", key=key)).json["status"] == "Sent"

    # The answer, from the customer's other address, names our Message-ID: the same contact (never by subject).
    answer = customer_mail(2, sender="Ann <ann@home.example>", subject="Something else", message_id="<mail-2@home>",
                           In_Reply_To=f"<{ours}>", References=f"<mail-1@customer.example> <{ours}>",
                           body="Thanks!\n\nOn Tue, 3 Mar 2026 at 09:00, Account 1 <help@acme.example> wrote:\n"
                                "> Sorry! A new one is on its way.\n")
    assert await mail_in.import_mail(services, account_id, ADDRESS, bytes(answer), "1:2") == "stored"
    stored = await message_store.find_by_external_id(services.db, account_id, "email:mail-2@home")
    assert stored["contact_id"] == contact_id and stored["body"] == "Thanks!"
    assert stored["mail"]["quoted"].startswith("On Tue, 3 Mar 2026") and "> Sorry!" in stored["mail"]["quoted"]
    # A reference with a forged signature, or one of another account's: a contact of its own.
    forged = ours.split(".")[0] + ".aaaaaaaaaaaaaaaa@acme.example"
    other = mail_out.signed_message_id(mail_out.message_id_key(services.box), other_account["account_id"],
                                       reply_id, ADDRESS)
    for n, reference in ((3, forged), (4, other)):
        mail = customer_mail(n, sender=f"Eve <eve{n}@evil.example>", subject="Re: Broken part",
                             In_Reply_To=f"<{reference}>")
        assert await mail_in.import_mail(services, account_id, ADDRESS, bytes(mail), f"1:{n}") == "stored"
        found = await message_store.find_by_external_id(services.db, account_id, f"email:mail-{n}@customer.example")
        assert found["contact_id"] != contact_id

    # The next reply answers the answer, with the whole thread in References.
    from tests.mail_server import closed_port
    await configure(services, account_id, smtp=mail_server.settings(port=closed_port()))  # the SMTP server is down:
    # retried, shown Failed with the reason; then it is back, and the Retry button sends it
    services.delivery._accounts.clear()  # the settings as they are now, not the second-old copy of the last round
    r = await api.post(f"/v1/contacts/{contact_id}/messages", {"body": "Glad to help.", "mediaUrl": PNG_DATA_URI,
                                                               "mediaContentType": "image/png"}, key=key)
    assert r.code == 201, r.body
    second_id = r.json["id"]
    assert await services.delivery.run_due() == 1
    r = await api.get(f"/v1/messages/{second_id}", key=key)
    assert r.json["status"] == "Failed" and r.json["nextAttemptAt"] and not r.json["final"]
    assert "could not connect" in r.json["error"]["error"]
    await configure(services, account_id, smtp=mail_server.settings())
    services.delivery._accounts.clear()  # the settings as they are now, not the second-old copy of the last round
    r = await api.post(f"/v1/messages/{second_id}/retry", key=key)
    assert r.code == 202, r.body
    assert await services.delivery.run_due() == 1
    [_, again] = mail_server.wait_for(2)
    assert again["In-Reply-To"] == "<mail-2@home>"
    assert again["References"] == f"<mail-1@customer.example> <{ours}> <mail-2@home>"
    assert again.get_body(("plain",)).get_content().strip() == "Glad to help."
    [attached] = again.iter_attachments()  # the reply's file, from the media directory
    assert attached.get_content_type() == "image/png" and attached.get_content() == base64.b64decode(PNG)
    assert (await api.get(f"/v1/messages/{second_id}", key=key)).json["status"] == "Sent"


async def test_automatic_mail_bounces_and_our_own_mail_are_never_answered(api, services, account, mail_server):
    """An out-of-office (Auto-Submitted), a list mail (Precedence) and an X-Autoreply are stored but get no bot
    answer and no outside-hours message; a bounce of our reply marks it Failed with its reason and makes no
    contact; mail from our own address is not stored."""
    account_id, key = account["account_id"], account["api_key"]
    await configure(services, account_id, smtp=mail_server.settings())
    r = await api.patch("/v1/account/settings", {"bot": {"active": True, "rules": [
        {"keywords": ["order"], "answer": "Orders ship in 2 days."}]}}, key=key)
    assert r.code == 200, r.body
    outcomes = {}
    for n, headers in enumerate(({"Auto_Submitted": "auto-replied"}, {"Precedence": "bulk"}, {"X_Autoreply": "yes"},
                                 {}), start=1):
        mail = customer_mail(n, sender=f"Bo <bo{n}@customer.example>", body="About my order", **headers)
        message, created = await messaging.receive_inbound(  # the import's own call, to see what the write decided
            services, account_id, message_sid=f"email:auto-{n}", from_id=f"bo{n}@customer.example", to_id=ADDRESS,
            body="About my order", channel="email", auto_submitted=bool(headers), mail={"subject": mail["Subject"]})
        outcomes[n] = message["bot_wanted"]
    assert outcomes == {1: False, 2: False, 3: False, 4: True}
    # The import's reading of the same headers.
    from services import mail_parse
    assert [mail_parse.parse(bytes(customer_mail(1, **h))).automatic for h in (
        {"Auto_Submitted": "auto-replied"}, {"Precedence": "list"}, {"X_Autoreply": "yes"}, {"Auto_Submitted": "no"},
        {})] == [True, True, True, False, False]

    # Our reply to bo4, bounced by the customer's server.
    contact = (await message_store.find_by_external_id(services.db, account_id, "email:auto-4"))["contact_id"]
    await messaging.send_reply(services, account_id, contact, "Where shall we send it?", channel="email",
                               author="api")
    assert await services.delivery.run_due() >= 1
    sent = next(m for m in mail_server.wait_for(1) if m["To"] == "bo4@customer.example")
    before = len(await contacts_of(services, account_id))
    bounce = _dsn(sent["Message-ID"], "bo4@customer.example")
    assert await mail_in.import_mail(services, account_id, ADDRESS, bounce, "1:9") == "bounce"
    reply_id = sent["Message-ID"].strip("<>").split(".")[0]
    r = await api.get(f"/v1/messages/{reply_id}", key=key)
    assert r.json["status"] == "Failed" and r.json["final"] is True
    assert r.json["error"]["error"] == "bounced: 550 5.1.1 <bo4@customer.example>: Recipient address rejected"
    assert len(await contacts_of(services, account_id)) == before  # the bounce made no contact
    # Our own mail (from our address, or bearing our Message-ID) is not stored.
    assert await mail_in.import_mail(services, account_id, ADDRESS, bytes(customer_mail(
        8, sender=f"Shop <{ADDRESS}>")), "1:10") == "own"
    assert await mail_in.import_mail(services, account_id, ADDRESS, bytes(customer_mail(
        9, message_id=sent["Message-ID"])), "1:11") == "own"
    assert len(await contacts_of(services, account_id)) == before


def _dsn(original_id, recipient):
    """A delivery status notification as Postfix sends one (RFC 3464), about the mail with original_id."""
    return (
        "From: MAILER-DAEMON@mx.customer.example (Mail Delivery System)\r\n"
        f"To: {ADDRESS}\r\nSubject: Undelivered Mail Returned to Sender\r\nAuto-Submitted: auto-replied\r\n"
        "Message-ID: <dsn-1@mx.customer.example>\r\nMIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="B"\r\n\r\n'
        "--B\r\nContent-Type: text/plain\r\n\r\nI'm sorry to have to inform you that your message could not be "
        "delivered.\r\n\r\n"
        "--B\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.customer.example\r\n\r\n"
        f"Final-Recipient: rfc822; {recipient}\r\nAction: failed\r\nStatus: 5.1.1\r\n"
        f"Diagnostic-Code: smtp; 550 5.1.1 <{recipient}>: Recipient address rejected\r\n\r\n"
        "--B\r\nContent-Type: text/rfc822-headers\r\n\r\n"
        f"From: Account 1 <{ADDRESS}>\r\nTo: {recipient}\r\nMessage-ID: {original_id}\r\nSubject: Re: Order\r\n\r\n"
        "--B--\r\n").encode()


async def test_the_inbox_shows_an_emails_subject_quoted_text_and_delivery_state(signed_in, services, ui_account):
    """The thread shows each email's subject, its quoted history behind "Show quoted", an automatic mail's badge,
    and an email reply's delivery state with the reason and the Retry button when it failed."""
    from tests.mail_server import closed_port
    account_id = ui_account["account_id"]
    await configure(services, account_id, smtp={"host": "127.0.0.1", "port": closed_port(), "security": "none"})
    mail = customer_mail(1, subject="Where is my parcel?", body="Still nothing.\n\nOn Mon, 2 Mar 2026 at 10:00, "
                                                                "Shop <help@acme.example> wrote:\n> It ships today.\n")
    assert await mail_in.import_mail(services, account_id, ADDRESS, bytes(mail), "1:1") == "stored"
    away = customer_mail(2, subject="Out of office", Auto_Submitted="auto-replied")
    assert await mail_in.import_mail(services, account_id, ADDRESS, bytes(away), "1:2") == "stored"
    contact_id = (await message_store.find_by_external_id(services.db, account_id,
                                                          "email:mail-1@customer.example"))["contact_id"]
    await messaging.send_reply(services, account_id, contact_id, "It is on its way.", author="api")
    assert await services.delivery.run_due() == 1
    page = (await signed_in.get(f"/inbox/{contact_id}")).text
    assert "Subject: Where is my parcel?" in page and "Subject: Re: Where is my parcel?" in page
    assert "<summary>Show quoted</summary>" in page and "&gt; It ships today." in page
    assert "Still nothing." in page and "Automatic mail: not answered" in page
    assert "Failed" in page and "could not connect to 127.0.0.1" in page and ">Retry</button>" in page


async def test_the_csat_question_is_emailed_with_its_real_link(api, services, account, mail_server,
                                                             http_server_client):
    """A resolved email conversation is asked by email, the mail carrying the one-question page's real link (the
    stored message shows it masked), and the link opens the page."""
    from tests.ui_helpers import FormClient
    account_id, key = account["account_id"], account["api_key"]
    await configure(services, account_id, smtp=mail_server.settings())
    r = await api.patch("/v1/account/settings", {"csat": {"enabled": True, "question": "How did we do?"}}, key=key)
    assert r.code == 200, r.body
    assert await mail_in.import_mail(services, account_id, ADDRESS, bytes(customer_mail(1)), "1:1") == "stored"
    contact_id = (await message_store.find_by_external_id(services.db, account_id,
                                                          "email:mail-1@customer.example"))["contact_id"]
    r = await api.patch(f"/v1/conversations/{contact_id}", {"status": "resolved"}, key=key)
    assert r.code == 200, r.body
    assert await services.delivery.run_due() == 1
    [asked] = mail_server.wait_for(1)
    assert asked["Subject"] == "Re: Order 1" and asked["Auto-Submitted"] == "auto-replied"
    [token] = re.findall(r"https://\S+/csat/([A-Za-z0-9_-]+)", asked.get_content())
    [stored] = [m for m in await emails(services, account_id) if m["direction"] == "outbound"]
    assert token not in stored["body"] and "/csat/…" in stored["body"]
    page = await FormClient(http_server_client).get(f"/csat/{token}")
    assert page.code == 200 and "How did we do?" in page.text


async def test_a_big_mail_is_fetched_in_pieces_and_its_attachment_stored_whole(services, account, imap_server,
                                                                             monkeypatch):
    """A mail bigger than FETCH_BYTES is fetched FETCH_PIECE bytes at a time and read as the pieces arrive (never
    whole in memory: a 25 MB attachment), its PDF stored whole; a big base64 body that is no attachment (the text
    here) cannot be read so, and that mail is fetched and parsed whole, as any other."""
    monkeypatch.setattr(mail_in, "FETCH_BYTES", 64 << 10)
    monkeypatch.setattr(mail_in, "FETCH_PIECE", 50_000)
    pieces = []
    feed = mail_parse.MailReader.feed
    monkeypatch.setattr(mail_parse.MailReader, "feed", lambda reader, piece: (pieces.append(len(piece)),
                                                                             feed(reader, piece)))
    renamed = []
    store_file = media.store_file
    monkeypatch.setattr(media, "store_file", lambda directory, path: (renamed.append(path),
                                                                      store_file(directory, path))[1])
    pdf = b"%PDF-1.4\n" + os.urandom(300_000) + b"\n%%EOF\n"
    with_pdf = customer_mail(1)
    with_pdf.add_attachment(pdf, maintype="application", subtype="pdf", filename="scan.pdf")
    text = os.urandom(60_000).hex()
    big_text = customer_mail(2)
    big_text.set_content(text, cte="base64")
    own = customer_mail(3, sender=f"Shop <{ADDRESS}>")  # Parley's own: not imported, its file not kept
    own.add_attachment(pdf, maintype="application", subtype="pdf", filename="copy.pdf")
    account_id = account["account_id"]
    await configure(services, account_id, imap=imap_server.settings())
    async with importing(services, account_id) as box:
        await append(imap_server, own, with_pdf, big_text)
        await wait_for(lambda: box.imported == 2)
    # the attachment was decoded into a temporary file of the media directory and stored by renaming it
    assert len(renamed) == 1 and ".incoming-mail-" in renamed[0]
    assert [p.name for p in media.media_dir(services.settings).iterdir() if p.name.startswith(".")] == []
    # both mails read in pieces of at most FETCH_PIECE bytes (pymap stores them with CRLF line ends)
    assert max(pieces) == 50_000 and sum(pieces) >= len(bytes(own)) + len(bytes(with_pdf)) + len(bytes(big_text))
    first, second = await emails(services, account_id)
    assert first["body"] == "Hello, this is mail 1." and first["media_content_type"] == "application/pdf"
    assert (media.media_dir(services.settings) / first["media_url"].removeprefix(media.STORED_PREFIX)).read_bytes() \
        == pdf
    assert second["body"].startswith(text[:1000]) and "ParleyCut" not in second["body"]
