"""Inbox, thread, contacts and lists pages (docs/design.md#api-decisions "Inbox (UI) and live events"), in-process over HTTP with
a cookie-keeping client: what each page shows, its actions, and that another account's ids are 404."""
import base64
import re


from common.ids import now_iso
from services import accounts, contacts as contact_service, inbox, messaging
from storage import bot_state
from storage.db import fetch_one
from tests.media_files import PNG
from tests.inbound_helpers import inbound
from tests.ui_helpers import link_ids


# ---- inbox ----------------------------------------------------------------------------------

async def test_inbox_lists_conversations_by_last_activity_with_counts(signed_in, services, ui_account, other):
    account_id = ui_account["account_id"]
    ada = await inbound(services, account_id, "+14155552671", "First from Ada", first_name="Ada",
                        last_name="Lovelace", channel="webchat")
    bob = await inbound(services, account_id, "bob@example.com", "Bob here", first_name="Bob", channel="whatsapp")
    await inbound(services, account_id, "+14155552671", "Second   from\nAda", channel="webchat")
    page = await signed_in.get("/inbox")
    assert page.code == 200
    assert link_ids(page.text, "ct") == [ada["contact_id"], bob["contact_id"]]  # Ada wrote last
    assert "Ada Lovelace" in page.text and "2 unread" in page.text and "1 unread" in page.text
    assert "Second from Ada" in page.text  # the preview, whitespace folded
    assert "webchat" in page.text and "whatsapp" in page.text
    assert other["contact_id"] not in page.text and "theirs" not in page.text
    event_id = await inbox.current_event_id(services, ui_account["account_id"])
    assert f'data-live-after="{event_id}"' in page.text and "live.js" in page.text


async def test_inbox_filters_and_search(signed_in, services, ui_account, receiver):
    account_id = ui_account["account_id"]
    await accounts.update_settings(services.db, account_id, {"customChannelWebhookUrl": receiver.url})
    ada = await inbound(services, account_id, "+14155552671", "hi", first_name="Ada", last_name="Lovelace")
    bob = await inbound(services, account_id, "bob@example.com", "hi", first_name="Bob")
    cy = await inbound(services, account_id, "+442071838750", "hi", first_name="Cy")
    await inbox.mark_read(services, account_id, cy["contact_id"], cy["id"])
    receiver.answers = [(410, {}, b"gone")]
    await messaging.send_reply(services, account_id, bob["contact_id"], "sorry", author="bot")
    await services.delivery.run_due()
    await services.db.write(bot_state.pause_in_tx, account_id, ada["contact_id"], "2999-01-01T00:00:00.000Z",
                            "handoff", now_iso())

    async def shown(query):  # "All" unless the query names a view (the default view is "Needs reply")
        query = query if "filter=" in query else "filter=all&" + query
        return set(link_ids((await signed_in.get("/inbox/conversations?" + query)).text, "ct"))

    everyone = {ada["contact_id"], bob["contact_id"], cy["contact_id"]}
    assert await shown("filter=all") == everyone
    assert await shown("filter=unread") == {ada["contact_id"], bob["contact_id"]}
    assert await shown("filter=failed") == {bob["contact_id"]}
    assert await shown("filter=paused") == {ada["contact_id"]}
    assert await shown("q=lovelace") == {ada["contact_id"]}  # name, case-insensitive
    assert await shown("q=ada+love") == {ada["contact_id"]}  # first and last name together
    assert await shown("q=BOB%40example") == {bob["contact_id"]}  # email
    assert await shown("q=%2B1+(415)+555") == {ada["contact_id"]}  # phone digits, however written
    assert await shown("q=20+7183") == {cy["contact_id"]}
    assert await shown("q=100%25") == set()  # LIKE wildcards are literal
    assert await shown("filter=unread&q=bob") == {bob["contact_id"]}
    page = await signed_in.get("/inbox?filter=failed")
    assert "1 failed" in page.text and 'aria-current="page">Failed deliveries' in page.text
    assert (await signed_in.get("/inbox?filter=nope")).code == 400


