"""Erasing a contact (issue 21; GDPR art. 17; docs/guide.md "Contact page and erasure"): DELETE
/v1/contacts/{id} removes the contact and every row holding its data in one transaction, and afterwards no
byte of the person is left in the SQLite file, its WAL or the media directory (the raw bytes are searched);
counts that are not the person's stay (campaign totals, credit history, other contacts). Another account's
key learns nothing. In the UI: tests/test_contact_erasure_ui.py."""
import asyncio
import base64
from pathlib import Path
from datetime import datetime, timedelta, timezone

import pytest

from common.ids import now_iso
from services import erasure
from storage import bot_state
from storage import campaigns as campaign_store
from storage.events import MESSAGES_CREATED, emit_in_tx
from tests import db_direct, waiting

HOOK = "http://127.0.0.1:9/hook"  # nothing listens: deliveries stay pending (then failed), with their payloads
PERSON = {"firstName": "Zebulonius", "lastName": "Quarterflashby", "phone": "+14155559876",
          "email": "quokka.zanzibar@example.org"}
RENAMED = "Zebediahrenamed"
TEXT_IN = "my quince marmalade secret is nutmegwhisper"
TEXT_OUT = "thanks, we keep it as pelicanlantern"
MEDIA = b"aardvark-kumquat-lemma: the person's attachment\n"
NOTE = "private note about quillfeather's invoice"
CONTROL = {"firstName": "Controlina", "phone": "+14155551234", "email": "control.person@example.org"}
CONTROL_TEXT = "the other contact says marzipanorbit"


def data_uri(mime, data):
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _inbound(sid, from_id, body, **extra):
    return {"customData": {"messageSid": sid, "fromId": from_id, "toId": "shop", "body": body, **extra}}


async def _person_with_everything(api, services, key, account_id):
    """A contact whose data is in every table that can hold it; returns its id."""
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": HOOK, "notificationUrls": {
        "contact.created": HOOK, "contact.updated": HOOK, "contact.tagged": HOOK}}, key=key)
    assert r.code == 200, r.body
    created = await api.post("/v1/contacts", PERSON, key=key, headers={"Idempotency-Key": "create-person"})
    assert created.code == 201, created.body
    contact_id = created.json["id"]
    r = await api.patch(f"/v1/contacts/{contact_id}", {"firstName": RENAMED}, key=key,
                        headers={"Idempotency-Key": "rename-person"})
    assert r.code == 200, r.body
    r = await api.post("/v1/incoming_custom_channel_message", _inbound(
        "sid-person-1", PERSON["phone"], TEXT_IN, mediaUrl=data_uri("text/plain", MEDIA), mediaContentType="text/plain"),
        key=key)
    assert r.code == 200, r.body
    r = await api.post("/v1/send_custom_channel_message", {"customData": {
        "fromId": PERSON["phone"], "customChannel": "webchat", "body": TEXT_OUT}}, key=key,
        headers={"Idempotency-Key": "reply-person"})
    assert r.code == 200 and r.json["contactId"] == contact_id, r.body
    lst = (await api.post("/v1/lists", {"name": "Erasure list"}, key=key)).json
    r = await api.post(f"/v1/lists/{lst['id']}/contacts", {"contactId": contact_id}, key=key,
                       headers={"Idempotency-Key": "tag-person"})
    assert r.json["added"] is True
    r = await api.post(f"/v1/conversations/{contact_id}/notes", {"body": NOTE}, key=key)
    assert r.code == 201, r.body
    until = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    await services.db.write(bot_state.pause_in_tx, account_id, contact_id, until, "handoff", now_iso())
    return contact_id, lst


async def _control(api, key):
    control = (await api.post("/v1/contacts", CONTROL, key=key)).json
    r = await api.post("/v1/incoming_custom_channel_message", _inbound("sid-control", CONTROL["phone"], CONTROL_TEXT),
                       key=key)
    assert r.code == 200
    return control


def _raw_bytes(settings):
    """The database file, its WAL and every file of the media directory, as bytes (all of them: what is in
    them is what a disk image would show)."""
    data = settings.data_dir
    files = [data / "parley.db", data / "parley.db-wal"] + sorted((data / "media").iterdir())
    return {str(p): p.read_bytes() for p in files if p.exists()}


