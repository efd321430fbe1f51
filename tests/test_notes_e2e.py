"""Canned replies and private notes in Chromium (issue 21), against the real server.py over HTTPS with its CSP,
and a real local receiver as the account's Custom Channel Webhook: typing /code offers the canned reply and
choosing it inserts the body rendered for the contact; a note typed in one browser context shows live in a
second context signed in to the same account, styled as a note, and never reaches the receiver while a
reply does."""
import time


from tests.inbound_helpers import contact_of, post_inbound, wait_live, wait_until
from tests.ui_helpers import assert_not_reloaded, mark_no_reload, open_page, sign_in


NOTE_YELLOW = "rgb(255, 246, 204)"  # static/parley.css .message.note


def api_post(parley, path, body):
    with parley.client() as api:
        response = api.post(path, params={"apiKey": parley.first_run["api_key"]}, json=body)
    assert response.status_code in (200, 201), response.text
    return response.json()


def open_thread(page, parley, contact_id):
    sign_in(page, parley)
    page.goto(parley.base + f"/inbox/{contact_id}")
    wait_live(page)
    mark_no_reload(page)


def test_browser_slash_code_offers_canned_replies_and_inserts_the_rendered_body(page, parley, e2e_receiver):
    api_post(parley, "/v1/canned-replies", {"code": "thanks", "body": "Thanks {{firstName}} {{lastName}}, we are on it."})
    api_post(parley, "/v1/canned-replies", {"code": "thx-short", "body": "Thx {{firstName}}!"})
    api_post(parley, "/v1/canned-replies", {"code": "hours", "body": "We open at 9."})
    message_id, _ = post_inbound(parley, "Where is my parcel?", from_id="+14155550101", firstName="Grace",
                                 lastName="Hopper")
    open_thread(page, parley, contact_of(parley, message_id))

    page.click("#reply-body")
    page.keyboard.type("Hello! /th")
    page.wait_for_selector("#canned-picker [role=option]")
    assert page.locator("#canned-picker [role=option]").all_inner_texts() == [
        "/thanks Thanks Grace Hopper, we are on it.", "/thx-short Thx Grace!"]
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")  # wraps round to the first
    page.keyboard.press("Enter")
    assert page.input_value("#reply-body") == "Hello! Thanks Grace Hopper, we are on it."
    assert page.is_hidden("#canned-picker")

    page.keyboard.type(" /ho")  # a click chooses too
    page.click("#canned-picker [role=option]:has-text('/hours')")
    assert page.input_value("#reply-body") == "Hello! Thanks Grace Hopper, we are on it. We open at 9."
    page.keyboard.type(" a/th")  # a slash inside a word is text, not a code
    assert page.is_hidden("#canned-picker")
    page.click("button:has-text('Send reply')")
    wait_until(page, "document.querySelectorAll('#messages .message.outbound').length === 1")
    deadline = time.monotonic() + 15
    while not any(r["body"].startswith("Hello! Thanks Grace Hopper") for r in e2e_receiver.requests):
        assert time.monotonic() < deadline, "the reply never reached the receiver"
        time.sleep(0.05)
    assert page.console_errors == []  # nothing refused by the CSP
    assert_not_reloaded(page)


def test_browser_a_note_shows_live_in_a_second_context_and_never_reaches_the_receiver(chromium, parley, e2e_receiver):
    message_id, _ = post_inbound(parley, "Can I change my order?", from_id="+14155550102", firstName="Linus")
    contact_id = contact_of(parley, message_id)
    (writer_context, writer), (reader_context, reader) = open_page(chromium), open_page(chromium)
    try:
        open_thread(writer, parley, contact_id)
        open_thread(reader, parley, contact_id)
        before = len(e2e_receiver.requests)
        note = f"Private: customer is a reseller {time.time_ns()}"

        writer.click("#mode-note")
        assert "note-mode" in writer.get_attribute("#reply", "class")
        assert writer.evaluate("getComputedStyle(document.getElementById('reply')).backgroundColor") == NOTE_YELLOW
        writer.fill("#reply-body", note)
        writer.click("button:has-text('Add note')")

        wait_until(reader, f"[...document.querySelectorAll('#messages .message.note')].some("
                           f"n => n.textContent.includes({note!r}))")
        shown = reader.locator("#messages .message.note", has_text=note)
        assert reader.evaluate("n => getComputedStyle(n).backgroundColor", shown.element_handle()) == NOTE_YELLOW
        assert "Private note" in shown.inner_text() and "Note by" in shown.inner_text()
        # After the inbound message, in time order.
        assert reader.evaluate("document.querySelector('#messages').lastElementChild.classList.contains('note')")
        assert writer.input_value("#reply-body") == ""
        wait_until(writer, "document.querySelector('#messages .message.note') !== null")

        # A reply from the same box (back in Reply mode) reaches the receiver; the note never does.
        writer.click("#mode-reply")
        writer.fill("#reply-body", "Sure, what would you like to change?")
        writer.click("button:has-text('Send reply')")
        deadline = time.monotonic() + 15
        while not any(r["body"] == "Sure, what would you like to change?" for r in e2e_receiver.requests[before:]):
            assert time.monotonic() < deadline, "the reply never reached the receiver"
            time.sleep(0.05)
        assert all(note not in str(r) for r in e2e_receiver.requests)
        wait_until(reader, "document.querySelectorAll('#messages .message.outbound').length === 1")
        assert reader.locator("#messages .message.note").count() == 1

        # Deleted in the reader: gone from the writer's page too.
        reader.click("#messages .message.note button:has-text('Delete note')")
        wait_until(writer, "document.querySelector('#messages .message.note') === null")
        for p in (writer, reader):
            assert p.console_errors == []
            assert_not_reloaded(p)
    finally:
        writer_context.close()
        reader_context.close()
