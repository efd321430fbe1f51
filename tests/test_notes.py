"""Private notes (issue 21): the API (validation, tenancy), a note is never a message (no outbox row, no
conversation counter, never in the reply webhook: a real local receiver proves it), its live event, the
thread's timeline by time, and who may delete one."""
import asyncio
import json
import re

import pytest

from common.errors import Forbidden
from common.ids import utcnow
from services import notes
from storage.db import reads
from tests.inbound_helpers import inbound

SEND = "/v1/send_custom_channel_message"


def notes_path(contact_id):
    return f"/v1/conversations/{contact_id}/notes"


@reads
def _one(cx, sql, *params):
    return cx.execute(sql, params).fetchone()


@reads
def _all(cx, sql, *params):
    return [tuple(r) for r in cx.execute(sql, params)]


async def _notes(services, account_id):
    return await _all(services.db, "SELECT id, contact_id, body FROM notes WHERE account_id = ? ORDER BY id",
                      account_id)


@pytest.fixture
def contact(io_loop, services, account):
    return io_loop.run_sync(lambda: inbound(services, account["account_id"], first_name="Ada"))["contact_id"]


async def test_add_and_list_notes(api, account, contact):
    key = account["api_key"]
    r = await api.post(notes_path(contact), {"body": "Called her back.\nWaiting for the invoice."}, key=key)
    assert r.code == 201, r.body
    note = r.json
    assert note["id"].startswith("note_") and note["contactId"] == contact
    assert (note["author"], note["authorEmail"]) == ("api", None)
    second = (await api.post(notes_path(contact), {"body": "Invoice came."}, key=key)).json
    page = (await api.get(notes_path(contact) + "?limit=1", key=key)).json
    assert [n["id"] for n in page["data"]] == [second["id"]] and page["nextCursor"]
    rest = (await api.get(notes_path(contact) + f"?limit=1&cursor={page['nextCursor']}", key=key)).json
    assert rest == {"data": [note], "nextCursor": None}


@pytest.mark.parametrize("body,words", [({"body": " \n "}, "body"), ({}, "body"), ({"body": "x" * 4001}, "body"),
                                        ({"body": "ok", "author": "me"}, "author")])
async def test_bad_input_is_400_naming_the_field(api, account, contact, services, body, words):
    r = await api.post(notes_path(contact), body, key=account["api_key"])
    assert r.code == 400 and words in r.json["error"]["message"], r.body
    assert await _notes(services, account["account_id"]) == []


async def test_unknown_contact_is_404(api, account, services):
    r = await api.post(notes_path("ct_nope"), {"body": "Hi"}, key=account["api_key"])
    assert (r.code, r.json["error"]["code"]) == (404, "CONTACT_NOT_FOUND")
    assert (await api.get(notes_path("ct_nope"), key=account["api_key"])).code == 404
    assert await _notes(services, account["account_id"]) == []


async def test_another_accounts_key_sees_and_changes_nothing(api, account, other_account, contact, services):
    note = (await api.post(notes_path(contact), {"body": "Ours"}, key=account["api_key"])).json
    theirs = other_account["api_key"]
    assert (await api.get(notes_path(contact), key=theirs)).code == 404
    assert (await api.post(notes_path(contact), {"body": "Theirs"}, key=theirs)).code == 404
    assert (await api.delete(f"{notes_path(contact)}/{note['id']}", key=theirs)).code == 404
    assert await _notes(services, account["account_id"]) == [(note["id"], contact, "Ours")]
    assert await _notes(services, other_account["account_id"]) == []


