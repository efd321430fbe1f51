"""Issue 43 §3 and §9 in headless Chromium against the real server over HTTPS, as a new owner would: the first login
(admin@localhost) names itself and moves to its own email on Settings; a teammate opens the same thread and each
sees the other by name ("… is viewing"), the owner's reply, note and assignment show the name, not an email; the
Settings page's default country makes a national number typed in the contact form and on a list page an E.164
one, and the list page's contact box suggests contacts by name."""

from tests.team_users import add_user_to_server
from tests.ui_helpers import open_page, sign_in


AGENT_PASSWORD = "teammate-chose-this-1"


def test_browser_owner_takes_a_name_and_email_and_the_thread_and_presence_show_names(page, chromium, parley):
    key = {"apiKey": parley.first_run["api_key"]}
    with parley.client() as api:
        assert api.patch("/v1/account/settings", params=key,
                         json={"customChannelWebhookUrl": "http://127.0.0.1:9/replies"}).status_code == 200
        r = api.post("/v1/incoming_custom_channel_message", params=key, json={"customData": {
            "messageSid": "names-1", "fromId": "+14155550188", "toId": "shop", "body": "Any rye bread today?"}})
        assert r.status_code == 200, r.text
        contact_id = api.get("/v1/contacts", params={**key, "phoneNumber": "+14155550188"}).json()["id"]
    add_user_to_server(parley, parley.first_run["api_key"], "sam@bakery.example", AGENT_PASSWORD)

    sign_in(page, parley)
    page.goto(parley.base + "/settings")
    assert page.input_value("#profile-email") == "admin@localhost"
    page.fill("#profile-name", "Olive Baker")
    page.fill("#profile-email", "olive@bakery.example")
    page.click("#profile button:has-text('Save')")
    assert "Current password is not right" in page.inner_text(".flash-error")  # a new login needs it
    assert page.input_value("#profile-email") == "olive@bakery.example"  # kept as typed
    page.console_errors.clear()  # the 400 page of that refused save, as meant
    page.fill("#profile-password", parley.first_run["password"])
    page.click("#profile button:has-text('Save')")
    assert page.inner_text(".flash-success") == "Saved. You sign in as olive@bakery.example from now on."
    assert page.input_value("#profile-name") == "Olive Baker"

    page.goto(parley.base + f"/inbox/{contact_id}")
    page.fill("#reply-body", "Yes, until noon.")
    page.click("button:has-text('Send reply')")
    page.wait_for_selector(".message.outbound .author:has-text('User Olive Baker')")
    page.click("#mode-note")
    page.fill("#reply-body", "Keep two loaves aside")
    page.click("button:has-text('Add note')")
    page.wait_for_selector(".message.note .author:has-text('Note by Olive Baker')")
    page.select_option("#assignee", label="Olive Baker (me)")
    page.click("button:has-text('Assign')")
    page.wait_for_selector(".assignee:has-text('Assigned to Olive Baker')")
    assert "olive@bakery.example" not in page.inner_text("#messages")

    # A teammate without a name opens the thread: each sees the other, by name (the agent by email).
    agent_context, agent = open_page(chromium)
    try:
        agent.goto(parley.base + "/login")
        agent.fill("#email", "sam@bakery.example")
        agent.fill("#password", AGENT_PASSWORD)
        agent.click("button:has-text('Sign in')")
        agent.goto(parley.base + f"/inbox/{contact_id}")
        agent.wait_for_selector("#presence:has-text('Olive Baker is viewing')")
        page.wait_for_selector("#presence:has-text('sam@bakery.example is viewing')")
        assert "User Olive Baker" in agent.inner_text(".message.outbound .author")
        # The agent names themselves on Your account; the owner's page says so when the agent comes back.
        agent.goto(parley.base + "/account")
        agent.fill("#profile-name", "Sam Porter")
        agent.click("#profile button:has-text('Save')")
        assert agent.inner_text(".flash-success") == "Saved."
        agent.goto(parley.base + f"/inbox/{contact_id}")
        page.wait_for_selector("#presence:has-text('Sam Porter is viewing')")
        assert agent.console_errors == []
    finally:
        agent_context.close()
    assert page.console_errors == []


def test_browser_default_country_reads_national_numbers_and_a_list_member_is_found_by_name(page, parley):
    key = {"apiKey": parley.first_run["api_key"]}
    with parley.client() as api:
        for first, last, phone in (("Ada", "Lovelace", "+41446681800"), ("Grace", "Hopper", "+41446681801")):
            assert api.post("/v1/contacts", params=key, json={"firstName": first, "lastName": last,
                                                              "phone": phone}).status_code == 201
        list_id = api.post("/v1/lists", params=key, json={"name": "Regulars"}).json()["id"]
    add_user_to_server(parley, parley.first_run["api_key"], "ida@bakery.example", AGENT_PASSWORD, role="admin")
    page.goto(parley.base + "/login")
    page.fill("#email", "ida@bakery.example")
    page.fill("#password", AGENT_PASSWORD)
    page.click("button:has-text('Sign in')")

    page.goto(parley.base + "/contacts")
    page.click("summary:has-text('New contact')")
    page.fill("#firstName", "Heidi")
    page.fill("#phone", "044 668 18 02")
    page.click("button:has-text('Create contact')")
    assert "must include the country code" in page.inner_text(".flash-error")  # no default country yet
    page.console_errors.clear()  # the 400 page of that refused create, as meant

    page.goto(parley.base + "/settings")
    page.select_option("#defaultCountry", "CH")
    page.click("#phone-numbers button:has-text('Save country')")
    assert page.inner_text(".flash-success") == "Default country saved: CH."
    assert page.input_value("#defaultCountry") == "CH"

    page.goto(parley.base + "/contacts")
    page.click("summary:has-text('New contact')")
    page.fill("#firstName", "Heidi")
    page.fill("#phone", "044 668 18 02")
    page.click("button:has-text('Create contact')")
    assert page.input_value("#phone") == "+41446681802"

    page.goto(parley.base + f"/lists/{list_id}")
    page.fill("#contact", "Grac")  # typed: the box's suggestions come from the account's contacts
    page.wait_for_selector("#contact-options option[value='+41446681801']", state="attached")
    assert page.eval_on_selector_all("#contact-options option", "os => os.map(o => o.textContent)") == [
        "Grace Hopper · +41446681801"]
    page.fill("#contact", "+41446681801")  # what choosing the suggestion puts in the box
    page.click("button:has-text('Add contact')")
    assert page.inner_text(".flash-success") == "Contact added."
    page.fill("#contact", "ada lovelace")  # a whole name, without choosing
    page.click("button:has-text('Add contact')")
    assert page.inner_text(".flash-success") == "Contact added."
    page.fill("#contact", "044 668 18 02")  # Heidi, typed nationally
    page.click("button:has-text('Add contact')")
    assert page.inner_text(".flash-success") == "Contact added."
    names = page.eval_on_selector_all("table a[href^='/contacts/']", "links => links.map(a => a.textContent)")
    assert sorted(names) == ["Ada Lovelace", "Grace Hopper", "Heidi"]
    assert page.console_errors == []