def _tables_text(settings):
    """PostgreSQL's counterpart: every row of every table as JSON text (what a dump would show), and the media
    files as bytes."""
    blobs = {f"table {name}": text.encode() for name, text in db_direct.tables_as_json(settings).items()}
    media = sorted((settings.data_dir / "media").iterdir()) if (settings.data_dir / "media").exists() else []
    return {**blobs, **{str(p): p.read_bytes() for p in media}}


def _found(blobs, needle):
    return [path for path, blob in blobs.items() if needle.encode() in blob]


@pytest.mark.sqlite_only("searches the bytes of the SQLite file and its WAL (PostgreSQL: the test below)")
async def test_erasure_leaves_no_byte_of_the_person_in_the_database_file_or_the_media(api, services, settings,
                                                                                        account):
    await _erase_and_search(api, services, settings, account, _raw_bytes)


@pytest.mark.postgres_only
async def test_erasure_leaves_none_of_the_person_in_any_tables_text_or_the_media(api, services, settings, account):
    await _erase_and_search(api, services, settings, account, _tables_text)


@pytest.mark.postgres_only
async def test_erasure_leaves_none_of_the_person_in_the_table_and_index_files(api, services, settings, account):
    """Issue 36 §7: after VACUUM the erased name, phone and email were still in the contacts table's pages and
    its email index (a dead row version's bytes stay in the page until reused). The files themselves are read
    (heap, TOAST and index of every table, after a CHECKPOINT writes the pages out) once the cleanup has run."""
    await _erase_and_search(api, services, settings, account, _relation_files)


@pytest.mark.postgres_only
async def test_a_table_busy_at_the_rewrite_is_rewritten_once_it_is_free_and_blocks_no_request_meanwhile(
        api, services, settings, account, monkeypatch, caplog):
    """The rewrite waits only briefly for a table's lock: waiting behind a long transaction would queue every
    request for the table behind it. It tries that table again later, and the person's bytes still go."""
    from storage import postgres_db
    monkeypatch.setattr(postgres_db, "REWRITE_LOCK_TIMEOUT", "100ms")
    monkeypatch.setattr(erasure, "REWRITE_RETRY_SECONDS", (0.5,) * 20)
    key = account["api_key"]
    contact = (await api.post("/v1/contacts", PERSON, key=key)).json
    control = (await api.post("/v1/contacts", CONTROL, key=key)).json
    reader = db_direct.connect(settings)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM contacts")  # holds contacts' ACCESS SHARE lock until it ends
    try:
        r = await api.delete(f"/v1/contacts/{contact['id']}", key=key)
        assert r.code == 200, r.body
        assert await waiting.until(lambda: "table contacts not rewritten yet" in caplog.text, 60)
        # Another request for the table is answered meanwhile (it would wait behind a queued rewrite).
        r = await asyncio.wait_for(api.get(f"/v1/contacts/{control['id']}", key=key), 20)
        assert r.code == 200
        assert _found(_relation_files(settings), PERSON["email"])
    finally:
        reader.execute("COMMIT")
        reader.close()
    await erasure.settled()
    assert not _found(_relation_files(settings), PERSON["email"])


def _relation_files(settings):
    """PostgreSQL's files on disk: the main fork of every table, TOAST table and index of the test's database
    (pg_relation_filepath in the cluster's data directory, each 1 GB segment), as bytes, and the media files."""
    cx = db_direct.connect(settings)
    try:
        cx.execute("CHECKPOINT")  # what the pages say now, not what the files said at the last checkpoint
        data_directory = Path(cx.execute("SHOW data_directory").fetchone()[0])
        relations = cx.execute(
            "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'i', 't') AND n.nspname IN ('public', 'pg_toast')"
            " AND pg_relation_filepath(c.oid) IS NOT NULL").fetchall()
    finally:
        cx.close()
    files = {}
    for name, relative in relations:
        for segment in [data_directory / relative, *sorted(data_directory.glob(relative + ".[0-9]*"))]:
            if segment.exists():
                files[f"{name} ({segment.name})"] = segment.read_bytes()
    assert any(name.startswith("contacts_") for name in files), "the indexes of contacts are read too"
    media = sorted((settings.data_dir / "media").iterdir()) if (settings.data_dir / "media").exists() else []
    return {**files, **{str(p): p.read_bytes() for p in media}}


