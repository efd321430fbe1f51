"""Reading a mail of the email channel (services/mail_parse.py): mails shaped as Gmail, Outlook and Apple Mail send
them (their multipart structure, transfer encodings and quote headers), and delivery status notifications as Postfix
and Exim send them. Pure functions: no database."""
import os
import tracemalloc
from email.message import EmailMessage

import pytest

from services import mail_parse
from common.email_channel import reply_mail, reply_subject
from services.mail_out import signed_message_id, verified_message_id

GMAIL = b"""MIME-Version: 1.0
Date: Tue, 3 Mar 2026 09:12:01 +0100
References: <msg_01abc.aaaabbbbccccdddd@acme.example>
In-Reply-To: <msg_01abc.aaaabbbbccccdddd@acme.example>
Message-ID: <CAFx=gm4il@mail.gmail.com>
Subject: Re: Your order
From: =?UTF-8?Q?Ren=C3=A9e_M=C3=BCller?= <Renee.Muller@gmail.com>
To: Acme Support <help@acme.example>
Content-Type: multipart/alternative; boundary="000000000000abc"

--000000000000abc
Content-Type: text/plain; charset="UTF-8"
Content-Transfer-Encoding: quoted-printable

Danke, it arrived =E2=80=94 all good!

On Mon, 2 Mar 2026 at 18:00, Acme Support <help@acme.example> wrote:

> Your parcel ships today.
>

--000000000000abc
Content-Type: text/html; charset="UTF-8"
Content-Transfer-Encoding: quoted-printable

<div dir=3D"ltr">Danke, it arrived =E2=80=94 all good!</div><br><div class=3D"gmail_quote">On Mon, 2 Mar 2026 at 18:00, Acme Support &lt;help@acme.example&gt; wrote:<br><blockquote>Your parcel ships today.</blockquote></div>

--000000000000abc--
"""

OUTLOOK_HTML_ONLY = b"""From: Sam Poe <sam@contoso.example>
To: "help@acme.example" <help@acme.example>
Subject: RE: Invoice 1042
Date: Tue, 3 Mar 2026 10:00:00 +0000
Message-ID: <DB9PR01MB1234@DB9PR01MB1234.eurprd01.prod.outlook.com>
In-Reply-To: <msg_01def.eeeeffffgggghhhh@acme.example>
Content-Type: text/html; charset="iso-8859-1"
Content-Transfer-Encoding: quoted-printable
MIME-Version: 1.0

<html><head><style>p.MsoNormal{margin:0}</style><script>alert(1)</script></head><body>
<p class=3D"MsoNormal">Please send it again as <b>PDF</b>.</p>
<p class=3D"MsoNormal">Gr=FC=DFe, Sam</p>
<div><p>-----Original Message-----<br>From: Acme Support &lt;help@acme.example&gt;<br>Sent: Monday, March 2, 2026 5:00 PM<br>To: Sam Poe<br>Subject: Invoice 1042</p><p>Here is your invoice: <a href=3D"https://acme.example/i/1042">open it</a></p></div>
</body></html>
"""

APPLE_MAIL = b"""From: Kim Lee <kim@icloud.example>
Content-Type: multipart/mixed; boundary="Apple-Mail=_1"
Mime-Version: 1.0 (Mac OS X Mail 16.0)
Subject: Broken lid
Message-Id: <A1B2C3D4-0000-4000-8000-ABCDEF012345@icloud.example>
Date: Tue, 3 Mar 2026 11:00:00 +0100
To: help@acme.example

--Apple-Mail=_1
Content-Transfer-Encoding: 7bit
Content-Type: text/plain; charset=us-ascii

The lid came broken, photo attached.

--Apple-Mail=_1
Content-Disposition: inline; filename=lid.png
Content-Type: image/png; name="lid.png"
Content-Transfer-Encoding: base64

iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==
--Apple-Mail=_1--
"""

EXIM_DSN = b"""Return-path: <>
From: Mail Delivery System <Mailer-Daemon@mx.example>
To: help@acme.example
Subject: Mail delivery failed: returning message to sender
Auto-Submitted: auto-replied
Message-Id: <E1abc-0001@mx.example>
Content-Type: multipart/report; report-type=delivery-status; boundary=1234-5678
MIME-Version: 1.0

--1234-5678
Content-type: text/plain; charset=us-ascii

This message was created automatically by mail delivery software.

--1234-5678
Content-type: message/delivery-status

Reporting-MTA: dns; mx.example

Action: failed
Final-Recipient: rfc822;gone@customer.example
Status: 5.0.0
Diagnostic-Code: smtp; 550 mailbox unavailable

--1234-5678
Content-type: message/rfc822

From: Acme <help@acme.example>
To: gone@customer.example
Subject: Re: Order
Message-ID: <msg_01xyz.iiiijjjjkkkkllll@acme.example>

Hello
--1234-5678--
"""

