#!/usr/bin/env python3
"""`make screenshots`: the admin UI's pages as PNGs in docs/screenshots/, taken with Debian's Chromium from a
real server (HTTPS, a fresh data directory) filled with demo data.

PAGES is the list of shots: (file name, path, phone width?[, "agency"]). A path may use the demo's ids as
{ada}, {ben}, {cleo}, {leads}, {rossi}, {spring}, {loyalty}, {november}, {reset} (see seed(), seed_agency(),
seed_campaigns() and seed_imports()); "agency" shoots it signed in as the demo agency rather than the first-run
owner, "viewas" as the agency viewing its sub-account Corner Shop, "anonymous" signed out. A new page adds a line
here and, if it
needs data, a few lines to seed().

    python scripts/screenshots.py [--out docs/screenshots] [--only inbox,thread]
"""
import argparse
import base64
import contextlib
import os
import sqlite3
import struct
import sys
import time
import zlib
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.parley_process import ParleyProcess, ThreadedReceiver, run_cli  # noqa: E402
from tests.team_users import add_user_to_server  # noqa: E402

PAGES = [
    ("inbox", "/inbox", False),
    ("inbox-phone", "/inbox", True),
    ("thread", "/inbox/{ada}", False),
    ("thread-failed", "/inbox/{ben}", False),
    ("thread-phone", "/inbox/{ada}", True),
    ("thread-handoff", "/inbox/{cleo}", False),
    ("settings", "/settings", False),
    ("set-password", "{reset}", False, "anonymous"),
    ("set-password-phone", "{reset}", True, "anonymous"),
    ("credits-viewing-as", "/credits", False, "viewas"),
    ("credits-viewing-as-phone", "/credits", True, "viewas"),
    ("contacts", "/contacts", False),
    ("contact", "/contacts/{ada}", False),
    ("contact-phone", "/contacts/{ada}", True),
    ("contact-erase", "/contacts/{ada}/erase", False),
    ("contact-erase-phone", "/contacts/{ada}/erase", True),
    ("lists", "/lists", False),
    ("lists-phone", "/lists", True),
    ("list", "/lists/{leads}", False),
    ("list-phone", "/lists/{leads}", True),
    ("list-delete", "/lists/{leads}/delete", False),
    ("import", "/contacts/import", False),
    ("import-phone", "/contacts/import", True),
    ("import-done", "/contacts/import/{november}", False),
    ("import-done-phone", "/contacts/import/{november}", True),
    ("bot", "/bot", False),
    ("bot-phone", "/bot", True),
    ("agency", "/agency", False, "agency"),
    ("agency-phone", "/agency", True, "agency"),
    ("subaccount", "/agency/subaccounts/{rossi}", False, "agency"),
    ("subaccount-phone", "/agency/subaccounts/{rossi}", True, "agency"),
    ("canned-replies", "/canned-replies", False),
    ("canned-replies-phone", "/canned-replies", True),
    ("thread-note", "/inbox/{dominique}", False),
    ("thread-note-phone", "/inbox/{dominique}", True),
    ("campaigns", "/campaigns", False),
    ("campaign", "/campaigns/{spring}", False),
    ("campaign-phone", "/campaigns/{spring}", True),
    ("campaign-paused", "/campaigns/{loyalty}", False),
    ("campaign-paused-phone", "/campaigns/{loyalty}", True),
    ("campaign-draft", "/campaigns/{draft}", False),
    ("users", "/users", False),
    ("users-phone", "/users", True),
    ("audit", "/audit", False),
    ("audit-phone", "/audit", True),
    ("reports", "/reports", False),
    ("reports-phone", "/reports", True),
    ("docs", "/docs", False),
    ("docs-phone", "/docs", True),
]
FULL_PAGE = {"campaign", "campaign-paused", "campaign-draft", "contact", "list", "thread", "reports"}  # desktop shots taken whole: tables and forms below the fold
DESKTOP = {"width": 1100, "height": 820}
PHONE = {"width": 390, "height": 844}
FAILING_TO_ID = "+447700900123"  # the demo receiver refuses replies to this contact (to show a Failed one)
# The demo campaign's contacts whose messages the receiver refuses: for good (410), and for now (503, retry later).
GONE_PHONE, BUSY_PHONE = "+16465550107", "+16465550104"
INBOUND = "/v1/incoming_custom_channel_message"
AGENCY = {"email": "ops@northwind.example", "password": "demo agency password"}


