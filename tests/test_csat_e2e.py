"""CSAT in Chromium against the real server over HTTPS (issue 41): the Settings section turns it on; a visitor of the
chat widget sees the question arrive live when an agent resolves the conversation, picks a rating with the buttons,
adds a comment and sends it; a custom-channel contact's link (from the webhook the server POSTed) opens the
one-question page, which answers once and then says it was used. One test: the checks share a server."""
import re


from tests.parley_process import first_run_receiver
from tests.ui_helpers import axe_violations, open_page, report, sign_in, wait_until
from tests.waiting import until_sync


def test_a_visitor_rates_in_the_chat_and_a_contact_on_the_page(chromium, parley):
    key = parley.first_run["api_key"]

    def call(method, path, body=None, **query):
        with parley.client() as client:
            response = client.request(method, path, params={"apiKey": key, **query}, json=body)
        assert response.status_code in (200, 201), response.text
        return response.json()

    with first_run_receiver(parley) as receiver:
        context, page = open_page(chromium)
        sign_in(page, parley)
        page.goto(parley.base + "/settings#csat")
        page.check("#csat-enabled")
        page.fill("#csat-question", "How did we do?")
        page.click("#csat button:has-text('Save CSAT')")
        assert "Customer satisfaction saved." in page.inner_text(".flash-success")
        assert call("GET", "/v1/account")["settings"]["csat"] == {"enabled": True, "question": "How did we do?"}
        agent_context, agent = context, page

        # The widget: the question arrives live in the open chat, with rating buttons.
        call("PATCH", "/v1/account/settings", {"widget": {"enabled": True, "allowedOrigins": ["https://shop.example"]}})
        widget_id = call("GET", "/v1/account/widget")["widgetId"]
        context, chat = open_page(chromium)
        chat.goto(f"{parley.base}/widget/{widget_id}")
        chat.fill("#body", "Is my cake ready?")
        chat.click("#send button[type=submit]")
        wait_until(chat, "document.querySelectorAll('#messages li.mine').length === 1")
        [visitor] = {e["data"]["contactId"] for e in call("GET", "/v1/events", types="message.created")["data"]}
        call("PATCH", f"/v1/conversations/{visitor}", {"status": "resolved"})
        wait_until(chat, "!!document.querySelector('#messages li.theirs form.csat')")
        assert "How did we do?" in chat.inner_text("#messages li.theirs")
        chat.click("button[aria-label='Rate 4 of 5']")
        assert chat.get_attribute("button[aria-label='Rate 4 of 5']", "aria-pressed") == "true"
        chat.fill("form.csat textarea", "Lovely cake")
        chat.click("form.csat button[type=submit]")
        wait_until(chat, "!!document.querySelector('.csat-done')")
        assert chat.inner_text(".csat-done") == "Thank you for your answer!"
        chat.reload()  # answered: the question shows without buttons now
        wait_until(chat, "document.querySelectorAll('#messages li').length === 2")
        assert chat.query_selector("form.csat") is None
        # Nothing refused by the frame's CSP (the one 404 is the browser's own /favicon.ico: the frame names none)
        assert [e for e in chat.console_errors if "status of 404" not in e] == []
        context.close()

        # The custom channel: the webhook carries the page's link; the page answers once.
        sent = call("POST", "/v1/incoming_custom_channel_message",
                    {"customData": {"messageSid": "csat-e2e-1", "fromId": "+14155550123", "toId": "shop", "body": "Hi"}})
        contact = call("GET", f"/v1/messages/{sent['messageId']}")["contactId"]
        call("PATCH", f"/v1/conversations/{contact}", {"status": "resolved"})

        def links():
            return [m for r in receiver.requests for m in re.findall(r"https://\S+/csat/\S+", r.get("body") or "")]
        assert until_sync(links, 15), receiver.requests
        [link] = links()
        context, survey = open_page(chromium, bypass_csp=True)  # the axe script is added inline
        survey.goto(link)
        assert survey.inner_text("h1") == "How did we do?"
        found = axe_violations(survey)
        assert found == [], report({"csat": found})
        survey.click("label:has-text('2') input")
        survey.fill("#csat-comment", "Slow <b>reply</b>")
        survey.click("button:has-text('Send')")
        assert survey.inner_text("#csat-thanks").startswith("Your answer is saved.")
        survey.goto(link)
        assert "answered this question already" in survey.inner_text("main")
        context.close()

        # The thread shows the question as automatic, its link without the token.
        agent.goto(f"{parley.base}/inbox/{contact}")
        thread = agent.inner_text("main")
        assert "Automatic: CSAT question" in thread and "/csat/…" in thread and link not in agent.content()
        agent_context.close()

    answers = call("GET", "/v1/events", types="csat.submitted")["data"]
    assert [e["data"] for e in answers] == [{"contactId": visitor, "rating": 4, "comment": "Lovely cake"},
                                            {"contactId": contact, "rating": 2, "comment": "Slow <b>reply</b>"}]