DELAYED_DSN = EXIM_DSN.replace(b"Action: failed", b"Action: delayed").replace(b"Status: 5.0.0", b"Status: 4.0.0")


def test_gmail_plain_part_preferred_quote_trimmed_and_headers_read():
    mail = mail_parse.parse(GMAIL)
    assert mail.from_address == "renee.muller@gmail.com" and mail.from_name == "Renée Müller"
    assert mail.subject == "Re: Your order" and mail.message_id == "CAFx=gm4il@mail.gmail.com"
    assert mail.reply == "Danke, it arrived — all good!"
    assert mail.quoted.startswith("On Mon, 2 Mar 2026 at 18:00") and "> Your parcel ships today." in mail.quoted
    assert mail.text.startswith(mail.reply) and mail.text.endswith("> Your parcel ships today.\n>".rstrip())
    assert mail.references == ["msg_01abc.aaaabbbbccccdddd@acme.example"]
    assert not mail.automatic and mail.bounce is None and mail.attachments == []


@pytest.mark.parametrize("headers, name, address, subject, references", [
    # plain ASCII headers are read from their raw text (mail_parse._plain_headers): folded, quoted, a comment
    (b'From: "Doe, John"\r\n <John@X.example>\r\nSubject: Hello\r\n   there\r\nReferences: <r1@x>\r\n <r2@x>\r\n',
     "Doe, John", "john@x.example", "Hello there", ["r2@x", "r1@x"]),
    (b"From: john@x.example (John Doe)\r\nSubject: Hi\r\n", "John Doe", "john@x.example", "Hi", []),
    (b"From: A <a@x.example>, B <b@x.example>\r\nFrom: C <c@x.example>\r\n", "A", "a@x.example", "", []),
    # encoded words, and raw 8-bit text, go through the header registry
    (b"From: =?utf-8?q?Jos=C3=A9?= <jose@x.example>\r\nSubject: =?utf-8?q?Caf=C3=A9?=\r\n", "Jos\u00e9",
     "jose@x.example", "Caf\u00e9", []),
    (b"From: \xc3\xa9 <e@x.example>\r\nSubject: \xc3\xa9t\xc3\xa9\r\n", "\u00e9", "e@x.example", "\u00e9t\u00e9", []),
])
def test_from_subject_and_references_read_as_written(headers, name, address, subject, references):
    mail = mail_parse.parse(headers + b"Message-ID: <m@x>\r\n\r\nHello\r\n")
    assert (mail.from_name, mail.from_address, mail.subject, mail.references, mail.message_id) == \
        (name, address, subject, references, "m@x")


def test_outlook_html_only_becomes_text_without_scripts_and_its_history_is_trimmed():
    mail = mail_parse.parse(OUTLOOK_HTML_ONLY)
    assert mail.reply == "Please send it again as PDF.\n\nGrüße, Sam"
    assert "alert" not in mail.text and "MsoNormal" not in mail.text
    assert mail.quoted.startswith("-----Original Message-----")
    assert "open it (https://acme.example/i/1042)" in mail.quoted
    assert mail.references == ["msg_01def.eeeeffffgggghhhh@acme.example"]


def test_apple_mail_attachment_is_kept_with_its_type():
    mail = mail_parse.parse(APPLE_MAIL)
    assert mail.reply == "The lid came broken, photo attached." and mail.quoted is None
    [photo] = mail.attachments
    assert (photo.filename, photo.content_type) == ("lid.png", "image/png") and photo.data.startswith(b"\x89PNG")