def demo_receiver():
    """The demo's Custom Channel Webhook: 200, except 503 (retry in an hour) for FAILING_TO_ID and BUSY_PHONE,
    and 410 for GONE_PHONE."""
    def answer(body):
        phone = (body.get("contact") or {}).get("phone")
        if body.get("toId") == FAILING_TO_ID or phone == BUSY_PHONE:
            return 503, {"Retry-After": "3600"}
        return (410, {}) if phone == GONE_PHONE else (200, {})
    return ThreadedReceiver(answer)


def demo_png(width=240, height=150):
    """A small gradient picture for the image attachment (a real PNG, made here)."""
    rows = b"".join(b"\x00" + bytes(v for x in range(width) for v in (40 + x * 180 // width, 90 + y, 200 - y // 2))
                    for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def seed(parley, page):
    """Demo conversations, contacts and lists; returns the ids the PAGES paths use."""
    key = {"apiKey": parley.first_run["api_key"]}
    receiver = demo_receiver()
    sid = iter(range(1, 10_000))
    with parley.client() as api:
        def inbound(from_id, body, **custom):
            r = api.post(INBOUND, params=key, json={"customData": {"messageSid": f"demo-{next(sid)}", "fromId": from_id,
                                                                   "toId": "shop", "body": body, **custom}})
            r.raise_for_status()
            message_id = r.json()["messageId"]
            _wait_for_the_bot(api, key, message_id)  # its answer comes before the next message, as in a chat
            return message_id, api.get(f"/v1/messages/{message_id}", params=key).json()["contactId"]

        def send(from_id, channel, body):
            api.post("/v1/send_custom_channel_message", params=key, json={"customData": {
                "fromId": from_id, "customChannel": channel, "body": body}}).raise_for_status()

        api.patch("/v1/account/settings", params=key, json={"customChannelWebhookUrl": receiver.url, "bot": {
            "active": True, "handoffKeywords": ["person", "human"],
            "rules": [{"keywords": ["in stock", "stock"], "answer": "Let me check the shelf for you: a person will "
                                                                    "confirm in a minute."},
                      {"keywords": ["livrez", "deliver", "shipping"], "answer": "We ship to the EU in 3-5 days."}]}}
                  ).raise_for_status()
        picture = "data:image/png;base64," + base64.b64encode(demo_png()).decode()
        _, ada = inbound("+14155552671", "Hi! Is the blue lamp still in stock?", channel="webchat",
                                 firstName="Ada", lastName="Lovelace", email="ada@example.com")
        inbound("+14155552671", "This one, from your catalogue:", channel="webchat", mediaUrl=picture,
                mediaContentType="image/png")
        send("+14155552671", "webchat", "Yes, we have 4 left. Shall I put one aside for you?")
        _, ben = inbound(FAILING_TO_ID, "Where is my order #1042?", channel="whatsapp", firstName="Ben",
                         lastName="Okafor")
        send(FAILING_TO_ID, "whatsapp", "Let me check with the warehouse and get back to you.")
        _, cleo = inbound("cleo@example.com", "Can I talk to a person, please?", channel="email-bridge",
                          firstName="Cleo")
        _, dominique = inbound("+33612345678", "Bonjour, vous livrez en France ?", channel="webchat",
                               firstName="Dominique")
        _, eve = inbound("+14155550199", "Thanks, got it!", channel="sms", firstName="Eve", lastName="Martin")
        lists = {}
        for name in ("Leads", "Newsletter", "VIP customers"):
            lists[name] = api.post("/v1/lists", params=key, json={"name": name}).json()["id"]
        for contact in (ada, ben, cleo):
            api.post(f"/v1/lists/{lists['Leads']}/contacts", params=key, json={"contactId": contact}).raise_for_status()
        api.post(f"/v1/lists/{lists['VIP customers']}/contacts", params=key, json={"contactId": ada}).raise_for_status()
        for n, (first, last) in enumerate((("Farah", "Haddad"), ("Gus", "Ivanov"), ("Hana", "Sato"))):
            api.post("/v1/contacts", params=key, json={"firstName": first, "lastName": last,
                                                       "phone": f"+1415555{3000 + n}"}).raise_for_status()
        for code, body in (("thanks", "Thanks {{firstName}}, we are on it!"),
                           ("hours", "We are open Monday to Saturday, 9:00-18:00."),
                           ("shipping", "Hi {{firstName}}, we ship to the EU in 3-5 working days.")):
            api.post("/v1/canned-replies", params=key, json={"code": code, "body": body}).raise_for_status()

        # A teammate; conversations assigned, resolved and snoozed (the team views, issue 21).
        sam = add_user_to_server(parley, key["apiKey"], "sam@example.com", "sam's demo password")
        owner = sqlite3.connect(parley.data_dir / "parley.db").execute(
            "SELECT id FROM users WHERE account_id = ? AND is_owner = 1", (parley.first_run["account_id"],)).fetchone()[0]
        api.patch(f"/v1/conversations/{ada}", params=key, json={"assigneeUserId": owner}).raise_for_status()
        api.patch(f"/v1/conversations/{ben}", params=key, json={"assigneeUserId": sam}).raise_for_status()
        api.patch(f"/v1/conversations/{cleo}", params=key, json={"status": "pending"}).raise_for_status()
        api.patch(f"/v1/conversations/{eve}", params=key, json={"status": "resolved"}).raise_for_status()

    # A reply typed in the inbox by the signed-in user.
    page.goto(parley.base + f"/inbox/{ada}")
    page.fill("#reply-body", "I have put one aside for you until Friday.")
    page.click("button:has-text('Send reply')")
    page.wait_for_selector(".message.outbound >> nth=1")
    # A private note typed in the thread (the reply box in Note mode).
    page.goto(parley.base + f"/inbox/{dominique}")
    page.click("#mode-note")
    page.fill("#reply-body", "French customer: Camille from the Lyon shop speaks French, ask her to answer.")
    page.click("button:has-text('Add note')")
    page.wait_for_selector(".message.note")
    time.sleep(1.5)  # deliveries settle (the demo receiver answers at once)
    return {"ada": ada, "ben": ben, "cleo": cleo, "dominique": dominique, "leads": lists["Leads"]}


def _wait_for_the_bot(api, key, message_id, timeout=10):
    """The bot answers after the 200: wait until it recorded its outcome on the message."""
    deadline = time.monotonic() + timeout
    while not api.get(f"/v1/messages/{message_id}", params=key).json()["bot"]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the demo bot did not answer {message_id}")
        time.sleep(0.05)


def seed_team(parley):
    """The owner's team (issue 21): an admin, two agents (one deactivated), a settings change; the Audit page
    lists them."""
    key = {"apiKey": parley.first_run["api_key"]}
    with parley.client() as api:
        made = {}
        for email, name, role in (("priya@acme.example", "Priya Shah", "admin"), ("sam@acme.example", "Sam Rivera",
                                                                                   "agent"),
                                  ("tom@acme.example", "Tom Ek", "agent")):
            r = api.post("/v1/users", params=key, json={"email": email, "name": name, "role": role})
            r.raise_for_status()
            made[email] = r.json()["id"]
        api.patch(f"/v1/users/{made['tom@acme.example']}", params=key, json={"active": False}).raise_for_status()
    return {}


def seed_campaigns(parley):
    """Campaigns to a list of their own (so the other pages' demo stays as it was): one finished with a skipped
    (opted-out) contact and two failures, one paused, one scheduled next week, one draft."""
    key = {"apiKey": parley.first_run["api_key"]}
    names = ("Iris Novak", "Jonas Berg", "Kemal Aydin", "Lena Fischer", "Mateo Ruiz", "Nora Quinn", "Omar Haddad",
             "Pia Lund", "Quentin Roy", "Rosa Diaz")
    with parley.client() as api:
        def make(path, fields):
            r = api.post(path, params=key, json=fields)
            r.raise_for_status()
            return r.json()

        fair = make("/v1/lists", {"name": "Spring fair visitors"})["id"]
        for n, full in enumerate(names):
            first, last = full.split()
            contact = make("/v1/contacts", {"firstName": first, "lastName": last, "phone": f"+1646555{100 + n:04d}"})
            make(f"/v1/lists/{fair}/contacts", {"contactId": contact["id"]})
        make(INBOUND, {"customData": {"messageSid": "demo-stop", "fromId": "+16465550109", "toId": "shop",
                                      "body": "STOP", "channel": "sms"}})  # Rosa opts out: skipped
        spring = make("/v1/campaigns", {"name": "Spring fair thank-you", "listId": fair, "campaignId": "spring-fair",
                                        "body": "Hi {{firstName}}, thanks for visiting our stand! 10% off with FAIR10."})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            counts = api.get(f"/v1/campaigns/{spring['id']}", params=key).json()["counts"]
            if counts["pending"] == counts["queued"] == 0:
                break
            time.sleep(0.2)
        paused = make("/v1/campaigns", {"name": "Loyalty card reminder", "listId": fair, "ratePerMinute": 2,
                                        "body": "{{firstName}}, your loyalty card has 40 points waiting."})
        time.sleep(1)
        make(f"/v1/campaigns/{paused['id']}/pause", {})
        week = time.strftime("%Y-%m-%dT10:00:00Z", time.gmtime(time.time() + 7 * 86400))
        make("/v1/campaigns", {"name": "Summer preview", "listId": fair, "startAt": week,
                               "body": "Hi {{firstName}}, the summer collection is here next week."})
        draft = make("/v1/campaigns", {"name": "Autumn opening hours", "listId": fair, "draft": True,
                                       "body": "Hi {{firstName}}, from October we open at 7 on weekdays."})
    return {"spring": spring["id"], "loyalty": paused["id"], "draft": draft["id"]}


def seed_reports(parley):
    """A month of backdated activity (tests/report_seed.py) so that the Reports' charts have something to show."""
    from storage.db import connect_sync
    from tests.report_seed import seed_history
    with parley.client() as api:
        r = api.get("/v1/account", params={"apiKey": parley.first_run["api_key"]})
        r.raise_for_status()
    cx = connect_sync(parley.data_dir / "parley.db")
    try:
        seed_history(cx, r.json()["id"], days=30)
    finally:
        cx.close()
    return {}


def seed_imports(parley, work):
    """One finished import in the owner's history (the ops command, as an operator would run it), into a list
    of its own."""
    path = Path(work) / "spring-fair-leads.csv"
    path.write_text("First name,Last name,Mobile,E-mail\n" + "".join(
        f"Guest,{n},+1 646 555 {1000 + n:04d},guest{n}@example.com\n" for n in range(6)) + "Bad,Row,12345,\n")
    with parley.client() as api:
        r = api.post("/v1/lists", params={"apiKey": parley.first_run["api_key"]}, json={"name": "November import"})
        r.raise_for_status()
    done = run_cli(parley.data_dir, "import-contacts", "--email", parley.first_run["login"], str(path),
                   "--list", r.json()["id"])
    return {"november": done["import_id"]}


def seed_agency(parley):
    """A demo agency (through the ops command) with sub-accounts, grants and an auto-recharge setting."""
    agency = run_cli(parley.data_dir, "create-account", "--name", "Northwind Agency", "--email", AGENCY["email"],
                     "--agency", "--password", AGENCY["password"])
    headers = {"x-api-key": agency["api_key"]}
    ids = {}
    with parley.client() as api:
        for name, email, grants, recharge in (
                ("Rossi Bakery", "orders@rossi-bakery.example", (250, 40), {"threshold": 50, "amount": 200}),
                ("Corner Shop", "hello@corner-shop.example", (30,), {"threshold": 50, "amount": 100}),
                ("Lakeside Dental", "front-desk@lakeside-dental.example", (500,), {"threshold": 100, "amount": 500})):
            r = api.post("/v1/subaccounts", headers=headers, json={"name": name, "email": email})
            r.raise_for_status()
            ids[name] = r.json()["id"]
            for amount in grants:
                api.post("/v1/subaccounts/credits", headers=headers, json={
                    "email": email, "amount": amount, "description": "Monthly top-up"}).raise_for_status()
            if recharge:
                api.patch(f"/v1/subaccounts/{ids[name]}", headers=headers,
                          json={"autoRecharge": recharge}).raise_for_status()
    reset = run_cli(parley.data_dir, "reset-password", "--email", "hello@corner-shop.example")
    return {"rossi": ids["Rossi Bakery"], "corner": ids["Corner Shop"], "reset": urlsplit(reset["signInUrl"]).path}


def sign_in(context, parley, email, password):
    page = context.new_page()
    page.goto(parley.base + "/login")
    page.fill("#email", email)
    page.fill("#password", password)
    page.click("button:has-text('Sign in')")
    page.wait_for_url("**/inbox")
    return page


@contextlib.contextmanager
def _started(process):
    """The server, given two minutes to start: its first start on a loaded machine writes a certificate."""
    try:
        yield process.start(timeout=120)
    finally:
        process.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--only", help="comma-separated shot names")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    from playwright.sync_api import sync_playwright
    import tempfile

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="parley-shots-") as work, \
            _started(ParleyProcess(Path(work) / "data", "--allow-private-webhooks", http=False)) as parley, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=os.environ.get("PARLEY_CHROMIUM", "/usr/bin/chromium"),
                                             args=["--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
        pages, ids = {}, {}
        for who, email, password in (("owner", parley.first_run["login"], parley.first_run["password"]),
                                     ("agency", AGENCY["email"], AGENCY["password"])):
            if who == "agency":
                ids.update(seed_agency(parley))
            context = browser.new_context(ignore_https_errors=True, viewport=DESKTOP, locale="en-US",
                                          timezone_id="UTC")
            pages[who] = sign_in(context, parley, email, password)
            if who == "owner":
                ids.update(seed(parley, pages[who]))
                ids.update(seed_imports(parley, work))
                ids.update(seed_campaigns(parley))
                ids.update(seed_team(parley))
                ids.update(seed_reports(parley))
        context = browser.new_context(ignore_https_errors=True, viewport=DESKTOP, locale="en-US", timezone_id="UTC")
        pages["viewas"] = sign_in(context, parley, AGENCY["email"], AGENCY["password"])
        pages["viewas"].goto(parley.base + f"/agency/subaccounts/{ids['corner']}")
        pages["viewas"].click("button:has-text('View as Corner Shop')")
        pages["anonymous"] = browser.new_context(ignore_https_errors=True, viewport=DESKTOP, locale="en-US",
                                                 timezone_id="UTC").new_page()
        for name, path, phone, *who in PAGES:
            if only and name not in only:
                continue
            page = pages[who[0] if who else "owner"]
            page.set_viewport_size(PHONE if phone else DESKTOP)
            page.goto(parley.base + path.format(**ids))
            if page.locator("#live-status").count():
                page.wait_for_selector("#live-status[data-state=live]")
            rendered = page.locator("#redoc").count()  # /docs: Redoc renders the document after loading it
            if rendered:
                page.get_by_text("/v1/contacts", exact=True).first.wait_for(state="attached", timeout=60_000)
            page.evaluate("document.querySelector('footer') && document.querySelector('footer').remove()")
            target = args.out / f"{name}.png"
            page.screenshot(path=str(target), full_page=(phone or name in FULL_PAGE) and not rendered)
            print(f"{target} ({target.stat().st_size // 1024} KB)")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