async def _erase_and_search(api, services, settings, account, snapshot):
    """Erase a person whose data is everywhere; snapshot(settings) -> {where: bytes} must hold none of it after."""
    key, account_id = account["api_key"], account["account_id"]
    contact_id, lst = await _person_with_everything(api, services, key, account_id)
    control = await _control(api, key)
    strings = [PERSON["firstName"], PERSON["lastName"], PERSON["phone"], PERSON["email"], RENAMED, TEXT_IN,
               TEXT_OUT, MEDIA.decode().strip(), NOTE]
    before = snapshot(settings)
    assert all(_found(before, s) for s in strings), [s for s in strings if not _found(before, s)]

    r = await api.delete(f"/v1/contacts/{contact_id}", key=key, headers={"Idempotency-Key": "erase-person"})
    assert r.code == 200, r.body
    assert r.json["erased"] is True and r.json["id"] == contact_id
    removed = r.json["removed"]
    assert (removed["contacts"], removed["messages"], removed["listMemberships"], removed["botPauses"],
            removed["conversations"], removed["channelIdentities"], removed["notes"]) == (1, 2, 1, 1, 1, 1, 1)
    # Created, updated, tagged notifications and the reply; the answers of create, rename and reply (adding to
    # a list remembers only "added", which names nobody).
    assert removed["webhooks"] == 4 and removed["idempotencyAnswers"] == 3

    # The WAL checkpoint can meet a busy connection and is then retried in the background: what counts is what
    # is left once the cleanup has run.
    await erasure.settled()
    after = snapshot(settings)
    assert {s: _found(after, s) for s in strings} == {s: [] for s in strings}
    # The search can find what is there: the other contact is untouched, and so is the list (its count moved).
    assert _found(after, CONTROL["email"]) and _found(after, CONTROL_TEXT)
    assert (await api.get(f"/v1/contacts/{control['id']}", key=key)).code == 200
    assert (await api.get(f"/v1/lists/{lst['id']}", key=key)).json["contactCount"] == 0
    assert (await api.get(f"/v1/contacts/{contact_id}", key=key)).code == 404
    # Audited: who and which id, never what the contact was.
    entry = (await api.get("/v1/audit", key=key)).json["data"][0]
    assert (entry["action"], entry["subjectId"], entry["actor"], entry["detail"]) == (
        "contact.erased", contact_id, "api-key", {"messages": 2})
    # The same key again replays the answer; without one, the contact is not found.
    again = await api.delete(f"/v1/contacts/{contact_id}", key=key, headers={"Idempotency-Key": "erase-person"})
    assert (again.code, again.json, again.headers["Idempotent-Replayed"]) == (200, r.json, "true")
    gone = await api.delete(f"/v1/contacts/{contact_id}", key=key)
    assert gone.code == 404 and gone.json["error"]["code"] == "CONTACT_NOT_FOUND"
    # A new message from the same fromId is a new contact (the channel identity went with the old one).
    r = await api.post("/v1/incoming_custom_channel_message", _inbound("sid-person-2", PERSON["phone"], "Hi again"),
                       key=key)
    assert r.code == 200
    assert (await api.get(f"/v1/contacts?phoneNumber={PERSON['phone']}", key=key)).json["id"] != contact_id


async def test_another_accounts_key_cannot_erase_nor_learn_that_the_id_exists(api, account, other_account):
    contact = (await api.post("/v1/contacts", PERSON, key=account["api_key"])).json
    theirs = await api.delete(f"/v1/contacts/{contact['id']}", key=other_account["api_key"])
    unknown = await api.delete("/v1/contacts/ct_doesnotexist", key=other_account["api_key"])
    assert theirs.code == unknown.code == 404
    assert theirs.json["error"]["code"] == unknown.json["error"]["code"] == "CONTACT_NOT_FOUND"
    assert theirs.json["error"]["message"].replace(contact["id"], "X") == \
        unknown.json["error"]["message"].replace("ct_doesnotexist", "X")
    assert (await api.get(f"/v1/contacts/{contact['id']}", key=account["api_key"])).json == contact
    assert (await api.get("/v1/audit", key=other_account["api_key"])).json["data"] == []
    assert (await api.delete(f"/v1/contacts/{contact['id']}", key="wrong-key")).code == 401


