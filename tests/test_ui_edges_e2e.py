"""The UI's rough edges from the first-fifteen-minutes walk (issue 26 item 4), in Chromium against the real
server: table cells keep their words whole, service texts in the UI's words and times in the viewer's zone,
the country picker's names, the Bot page's "Add a rule", the finished import's list, a paused campaign."""
import re

import pytest

from tests.parley_process import first_run_receiver, run_cli
from tests.waiting import wait_until
from tests.ui_helpers import open_page, sign_in

INBOUND = "/v1/incoming_custom_channel_message"
ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")
# Every word of a table's cells (and headers) on one line: a word the layout broke has two boxes.
BROKEN_WORDS = """() => {
  const broken = [];
  document.querySelectorAll("table.stack th, table.stack td").forEach((cell) => {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.data.matchAll(/[^\\s-]+/g)) {  // a hyphen is a place to break
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (lines.size > 1) broken.push(match[0]);
      }
    }
  });
  return broken;
}"""


@pytest.fixture(scope="module")
def key(parley):
    return {"apiKey": parley.first_run["api_key"]}


@pytest.fixture
def desktop(chromium):
    context, page = open_page(chromium, viewport={"width": 1100, "height": 820}, timezone_id="Asia/Tokyo")
    yield page
    context.close()


def test_browser_import_tables_keep_words_whole_name_their_list_and_countries(desktop, parley, key, tmp_path):
    with parley.client() as api:
        november = api.post("/v1/lists", params=key, json={"name": "November import"}).json()["id"]
    csv = tmp_path / "november-customers-from-the-old-crm-export.csv"
    csv.write_text("Given name,Family name,Mobile phone number,Electronic mail address\n" + "".join(
        f"Bartholomew,Featherstonehaugh-Cholmondeley,+1 646 555 {2000 + n:04d},"
        f"bartholomew.featherstonehaugh{n}@correspondence.example\n" for n in range(4)) + "Bad,Row,12345,\n")
    done = run_cli(parley.data_dir, "import-contacts", "--email", parley.first_run["login"], str(csv),
                   "--list", november)
    page = desktop
    sign_in(page, parley)
    page.goto(parley.base + f"/contacts/import/{done['import_id']}")
    link = page.locator("#import-list a")
    assert link.inner_text() == "November import" and link.get_attribute("href") == f"/lists/{november}"

    page.goto(parley.base + "/contacts/import")
    page.set_input_files("#import-file", str(csv))  # a draft: its page shows the preview table and the options
    page.click("button:has-text('Upload')")
    page.wait_for_selector("#defaultCountry")
    assert page.locator("#defaultCountry option[value=CH]").inner_text() == "Switzerland +41"
    labels = page.eval_on_selector_all("#defaultCountry option", "os => os.map(o => o.textContent)")[1:]
    assert labels[:2] == ["Afghanistan +93", "Åland Islands +358"]
    assert page.evaluate(BROKEN_WORDS) == []
    page.goto(parley.base + "/contacts/import")
    assert page.evaluate(BROKEN_WORDS) == []
    cell = page.locator("td[data-label=File]").first
    assert cell.get_attribute("title") == csv.name  # cut with an ellipsis; the whole name on hover
    page.goto(parley.base + "/lists")
    assert page.evaluate(BROKEN_WORDS) == []
    assert "UTC" not in page.inner_text("main")  # times in the viewer's zone
    assert page.console_errors == []