async def test_inbox_pages_with_a_cursor(signed_in, services, ui_account, monkeypatch):
    account_id = ui_account["account_id"]
    made = [await inbound(services, account_id, f"+1415555{2600 + n}", f"n{n}") for n in range(5)]
    # The order of one whole page: newest first; two messages of the same millisecond are ordered by their ids,
    # whose random part may put the later one first.
    whole = link_ids((await signed_in.get("/inbox")).text, "ct")
    assert sorted(whole) == sorted(m["contact_id"] for m in made)
    assert whole[0] == made[-1]["contact_id"] or made[-1]["created_at"] == made[-2]["created_at"]
    monkeypatch.setattr(inbox, "PAGE_SIZE", 2)
    seen, url = [], "/inbox"
    while url:
        page = (await signed_in.get(url)).text
        seen += link_ids(page, "ct")
        match = re.search(r'href="(/inbox\?filter=[a-z_]+&amp;q=&amp;before=[^"]+)"', page)
        url = match.group(1).replace("&amp;", "&") if match else None
    assert seen == whole  # every conversation once, in the same order, across pages of two


# ---- thread ---------------------------------------------------------------------------------

async def test_thread_shows_authors_media_delivery_and_the_bot_outcome(signed_in, services, ui_account, receiver):
    account_id = ui_account["account_id"]
    await accounts.update_settings(services.db, account_id, {"customChannelWebhookUrl": receiver.url})
    image = "data:image/png;base64," + base64.b64encode(PNG).decode()
    first = await inbound(services, account_id, body="Here is a photo", media_url=image,
                          media_content_type="image/png", first_name="Ada")
    contact_id = first["contact_id"]
    await inbound(services, account_id, body="And a link", media_url="https://files.example/doc.pdf",
                  media_content_type="application/pdf")
    await services.db.write(bot_state.set_outcome_in_tx, account_id, first["id"],
                            {"outcome": "no_answer", "detail": "no keyword matched"})
    user = await services.db.read(fetch_one, "SELECT id FROM users WHERE account_id = ?", (account_id,))
    await messaging.send_reply(services, account_id, contact_id, "Typed by a person", author="user",
                               author_user_id=user["id"])
    await messaging.send_reply(services, account_id, contact_id, "From the bot", author="bot")
    await messaging.send_reply(services, account_id, contact_id, "From a campaign", author="campaign",
                               campaign_id="spring")
    receiver.answers = [(200, {}, b"ok"), (503, {}, b"busy"), (200, {}, b"ok")]
    await services.delivery.run_due()
    await messaging.send_reply(services, account_id, contact_id, "Still pending", author="api")

    page = await signed_in.get(f"/inbox/{contact_id}")
    assert page.code == 200
    html = page.text
    items = re.findall(r'<li class="message (inbound|outbound)" id="m-(msg_[0-9a-z]+)"', html)
    assert len(items) == 6 and items[0] == ("inbound", first["id"])
    assert 'class="author">Ada<' in html and 'class="author">User owner@acme.example<' in html
    assert 'class="author">Bot<' in html and 'class="author">Campaign spring<' in html
    assert 'class="author">API<' in html
    # A stored image inline through a same-origin signed path (the page's CSP allows only 'self').
    assert re.search(r'<img src="/v1/media/[0-9a-f]{64}\?type=image%2Fpng&amp;exp=\d+&amp;sig=', html)
    assert 'href="https://files.example/doc.pdf" rel="noopener noreferrer" download' in html
    assert "Download attachment (application/pdf)" in html
    assert html.count("Sent</p>") == 2 and "Pending</p>" in html
    assert "Failed</p>" in html and "HTTP 503" in html and "Next automatic retry" in html
    assert html.count('class="retry"') == 1  # a Retry button only on the Failed message
    assert "Bot: no rule matched</span> no keyword matched" in html
    assert "Bot off for this account" in html  # the account's bot is off: the thread says so


def test_every_bot_outcome_has_a_label_in_the_thread():
    from services.bot import OUTCOMES
    assert set(inbox.BOT_OUTCOMES) == set(OUTCOMES)


