#!/usr/bin/env python3
"""A newcomer's walk through docs/guide.md "Email", timed (issue 39's "Done means"): local aiosmtpd + pymap, a fresh
`parley serve --allow-private-webhooks`, and in headless Chromium what the guide tells a person to do: fill in
Settings > Email (address, IMAP, SMTP), Test, Save; a customer's mail arrives in the inbox; answer it from the reply
box; the customer receives "Re: <subject>" by SMTP; the customer's answer to that lands in the same conversation;
an invitation and a "Forgot password?" link arrive by mail.

    .venv/bin/python bench/email_walk.py

Prints each step with its machine time and the person's clicks and fields, and the totals (JSON on the last line).
"""
import json
import re
import sys
import tempfile
import time
from email.message import EmailMessage
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.mail_server import ImapServer, MailServer  # noqa: E402
from tests.parley_process import ParleyProcess  # noqa: E402

ADDRESS = "help@acme.example"
CUSTOMER = "ann@customer.example"
steps = []


def step(name, clicks, fields):
    """A timed step: the machine's seconds, and what a person does (clicks, fields typed or chosen)."""
    class Timer:
        def __enter__(self):
            self.t = time.monotonic()

        def __exit__(self, *exc):
            if exc[0] is None:
                steps.append({"step": name, "seconds": round(time.monotonic() - self.t, 2), "clicks": clicks,
                              "fields": fields})
                print(f"{steps[-1]['seconds']:6.2f} s  {clicks} clicks, {fields} fields  {name}", flush=True)
    return Timer()


def wait(predicate, timeout=30, what="it"):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.1)
    return found


def main():
    tmp = Path(tempfile.mkdtemp(prefix="parley-email-walk-"))
    imap, smtp = ImapServer().start(), MailServer().start()
    started = time.monotonic()
    parley = ParleyProcess(tmp / "data", "--allow-private-webhooks", http=False).start()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_context(ignore_https_errors=True).new_page()
            with step("sign in", 1, 2):
                page.goto(parley.base + "/login")
                page.fill("#email", parley.first_run["login"])
                page.fill("#password", parley.first_run["password"])
                page.click("button[type=submit]")
                page.wait_for_url(re.compile(r".*/inbox.*|.*/$"))
            with step("Settings > Email: address, IMAP and SMTP filled in, Save", 3, 13):
                page.goto(parley.base + "/settings#email")
                page.fill("#email-address", ADDRESS)
                for kind, server in (("imap", imap), ("smtp", smtp)):
                    settings = server.settings()
                    page.fill(f"#email-{kind}-host", settings["host"])
                    page.select_option(f"#email-{kind}-security", "none")
                    page.fill(f"#email-{kind}-port", str(settings["port"]))
                    page.fill(f"#email-{kind}-username", settings["username"])
                    page.fill(f"#email-{kind}-password", settings["password"])
                page.click("#email button[type=submit]:has-text('Save email settings')")
                page.wait_for_load_state()
            with step("Test", 1, 0):
                page.click("#email-test")
                page.wait_for_load_state()
                text = page.locator("#email").inner_text()
                assert "IMAP" in text and "SMTP" in text, text
                print("        Test says:", " / ".join(line for line in text.splitlines()
                                                       if "works" in line.lower() or "fail" in line.lower())[:300])
            with step("wait for 'Mail import works' (reload Settings)", 1, 0):
                def import_works():
                    page.goto(parley.base + "/settings#email")
                    return "Mail import works" in page.locator("#email").inner_text()
                wait(import_works, 60, "the first look at the folder")

            with step("a customer's mail arrives in the inbox (machine only)", 1, 0):
                mail = EmailMessage()
                mail["From"], mail["To"], mail["Subject"] = f"Ann Lee <{CUSTOMER}>", ADDRESS, "Parcel 7"
                mail["Message-ID"] = "<walk-first@customer.example>"
                mail.set_content("Hello, my parcel 7 has not arrived.\n\nAnn")
                imap.append(mail)
                page.goto(parley.base + "/inbox")
                page.wait_for_selector("text=Ann Lee", timeout=30_000)
            with step("open the conversation, answer it from the reply box", 2, 1):
                page.click("text=Ann Lee")
                page.wait_for_selector("#reply-body")
                assert "Parcel 7" in page.content()
                page.fill("#reply-body", "Hello Ann, it left our warehouse today.")
                page.click("button:has-text('Send reply')")
                page.wait_for_selector(".message.outbound .delivery.status-sent", timeout=30_000)
            conversation_url = page.url
            with step("the customer receives the reply (SMTP)", 0, 0):
                [reply] = smtp.wait_for(1, timeout=30)
                assert reply["Subject"] == "Re: Parcel 7", reply["Subject"]
                assert reply["In-Reply-To"] == "<walk-first@customer.example>", reply["In-Reply-To"]
                assert CUSTOMER in str(reply["To"])
            with step("the customer's answer lands in the same conversation", 0, 0):
                answer = EmailMessage()
                answer["From"], answer["To"] = f"Ann Lee <{CUSTOMER}>", ADDRESS
                answer["Subject"] = "Re: Re: Parcel 7"
                answer["Message-ID"] = "<walk-second@customer.example>"
                answer["In-Reply-To"] = reply["Message-ID"]
                answer["References"] = f"<walk-first@customer.example> {reply['Message-ID']}"
                answer.set_content("Thanks, it is here!\n\nOn Mon, Parley wrote:\n> Hello Ann, it left our "
                                   "warehouse today.\n")
                imap.append(answer)
                page.wait_for_selector("text=Thanks, it is here!", timeout=30_000)  # live, no reload
                assert page.url == conversation_url
            with step("invite a user: the invitation arrives by mail", 2, 2):
                page.goto(parley.base + "/users")
                page.fill("#invite-email", "bo@acme.example")
                page.fill("#invite-name", "Bo")
                page.click("button:has-text('Invite')")
                page.wait_for_selector("#invite-emailed")
                invitation = smtp.wait_for(2, timeout=30)[1]
                assert "bo@acme.example" in str(invitation["To"]), invitation["To"]
                link = re.search(r"https://\S+", invitation.get_body(("plain",)).get_content())
                assert link, invitation.get_body(("plain",)).get_content()
            with step("Forgot password?: the link arrives by mail", 2, 1):
                other = browser.new_context(ignore_https_errors=True).new_page()
                other.goto(parley.base + "/login")
                other.click("#forgot-password")
                other.fill("#email", parley.first_run["login"])
                other.click("button:has-text('Email me a link')")
                other.wait_for_load_state()
                reset = smtp.wait_for(3, timeout=30)[2]
                assert parley.first_run["login"] in str(reset["To"]), reset["To"]
                reset_link = re.search(r"https://\S+", reset.get_body(("plain",)).get_content())[0]
                other.goto(reset_link)
                assert other.locator("input[type=password]").count() >= 1, other.content()[:500]
            browser.close()
    finally:
        parley.stop()
        imap.stop()
        smtp.stop()
    total = {"machine_seconds": round(sum(s["seconds"] for s in steps), 1),
             "wall_seconds": round(time.monotonic() - started, 1),
             "clicks": sum(s["clicks"] for s in steps), "fields": sum(s["fields"] for s in steps), "steps": steps}
    print(json.dumps(total))


if __name__ == "__main__":
    main()