def test_browser_thread_says_bot_outcomes_in_words_with_local_times_and_links_settings(desktop, parley, key):
    with parley.client() as api:
        r = api.post(INBOUND, params=key, json={"customData": {"messageSid": "edge-1", "fromId": "walker-1",
                                                               "toId": "shop", "body": "Hello"}})
        contact_id = api.get(f"/v1/messages/{r.json()['messageId']}", params=key).json()["contactId"]
    page = desktop
    sign_in(page, parley)
    page.goto(parley.base + f"/inbox/{contact_id}")
    page.fill("#reply textarea", "Hi!")
    page.click("#reply button[type=submit]")  # no Custom Channel Webhook yet
    page.wait_for_selector("#reply-error:not([hidden])")
    assert "PATCH" not in page.inner_text("#reply-error")
    assert page.locator("#reply-error a").get_attribute("href") == "/settings#custom-channel-webhook"
    page.console_errors.clear()  # the 400 the reply was answered with

    with first_run_receiver(parley), parley.client() as api:
        assert api.patch("/v1/account/settings", params=key, json={"bot": {
            "active": True, "handoffKeywords": ["human"]}}).status_code == 200
        for n, body in enumerate(("a human please", "still there?")):
            sent = api.post(INBOUND, params=key, json={"customData": {"messageSid": f"edge-{n + 2}",
                                                                      "fromId": "walker-1", "toId": "shop",
                                                                      "body": body}}).json()
            # The next message after the handoff is decided (the bot answers a contact's messages concurrently:
            # sent at once, the second could be read before the first's pause is written).
            wait_until(lambda: api.get(f"/v1/messages/{sent['messageId']}", params=key).json()["bot"] is not None)
        page.goto(parley.base + f"/inbox/{contact_id}")
        outcome = page.locator(".bot-outcome", has_text="until")
        outcome.wait_for()
        text = outcome.inner_text()
        assert "the contact asked for a person" in text and "handoff)" not in text
        assert not ISO.search(text) and "UTC" not in text  # parley.js wrote it in Tokyo time
        assert ISO.match(outcome.locator("time").get_attribute("datetime"))
        assert api.patch("/v1/account/settings", params=key, json={"bot": {"active": False}}).status_code == 200
    assert page.console_errors == []


def test_browser_bot_adds_a_rule_slot_at_once_and_numbers_rules_as_the_form(desktop, parley):
    page = desktop
    sign_in(page, parley)
    page.goto(parley.base + "/bot")
    slots = page.locator("#account-bot .rule").count()
    page.click("#account-bot button.add-rule")
    assert page.locator("#account-bot .rule").count() == slots + 1
    new = f"#acct-rule-{slots}"
    assert page.inner_text(f"label[for='{new[1:]}-keywords']") == f"Rule {slots + 1}: keywords"
    page.fill(f"{new}-keywords", "price")
    page.fill(f"{new}-answer", "From $10.")
    page.click("button:has-text('Save bot settings')")
    assert page.inner_text(".flash-success") == "Bot settings saved."
    assert page.input_value("#acct-rule-0-keywords") == "price"  # saved (as rule 1: empty slots drop out)
    assert page.input_value("#acct-rule-0-answer") == "From $10."
    with first_run_receiver(parley):
        page.fill("#try-body", "what is the price?")
        page.click("button:has-text('Try it')")
        why = page.inner_text("#try-result")
    assert 'keyword "price" of rule 1' in why and "rules[" not in why
    assert page.console_errors == []


def test_browser_paused_campaign_says_handled_and_sent_and_holds_retries(desktop, parley, key):
    """A receiver that answers 503 (retry in an hour); the campaign paused while it runs: its retries are held."""
    with first_run_receiver(parley, answer=lambda body: (503, {"Retry-After": "3600"})), parley.client() as api:
        list_id = api.post("/v1/lists", params=key, json={"name": "Busy receivers"}).json()["id"]
        for n in range(8):
            contact = api.post("/v1/contacts", params=key, json={"firstName": f"Busy{n}",
                                                                 "phone": f"+1415555{7000 + n:04d}"}).json()
            api.post(f"/v1/lists/{list_id}/contacts", params=key, json={"contactId": contact["id"]})
        campaign = api.post("/v1/campaigns", params=key, json={"name": "Held", "listId": list_id, "ratePerMinute": 20,
                                                               "body": "Hi {{firstName}}"}).json()
        path = f"/v1/campaigns/{campaign['id']}"
        wait_until(lambda: api.get(path, params=key).json()["counts"]["retrying"] >= 1)  # a 503: retried later
        assert api.post(path + "/pause", params=key, json={}).status_code == 200
        counts = api.get(path, params=key).json()["counts"]
        held = counts["retrying"]
        done = counts["sent"] + counts["failed"] + counts["skipped"] + counts["cancelled"]
        assert held >= 1 and counts["sent"] == 0
        page = desktop
        sign_in(page, parley)
        page.goto(parley.base + f"/campaigns/{campaign['id']}")
        assert page.inner_text("#paused-progress") == f"Paused: {done} of 8 handled, 0 sent."
        table = page.inner_text("#recipients table")
        assert "Next attempt" not in table and table.count("Retried when the campaign resumes") == held
        fragment = page.request.get(parley.base + f"/campaigns/{campaign['id']}/recipients").text()  # live refresh
        assert "Next attempt" not in fragment and fragment.count("Retried when the campaign resumes") == held
        assert page.console_errors == []