async def test_delete_a_note_and_its_event(api, account, contact, services):
    key = account["api_key"]
    note = (await api.post(notes_path(contact), {"body": "Oops"}, key=key)).json
    other = await inbound(services, account["account_id"], "+14155550001")
    # A note is deleted through its own conversation only.
    assert (await api.delete(f"{notes_path(other['contact_id'])}/{note['id']}", key=key)).code == 404
    r = await api.delete(f"{notes_path(contact)}/{note['id']}", key=key)
    assert (r.code, r.json) == (200, {"deleted": True, "id": note["id"]})
    assert await _notes(services, account["account_id"]) == []
    assert (await api.delete(f"{notes_path(contact)}/{note['id']}", key=key)).code == 404
    events = await _all(services.db, "SELECT type, data FROM events WHERE account_id = ? AND type LIKE 'note.%'"
                                     " ORDER BY seq", account["account_id"])
    assert [(t, json.loads(d)) for t, d in events] == [
        ("note.created", {"noteId": note["id"], "contactId": contact}),
        ("note.deleted", {"noteId": note["id"], "contactId": contact})]


async def test_a_note_is_never_a_message_never_counted_never_queued(api, account, contact, services):
    account_id = account["account_id"]
    conversation = "SELECT last_message_id, last_preview, unread_count FROM conversations WHERE contact_id = ?"
    before = (await _one(services.db, conversation, contact), await _one(
        services.db, "SELECT COUNT(*) FROM outbox WHERE account_id = ?", account_id))
    await api.post(notes_path(contact), {"body": "Internal: VIP customer"}, key=account["api_key"])
    after = (await _one(services.db, conversation, contact), await _one(
        services.db, "SELECT COUNT(*) FROM outbox WHERE account_id = ?", account_id))
    assert tuple(after[0]) == tuple(before[0]) and after[1][0] == before[1][0]
    messages = (await api.get(f"/v1/contacts/{contact}/messages", key=account["api_key"])).json["data"]
    assert [m["body"] for m in messages] == ["Hello"]


async def test_a_note_never_reaches_the_reply_webhook_while_a_reply_does(api, account, services, receiver, workers):
    """A real local HTTP receiver as the account's Custom Channel Webhook: the reply arrives, the note never."""
    key = account["api_key"]
    assert (await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url}, key=key)).code == 200
    sent = (await api.post(SEND, {"customData": {"fromId": "+14155552671", "customChannel": "webchat",
                                                 "body": "A reply the contact gets"}}, key=key)).json
    r = await api.post(notes_path(sent["contactId"]), {"body": "A note only the team sees"}, key=key)
    assert r.code == 201
    worker = workers()
    while await worker.run_due(utcnow()):
        pass
    bodies = [json.loads(request["body"]) for request in receiver.requests]
    assert [b["body"] for b in bodies] == ["A reply the contact gets"]
    assert all(b"A note only the team sees" not in request["body"] for request in receiver.requests)


# ---- the thread page ------------------------------------------------------------------------------

async def test_the_thread_shows_notes_among_messages_by_time(signed_in, services, ui_account):
    account_id = ui_account["account_id"]
    first = await inbound(services, account_id, body="First message", first_name="Ada")
    contact_id = first["contact_id"]
    await asyncio.sleep(0.005)  # ids are time-ordered to the millisecond
    r = await signed_in.post(f"/inbox/{contact_id}/notes", {"body": "Note <b>between</b>"})
    assert r.code == 303 and r.headers["Location"] == f"/inbox/{contact_id}"
    await asyncio.sleep(0.005)
    await inbound(services, account_id, body="Second message")
    page = (await signed_in.get(f"/inbox/{contact_id}")).text
    first_at, note_at, second_at = (page.index("First message"), page.index("Note &lt;b&gt;between&lt;/b&gt;"),
                                    page.index("Second message"))
    assert first_at < note_at < second_at
    assert 'class="message note"' in page and f"Note by {ui_account['email']}" in page and "Private note" in page
    conversation = await _one(services.db, "SELECT unread_count, last_preview FROM conversations WHERE contact_id = ?",
                              contact_id)
    assert "Note" not in conversation[1]


