"""The email channel's import (issue 39): 1,000 mails waiting in the folder when the server starts are imported at
>= 50 mails/s.

A real IMAP server (bench/mail_source.py: Dovecot, or pymap with --mail-server pymap) and the real server.py: the
account's mailbox is set and looked at once (its checkpoint), the server stops, 1,000 customer mails (from 200
senders: new contacts and known ones) are put in the folder, and the server starts again: the time from
"listening" until the 1,000th inbound email message is stored, and from the first stored to the last.
"""
import time
from email.message import EmailMessage

from bench.mail_source import MailSource

NAME = "email_import"
TITLE = "Email channel: mail waiting in the folder imported at start"
MAILS = 1000
SENDERS = 200
GOAL_PER_SECOND = 50
ADDRESS = "help@bench.example"


def _mail(n):
    mail = EmailMessage()
    mail["From"] = f"Customer {n % SENDERS} <customer{n % SENDERS}@mail.example>"
    mail["To"], mail["Subject"] = ADDRESS, f"Question {n}"
    mail["Message-ID"] = f"<bench-{n}@mail.example>"
    mail.set_content(f"Hello, this is question {n}.\n\nOn Mon, 2 Mar 2026 at 10:00, Shop <{ADDRESS}> wrote:\n"
                     "> Thanks for your order.\n")
    return bytes(mail)


def _stored(ctx, data):
    return ctx.count_rows(data / "parley.db", "SELECT COUNT(*) FROM messages WHERE channel = 'email'")


def run(ctx):
    source = MailSource(ctx.args)
    ctx.log(f"  mail server: {source.label}")
    data = ctx.fresh_data_dir("email-import")
    args = ("--allow-private-webhooks", "--worker-lease-seconds", "3")
    try:
        parley = ctx.start_parley(data, *args)
        try:
            with parley.client() as client:
                r = client.patch("/v1/account/settings", params={"apiKey": ctx.first_run["api_key"]},
                                 json={"email": {"address": ADDRESS, "imap": source.settings()}})
                assert r.status_code == 200, r.text
            deadline = time.monotonic() + 60
            while not ctx.count_rows(data / "parley.db", "SELECT COUNT(*) FROM mail_checkpoints"):
                assert time.monotonic() < deadline, "the mailbox was not looked at"
                time.sleep(0.1)
        finally:
            parley.stop()
        ctx.log(f"  putting {MAILS:,} mails in the folder")
        for n in range(MAILS):
            source.put(_mail(n))
        source.close()
        ctx.wait_for_quiet()
        started = time.monotonic()
        parley = ctx.start_parley(data, *args)
        listening = time.monotonic()
        first = None
        try:
            deadline = listening + 300
            while (stored := _stored(ctx, data)) < MAILS:
                if stored and first is None:
                    first = time.monotonic()
                assert time.monotonic() < deadline, f"only {stored} of {MAILS} mails imported in 300 s"
                time.sleep(0.05)
            done = time.monotonic()
        finally:
            parley.stop()
        contacts = ctx.count_rows(data / "parley.db", "SELECT COUNT(*) FROM contacts WHERE email LIKE ?",
                                  "customer%@mail.example")
    finally:
        source.stop()
    first = first or done
    return {"mail_server_label": source.label, "mails": MAILS, "senders": SENDERS, "contacts_made": contacts,
            "start_seconds": round(listening - started, 2),
            "seconds_from_listening": round(done - listening, 2),
            "per_second_from_listening": round(MAILS / (done - listening), 1),
            "per_second_while_importing": round((MAILS - 1) / max(done - first, 1e-6), 1)}


def render(result):
    return ["| mails waiting | senders (contacts made) | seconds from listening | mails/s | mails/s once the "
            "first is stored |", "|---:|---:|---:|---:|---:|",
            f"| {result['mails']:,} | {result['senders']} ({result['contacts_made']}) | "
            f"{result['seconds_from_listening']} | {result['per_second_from_listening']} | "
            f"{result['per_second_while_importing']} |", "",
            f"{result.get('mail_server_label', 'pymap (in memory)')}, on loopback; each mail parsed (quote trimmed) and stored through the inbound path "
            "(contact by From address, conversation, events), the checkpoint moved every 50 mails."]


def goals(result):
    from bench.report import goal
    rate = result["per_second_from_listening"]
    return [goal(f"{MAILS:,} waiting mails imported at >= {GOAL_PER_SECOND} mails/s", rate, GOAL_PER_SECOND,
                 rate >= GOAL_PER_SECOND and result["contacts_made"] == SENDERS)]