def _big_mail(*, crlf=False, nested=False, text_size=0):
    """A mail with a 4 MB PDF and a small PNG attached (nested: inside a multipart/mixed of its own), its text
    text_size bytes of random base64 long when given (a big body that is no attachment)."""
    pdf = b"%PDF-1.4\n" + os.urandom(4 << 20) + b"\n%%EOF\n"
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = "Ann <ann@mail.example>", "help@acme.example", "Scans"
    if text_size:
        mail.set_content(os.urandom(text_size).hex(), cte="base64")
    else:
        mail.set_content("The scans, as promised.\n")
    inner = mail
    if nested:
        inner = EmailMessage()
        inner.set_content("inner")
    inner.add_attachment(pdf, maintype="application", subtype="pdf", filename="scan.pdf")
    mail.add_attachment(b"\x89PNG\r\n\x1a\n" + b"\0" * 100, maintype="image", subtype="png", filename="a.png")
    if nested:
        mail.attach(inner)
    raw = bytes(mail)
    return (raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n") if crlf else raw), pdf


def test_a_big_mails_attachment_is_decoded_from_the_raw_bytes_as_the_whole_parse_would():
    for crlf in (False, True):
        raw, pdf = _big_mail(crlf=crlf)
        literal = bytearray(raw)  # as the IMAP client hands it over
        tracemalloc.start()
        try:
            mail = mail_parse.parse(literal)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        whole = mail_parse._parsed(mail_parse.email.message_from_bytes(raw, policy=mail_parse.email.policy.default),
                                   None)
        assert [(a.filename, a.content_type, bytes(a.data)) for a in mail.attachments] == \
            [(a.filename, a.content_type, bytes(a.data)) for a in whole.attachments]
        assert mail.attachments[0].data == pdf and mail.text == whole.text == "The scans, as promised."
        # the stdlib's parse of the whole mail holds some ten times the attachment at once, a copy of the decoded
        # file beside the literal once more; decoded in place, a step of the decoding at a time
        assert peak < len(pdf) / 2, f"parsing held {peak / len(pdf):.2f} times the attachment"


def test_a_big_mail_read_in_pieces_is_read_as_the_whole_parse_reads_it():
    for crlf in (False, True):
        raw, pdf = _big_mail(crlf=crlf)
        reader = mail_parse.MailReader()
        for at in range(0, len(raw), 4099):  # pieces that end mid-line
            reader.feed(raw[at:at + 4099])
        mail = reader.parsed()
        whole = mail_parse._parsed(mail_parse.email.message_from_bytes(raw, policy=mail_parse.email.policy.default),
                                   None)
        assert (mail.text, mail.subject, mail.from_address) == (whole.text, whole.subject, whole.from_address)
        assert [(a.filename, a.content_type, bytes(a.data)) for a in mail.attachments] == \
            [(a.filename, a.content_type, bytes(a.data)) for a in whole.attachments]
        assert mail.attachments[0].data == pdf
    reader = mail_parse.MailReader()
    reader.feed(_big_mail(text_size=600_000)[0])
    with pytest.raises(mail_parse.NotCut):  # the big body is the text: the mail must be read whole
        reader.parsed()


def test_a_big_body_that_is_no_attachment_is_parsed_whole():
    for raw, _ in (_big_mail(text_size=600_000), _big_mail(nested=True)):
        mail = mail_parse.parse(raw)
        whole = mail_parse._parsed(mail_parse.email.message_from_bytes(raw, policy=mail_parse.email.policy.default),
                                   None)
        assert (mail.text, [(a.filename, bytes(a.data)) for a in mail.attachments]) == \
            (whole.text, [(a.filename, bytes(a.data)) for a in whole.attachments])
        assert "ParleyCut" not in mail.text


def test_a_dsn_names_the_failed_message_and_a_delay_is_no_bounce():
    mail = mail_parse.parse(EXIM_DSN)
    assert mail.bounce == mail_parse.Bounce(original_id="msg_01xyz.iiiijjjjkkkkllll@acme.example",
                                            recipient="gone@customer.example", reason="bounced: 550 mailbox unavailable")
    assert mail.automatic and mail.attachments == []
    delayed = mail_parse.parse(DELAYED_DSN)
    assert delayed.bounce is None and delayed.automatic  # stored, never answered; the message is not failed


def test_signed_message_ids_verify_only_for_their_account_and_message():
    key, other_key = b"k" * 32, b"o" * 32
    signed = signed_message_id(key, "acc_1", "msg_01abc", "help@acme.example")
    assert signed.startswith("msg_01abc.") and signed.endswith("@acme.example")
    assert verified_message_id(key, "acc_1", signed) == "msg_01abc"
    assert verified_message_id(key, "acc_2", signed) is None  # another account's
    assert verified_message_id(other_key, "acc_1", signed) is None  # another server's key
    assert verified_message_id(key, "acc_1", signed.replace("msg_01abc", "msg_01abd")) is None  # another message
    assert verified_message_id(key, "acc_1", "CAFx=gm4il@mail.gmail.com") is None
    assert verified_message_id(key, "acc_1", None) is None


def test_a_replys_subject_and_references():
    assert reply_subject("Order 1") == "Re: Order 1" and reply_subject("RE: Invoice") == "RE: Invoice"
    assert reply_subject("AW:  Frage") == "AW: Frage" and reply_subject("") is None
    mail = reply_mail({"subject": "Order 1", "messageId": "c3@x", "references": ["c2@x", "c1@x"]})
    assert mail == {"subject": "Re: Order 1", "inReplyTo": "c3@x", "references": ["c1@x", "c2@x", "c3@x"]}
    long = reply_mail({"messageId": "last@x", "references": [f"r{n}@x" for n in range(40, 0, -1)]})
    assert len(long["references"]) == 20 and long["references"][0] == "r1@x" and long["references"][-1] == "last@x"
    assert reply_mail(None) == {"subject": None, "inReplyTo": None, "references": []}