async def test_the_note_fragment_and_delete_in_the_thread(signed_in, services, ui_account, other_account):
    contact_id = (await inbound(services, ui_account["account_id"]))["contact_id"]
    await signed_in.post(f"/inbox/{contact_id}/notes", {"body": "Mine"})
    [(note_id, _, _)] = await _notes(services, ui_account["account_id"])
    fragment = await signed_in.get(f"/inbox/{contact_id}/notes/{note_id}")
    assert fragment.code == 200 and f'id="n-{note_id}"' in fragment.text and "Delete note" in fragment.text
    assert (await signed_in.post(f"/inbox/{contact_id}/notes/{note_id}/delete", {}, xsrf=False)).code == 403
    assert (await signed_in.post(f"/inbox/{contact_id}/notes/{note_id}/delete")).code == 303
    assert await _notes(services, ui_account["account_id"]) == []
    # Another account's conversation: nothing to see, nothing added.
    theirs = (await inbound(services, other_account["account_id"], "+14155550000"))["contact_id"]
    assert (await signed_in.post(f"/inbox/{theirs}/notes", {"body": "Sneaky"})).code == 404
    assert await _notes(services, other_account["account_id"]) == []


async def test_a_blank_note_from_the_thread_is_refused(signed_in, services, ui_account):
    contact_id = (await inbound(services, ui_account["account_id"]))["contact_id"]
    r = await signed_in.post(f"/inbox/{contact_id}/notes", {"body": "  "}, headers={"Accept": "application/json"})
    assert r.code == 400 and "body" in json.loads(r.body)["error"]["message"]
    assert await _notes(services, ui_account["account_id"]) == []


async def test_only_the_author_or_an_admin_deletes_a_note(services, ui_account):
    db, account_id = services.db, ui_account["account_id"]
    contact = (await inbound(services, account_id))["contact_id"]
    [user_id] = await _one(db, "SELECT id FROM users WHERE account_id = ?", account_id)
    author, other_agent = {"id": user_id, "role": "agent"}, {"id": "usr_other", "role": "agent"}
    by_api = await notes.add(db, account_id, contact, "By the API")
    mine = await notes.add(db, account_id, contact, "Mine", user=author)
    assert mine["author"] == "user" and mine["authorEmail"] == ui_account["email"]
    for note in (by_api, mine):
        with pytest.raises(Forbidden):
            await notes.delete(db, account_id, contact, note["id"], user=other_agent)
    assert len(await _notes(services, account_id)) == 2
    assert (await notes.delete(db, account_id, contact, mine["id"], user=author))["deleted"]
    with pytest.raises(Forbidden):
        await notes.delete(db, account_id, contact, by_api["id"], user=author)
    assert (await notes.delete(db, account_id, contact, by_api["id"], user={"id": "usr_x", "role": "admin"}))["deleted"]
    assert await _notes(services, account_id) == []


async def test_each_page_of_the_thread_shows_the_notes_of_its_stretch_of_time(signed_in, services, ui_account,
                                                                                monkeypatch):
    """Older pages (?before=) and the newest page split the notes where they split the messages: each note on
    exactly one page, between the messages it was written between."""
    from services import inbox
    monkeypatch.setattr(inbox, "THREAD_PAGE_SIZE", 2)
    account_id = ui_account["account_id"]
    contact_id = (await inbound(services, account_id, body="m1"))["contact_id"]
    for step in ("note A", "m2", "m3", "note B", "m4"):
        await asyncio.sleep(0.005)  # ids are time-ordered to the millisecond
        if step.startswith("note"):
            await notes.add(services.db, account_id, contact_id, step)
        else:
            await inbound(services, account_id, body=step)

    def order(html):
        return [t for t in ("m1", "note A", "m2", "m3", "note B", "m4") if f'class="body">{t}<' in html]
    newest = (await signed_in.get(f"/inbox/{contact_id}")).text
    assert order(newest) == ["m3", "note B", "m4"]
    earlier = re.search(r"before=(msg_[0-9a-z]+)", newest).group(1)
    assert order((await signed_in.get(f"/inbox/{contact_id}?before={earlier}")).text) == ["m1", "note A", "m2"]