async def test_opening_a_thread_marks_it_read(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    message = await inbound(services, account_id)
    await inbound(services, account_id)
    assert "2 unread" in (await signed_in.get("/inbox")).text
    await signed_in.get(f"/inbox/{message['contact_id']}")
    assert "badge-unread" not in (await signed_in.get("/inbox/conversations")).text
    latest = await inbound(services, account_id)  # arrives while the thread is open
    fragment = await signed_in.get(f"/inbox/{message['contact_id']}/messages?after={message['id']}")
    assert fragment.text.count('class="message inbound"') == 2 and latest["id"] in fragment.text
    r = await signed_in.post(f"/inbox/{message['contact_id']}/read", {"through": latest["id"]},
                             headers={"Accept": "application/json"})
    assert r.code == 204
    assert "badge-unread" not in (await signed_in.get("/inbox/conversations")).text


async def test_a_script_body_is_shown_as_text(signed_in, services, ui_account):
    body = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    message = await inbound(services, ui_account["account_id"], body=body, first_name="<b>Eve</b>")
    for path in ("/inbox", f"/inbox/{message['contact_id']}", "/inbox/conversations"):
        html = (await signed_in.get(path)).text
        assert "<script>alert" not in html and "<img src=x" not in html and "<b>Eve" not in html
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html and "&lt;b&gt;Eve&lt;/b&gt;" in html


async def test_a_reply_goes_out_as_the_user_and_resume_ends_a_pause(signed_in, services, ui_account, receiver):
    account_id = ui_account["account_id"]
    message = await inbound(services, account_id, channel="webchat")
    contact_id = message["contact_id"]
    r = await signed_in.post(f"/inbox/{contact_id}/reply", {"body": "Hi from a person"})
    assert r.code == 400 and "no Custom Channel Webhook URL" in r.text  # an HTML page saying why
    await accounts.update_settings(services.db, account_id, {"customChannelWebhookUrl": receiver.url})
    r = await signed_in.post(f"/inbox/{contact_id}/reply", {"body": "  "}, headers={"Accept": "application/json"})
    assert r.code == 400 and '"body cannot be empty"' in r.text
    r = await signed_in.post(f"/inbox/{contact_id}/reply", {"body": "Hi from a person"})
    assert (r.code, r.headers["Location"]) == (303, f"/inbox/{contact_id}")
    reply = await services.db.read(fetch_one, "SELECT m.author, u.email, m.to_id, m.channel, m.status FROM messages m"
                                              " JOIN users u ON u.id = m.author_user_id WHERE m.direction = 'outbound'")
    assert dict(reply) == {"author": "user", "email": "owner@acme.example", "to_id": "+14155552671",
                           "channel": "webchat", "status": "Pending"}
    await services.delivery.run_due()
    assert receiver.requests[-1]["body"].decode().count("Hi from a person") == 1
    # That reply paused the bot for this contact, in its own transaction (pauseMinutesAfterHumanReply).
    page = (await signed_in.get(f"/inbox/{contact_id}")).text
    # The account's bot is off: that is the state; the pause is a note of what happens once it is on.
    assert "it stays quiet for this contact until" in page and "a person replied" in page and "Resume bot" in page
    r = await signed_in.post(f"/inbox/{contact_id}/resume-bot", headers={"Accept": "application/json"})
    assert r.code == 204
    state = (await signed_in.get(f"/inbox/{contact_id}/bot")).text
    assert "Bot off for this account." in state and "stays quiet" not in state


async def test_retry_from_the_thread(signed_in, services, ui_account, receiver):
    account_id = ui_account["account_id"]
    await accounts.update_settings(services.db, account_id, {"customChannelWebhookUrl": receiver.url})
    message = await inbound(services, account_id)
    contact_id = message["contact_id"]
    receiver.answers = [(410, {}, b"gone")]
    reply = await messaging.send_reply(services, account_id, contact_id, "Hello", author="bot")
    await services.delivery.run_due()
    fragment = (await signed_in.get(f"/inbox/{contact_id}/messages/{reply['messageId']}")).text
    assert "Failed</p>" in fragment and "HTTP 410" in fragment and "No more automatic retries." in fragment
    r = await signed_in.post(f"/inbox/{contact_id}/messages/{reply['messageId']}/retry",
                             headers={"Accept": "application/json"})
    assert r.code == 204
    assert "Pending</p>" in (await signed_in.get(f"/inbox/{contact_id}/messages/{reply['messageId']}")).text
    await services.delivery.run_due()
    assert "Sent</p>" in (await signed_in.get(f"/inbox/{contact_id}/messages/{reply['messageId']}")).text
    r = await signed_in.post(f"/inbox/{contact_id}/messages/{reply['messageId']}/retry",
                             headers={"Accept": "application/json"})
    assert r.code == 409 and "only a Failed message can be retried" in r.text
    r = await signed_in.post(f"/inbox/{contact_id}/messages/{message['id']}/retry")  # inbound
    assert r.code == 404


async def test_another_accounts_ids_are_404_on_every_page_and_action(signed_in, services, ui_account, other):
    contact_id, message_id = other["contact_id"], other["message_id"]
    lst = await contact_service_list(services, other["account_id"])
    for path in (f"/inbox/{contact_id}", f"/inbox/{contact_id}/messages?after=", f"/inbox/{contact_id}/bot",
                 f"/inbox/{contact_id}/messages/{message_id}", f"/contacts/{contact_id}", f"/lists/{lst}"):
        r = await signed_in.get(path)
        assert r.code == 404, path
        assert "theirs" not in r.text and "+14155550000" not in r.text
    mine = await inbound(services, ui_account["account_id"])
    for path, form in ((f"/inbox/{contact_id}/reply", {"body": "x"}), (f"/inbox/{contact_id}/resume-bot", {}),
                       (f"/inbox/{contact_id}/read", {"through": message_id}),
                       (f"/inbox/{contact_id}/messages/{message_id}/retry", {}),
                       (f"/inbox/{mine['contact_id']}/messages/{message_id}/retry", {}),
                       (f"/contacts/{contact_id}/lists", {"listId": lst}),
                       (f"/contacts/{mine['contact_id']}/lists", {"listId": lst}),
                       (f"/lists/{lst}", {"contact": mine["contact_id"]})):
        r = await signed_in.post(path, form)
        assert r.code == 404, path
    theirs = await services.db.read(fetch_one, "SELECT COUNT(*) AS n FROM messages WHERE account_id = ?",
                                    (other["account_id"],))
    assert theirs["n"] == 1


async def contact_service_list(services, account_id):
    from services import lists
    return (await lists.create_list(services.db, account_id, "Theirs"))["id"]


async def test_pages_need_a_session(browser):
    for path in ("/inbox", "/inbox/conversations", "/contacts", "/lists"):
        r = await browser.get(path)
        assert r.code == 302 and r.headers["Location"].startswith("/login?next=")


# ---- contacts and lists ---------------------------------------------------------------------

async def test_contacts_search_create_and_page(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    r = await signed_in.post("/contacts", {"firstName": "Ada", "phone": "415 555"})
    assert r.code == 400 and "phone must include the country code" in r.text and 'value="Ada"' in r.text
    r = await signed_in.post("/contacts", {"firstName": "Ada", "lastName": "Lovelace", "phone": "+1 415 555 2671"})
    assert r.code == 303
    contact_id = r.headers["Location"].rsplit("/", 1)[1]
    r = await signed_in.post("/contacts", {"email": "x@example.com", "phone": "+14155552671"})
    assert r.headers["Location"] == f"/contacts/{contact_id}"  # the existing contact, as POST /v1/contacts does
    await contact_service.create_contact(services.db, account_id, first_name="Bob", email="bob@example.com")
    listing = (await signed_in.get("/contacts?q=lovelace")).text
    assert f'href="/contacts/{contact_id}"' in listing and "bob@example.com" not in listing
    assert "bob@example.com" in (await signed_in.get("/contacts?q=BOB")).text
    assert "Ada Lovelace" in (await signed_in.get("/contacts?q=%2B1+415-555")).text
    page = (await signed_in.get(f"/contacts/{contact_id}")).text
    assert "+14155552671" in page and "Opted out</dt><dd>No" in page
    assert f'href="/inbox/{contact_id}"' in page and "Not on any list." in page


async def test_lists_create_members_and_add_from_the_contact_page(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    ada, _ = await contact_service.create_contact(services.db, account_id, first_name="Ada", phone="+14155552671")
    bob, _ = await contact_service.create_contact(services.db, account_id, first_name="Bob", email="bob@example.com")
    assert (await signed_in.post("/lists", {"name": "  "})).code == 400
    r = await signed_in.post("/lists", {"name": "Leads"})
    list_id = r.headers["Location"].rsplit("/", 1)[1]
    assert "Leads" in (await signed_in.get("/lists")).text
    for text in ("+1 415 555 2671", "BOB@example.com", ada["id"]):
        r = await signed_in.post(f"/lists/{list_id}", {"contact": text})
        assert r.code == 303
    r = await signed_in.post(f"/lists/{list_id}", {"contact": "+14155550000"})
    assert r.code == 400 and "no contact with phone +14155550000" in r.text
    page = (await signed_in.get(f"/lists/{list_id}")).text
    assert "Members</dt><dd>2" in page and "Ada" in page and "bob@example.com" in page
    r = await signed_in.post("/lists", {"name": "Customers"})
    customers = r.headers["Location"].rsplit("/", 1)[1]
    contact_page = (await signed_in.get(f"/contacts/{ada['id']}")).text
    assert f'<option value="{customers}">Customers</option>' in contact_page and "Leads</a>" in contact_page
    r = await signed_in.post(f"/contacts/{ada['id']}/lists", {"listId": customers})
    assert r.code == 303
    assert "Customers</a>" in (await signed_in.get(f"/contacts/{ada['id']}")).text