async def test_campaign_totals_and_credit_history_stay_and_the_recipient_is_anonymised(api, services, account,
                                                                                      agency, sub):
    key = account["api_key"]
    await api.patch("/v1/account/settings", {"customChannelWebhookUrl": HOOK}, key=key)
    person = (await api.post("/v1/contacts", PERSON, key=key)).json
    other = (await api.post("/v1/contacts", CONTROL, key=key)).json
    lst = (await api.post("/v1/lists", {"name": "Campaign list"}, key=key)).json
    for contact in (person, other):
        await api.post(f"/v1/lists/{lst['id']}/contacts", {"contactId": contact["id"]}, key=key)
    campaign = (await api.post("/v1/campaigns", {"name": "Later", "listId": lst["id"], "body": "Hi {{firstName}}",
                                                 "startAt": "2099-01-01T00:00:00Z"}, key=key)).json
    await services.db.write(campaign_store.start_in_tx, campaign["id"], now_iso())  # recipients snapshotted
    before = (await api.get(f"/v1/campaigns/{campaign['id']}", key=key)).json
    grant = await api.post("/v1/subaccounts/credits", {"email": sub["email"], "amount": 5},
                           key=agency["api_key"], query_key=False)
    assert grant.code == 200

    r = await api.delete(f"/v1/contacts/{person['id']}", key=key)
    assert r.code == 200 and r.json["removed"]["campaignRecipientsAnonymised"] == 1
    after = (await api.get(f"/v1/campaigns/{campaign['id']}", key=key)).json
    assert after["counts"] == before["counts"] and after["counts"]["total"] == 2
    ids = " ".join(row["contact_id"] for row in db_direct.rows(
        services, "SELECT contact_id FROM campaign_recipients WHERE campaign_id = ?", campaign["id"]))
    assert person["id"] not in ids and other["id"] in ids and "erased_" in ids
    assert db_direct.value(services, "SELECT COUNT(*) FROM credit_transactions WHERE account_id = ?",
                        sub["account_id"]) == 1
    # The recipients list shows the contacts that still exist.
    listed = (await api.get(f"/v1/campaigns/{campaign['id']}/recipients", key=key)).json["data"]
    assert [row["contactId"] if "contactId" in row else row["id"] for row in listed] == [other["id"]]



async def test_opt_out_changes_keep_their_count_but_not_the_contact_id(api, services, account):
    """Issue 36 item 6: the Reports' opt-out rows kept the erased contact's id."""
    contact = (await api.post("/v1/contacts", PERSON, key=account["api_key"])).json
    for opted_out in (True, False):
        r = await api.patch(f"/v1/contacts/{contact['id']}", {"optedOut": opted_out}, key=account["api_key"])
        assert r.code == 200, r.body
    assert (await api.delete(f"/v1/contacts/{contact['id']}", key=account["api_key"])).code == 200
    assert db_direct.value(services, "SELECT COUNT(*) FROM opt_out_changes WHERE contact_id = ?", contact["id"]) == 0
    assert db_direct.value(services, "SELECT COUNT(DISTINCT contact_id) FROM opt_out_changes WHERE account_id = ?",
                        account["account_id"]) == 1
    assert db_direct.value(services, "SELECT COUNT(*) FROM opt_out_changes WHERE account_id = ?",
                        account["account_id"]) == 2


def _emit_batch_event(cx, account_id, contact_ids):
    emit_in_tx(cx, account_id, MESSAGES_CREATED, {"campaignId": "cmp_x", "contactIds": contact_ids})


async def test_a_campaign_batch_event_keeps_the_others_but_not_the_erased_contact_id(api, services, account):
    """Issue 36 item 6: a campaign batch's live event ({campaignId, contactIds}) kept the erased contact's id."""
    person = (await api.post("/v1/contacts", PERSON, key=account["api_key"])).json
    control = (await api.post("/v1/contacts", CONTROL, key=account["api_key"])).json
    await services.db.write(_emit_batch_event, account["account_id"], [control["id"], person["id"]])
    assert (await api.delete(f"/v1/contacts/{person['id']}", key=account["api_key"])).code == 200
    count = "SELECT COUNT(*) FROM events WHERE account_id = ? AND data LIKE ? AND data LIKE '%contactIds%'"
    assert db_direct.value(services, count, account["account_id"], f"%{person['id']}%") == 0
    assert db_direct.value(services, count, account["account_id"], f"%{control['id']}%") == 1
