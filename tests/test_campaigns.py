"""Campaigns in process (docs/design.md#api-decisions "Campaigns"): the API's validation and shapes, the runner's batches
and personalisation, the state machine, exact counts (also under concurrency), per-recipient truth and
the CSV export, auto-pause, opt-out keywords, answers attributed to a campaign, and tenancy. The runner
and the delivery worker are driven one step at a time; the receivers are real local HTTP servers."""
import asyncio
import csv
import io
import json

import pytest
from standardwebhooks import Webhook

from common.ids import now_iso, utcnow
from services import contacts, lists
from services.campaign_runner import BATCH_MAX, CampaignRunner
from storage.campaigns import hand_over
from storage import campaigns as campaign_store
from storage.dialect import dialect_of
from tests.campaign_helpers import (assert_counts_add_up, campaign, create, deliver_all, make_list, people, recipient_statuses,
                                    recipients, run_all, set_webhook)
from tests.delivery_helpers import Receiver, later, secret_of
from tests import db_direct

INBOUND = "/v1/incoming_custom_channel_message"


# ---- creation and validation -------------------------------------------------------------------

async def test_create_answers_201_with_the_campaign_and_its_snapshot(api, services, account, receiver):
    """docs/design.md#api-decisions: POST /v1/campaigns → 201 {id, name, listId, campaignId, status, counts: {total, queued,
    sent, failed, skipped}, startAt, createdAt, finishedAt}; campaignId defaults to the campaign's id."""
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(3))
    r = await create(api, account, list_id)
    assert r.code == 201, r.body
    c = r.json
    assert c["id"].startswith("cmp_") and c["campaignId"] == c["id"] and c["listId"] == list_id
    assert c["status"] == "running" and c["ratePerMinute"] == 600 and c["finishedAt"] is None
    assert c["counts"] == {"total": 3, "pending": 3, "queued": 0, "sent": 0, "failed": 0, "retrying": 0, "skipped": 0,
                           "cancelled": 0}
    assert c["startAt"] <= c["startedAt"] and c["createdAt"]
    assert await campaign(api, account, c["id"]) == c
    listed = (await api.get("/v1/campaigns", key=account["api_key"])).json
    assert listed == {"data": [c], "nextCursor": None}


@pytest.mark.parametrize("fields, field", [
    ({"name": "  "}, "name"), ({"body": " "}, "body"), ({"body": "Hi {{firstname}}"}, "{{firstname}}"),
    ({"body": "{{firstName}} {{phone}}"}, "body"), ({"ratePerMinute": 0}, "ratePerMinute"),
    ({"ratePerMinute": 1_000_001}, "ratePerMinute"), ({"startAt": "2031-01-01T10:00:00"}, "startAt"),
    ({"startAt": "tomorrow"}, "startAt"), ({"campaignId": " "}, "campaignId"), ({"listId": None}, "listId"),
    ({"extra": 1}, "extra")])
async def test_invalid_fields_are_400_naming_the_field_and_change_nothing(api, services, account, receiver,
                                                                           fields, field):
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(1))
    r = await create(api, account, list_id, **fields)
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR" and field in r.json["error"]["message"]
    assert (await api.get("/v1/campaigns", key=account["api_key"])).json["data"] == []


async def test_unknown_list_is_404_and_no_webhook_url_is_400(api, services, account, receiver):
    list_id, _ = await make_list(services, account, people(1))
    r = await create(api, account, list_id)
    assert r.code == 400 and "Custom Channel Webhook URL" in r.json["error"]["message"]
    await set_webhook(api, account, receiver.url)
    r = await create(api, account, "lst_unknown")
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND"
    r = await api.get("/v1/campaigns/cmp_unknown", key=account["api_key"])
    assert r.code == 404 and r.json["error"]["code"] == "NOT_FOUND"


# ---- sending -----------------------------------------------------------------------------------

async def test_each_contact_gets_one_personalised_message_with_the_extended_payload(api, services, account, receiver,
                                                                                   runner, worker):
    """docs/design.md#api-decisions: placeholders (missing → empty); campaignId in every message and its reply payload;
    "Reply payload, extended": contact {firstName, lastName, phone, email}, toId null for a contact that
    never wrote; a contact that did write gets its fromId as toId (docs/api.md#webhook-delivery)."""
    await set_webhook(api, account, receiver.url)
    list_id, ids = await make_list(services, account, people(3) + [{"email": "noname@example.com"}])
    r = await api.post(INBOUND, {"customData": {"messageSid": "s1", "fromId": "+14155550001", "toId": "shop",
                                                "body": "hello", "channel": "whatsapp"}}, key=account["api_key"])
    assert r.code == 200
    c = (await create(api, account, list_id, campaignId="spring-24", body="Hi {{firstName}}, {{email}}")).json
    await run_all(runner)
    await deliver_all(worker)

    secret = await secret_of(services, account)
    payloads = {p["contactId"]: p for p in (Webhook(secret).verify(q["body"], q["headers"]) for q in receiver.requests)}
    assert sorted(payloads) == sorted(ids) and len(receiver.requests) == 4
    assert payloads[ids[0]]["body"] == "Hi Ann0, ann0@example.com"
    assert payloads[ids[3]]["body"] == "Hi , noname@example.com"
    assert {p["campaignId"] for p in payloads.values()} == {"spring-24"}
    assert payloads[ids[1]]["toId"] == "+14155550001" and payloads[ids[1]]["channel"] == "whatsapp"
    assert payloads[ids[0]]["toId"] is None and payloads[ids[0]]["channel"] is None
    assert payloads[ids[0]]["contact"] == {"firstName": "Ann0", "lastName": "Lee0", "phone": "+14155550000",
                                           "email": "ann0@example.com"}
    done = await campaign(api, account, c["id"])
    assert done["status"] == "completed" and done["finishedAt"]
    assert done["counts"] == {"total": 4, "pending": 0, "queued": 0, "sent": 4, "failed": 0, "retrying": 0, "skipped": 0,
                              "cancelled": 0}
    rows = await recipients(api, account, c["id"])
    assert {(x["contactId"], x["status"]) for x in rows} == {(i, "sent") for i in ids}
    message = (await api.get(f"/v1/messages/{rows[0]['messageId']}", key=account["api_key"])).json
    assert (message["author"], message["campaignId"], message["status"]) == ("campaign", "spring-24", "Sent")


async def test_an_opted_out_contact_is_skipped_and_counted(api, services, account, receiver, runner, worker):
    """docs/design.md#api-decisions: "a contact that opted out is skipped"; the opt-out is an inbound message whose whole body
    is one of optOutKeywords (default STOP, UNSUBSCRIBE; case-insensitive)."""
    await set_webhook(api, account, receiver.url)
    list_id, ids = await make_list(services, account, people(3))
    r = await api.post(INBOUND, {"customData": {"messageSid": "s1", "fromId": "+14155550002", "toId": "shop",
                                                "body": "  stop "}}, key=account["api_key"])
    assert r.code == 200
    assert (await api.get(f"/v1/contacts/{ids[2]}", key=account["api_key"])).json["optedOut"] is True
    c = (await create(api, account, list_id)).json
    await run_all(runner)
    await deliver_all(worker)
    done = await campaign(api, account, c["id"])
    assert done["counts"]["sent"] == 2 and done["counts"]["skipped"] == 1 and done["status"] == "completed"
    assert_counts_add_up(done)
    [skipped] = await recipients(api, account, c["id"], status="skipped")
    assert skipped["contactId"] == ids[2] and skipped["messageId"] is None
    assert len(receiver.requests) == 2



def _delete_contact(services, contact_id):
    """Remove a contact the way no endpoint does (there is no contact deletion), with foreign keys off, so that
    a campaign's snapshot still names it: what a batch meets when a contact is gone."""
    cx = db_direct.connect(services, foreign_keys=False)
    try:
        cx.execute("DELETE FROM contacts WHERE id = ?", (contact_id,))
    finally:
        cx.close()


async def test_one_batch_of_mixed_recipients(api, services, account, receiver, worker):
    """One batch holds a contact that never wrote (toId null), one that wrote (its fromId and channel), one
    known only by a channel identity (a send_custom_channel_message to its phone: the identity's fromId), one
    opted out and one whose contact is gone (both skipped, without a message); the counts are exact once the
    batch commits, and each message's reply payload is the one outbound path's."""
    await set_webhook(api, account, receiver.url)
    list_id, ids = await make_list(services, account, people(5))
    key = account["api_key"]
    for sid, phone, body in (("s1", "+14155550001", "hello"), ("s2", "+14155550002", "STOP")):
        r = await api.post(INBOUND, {"customData": {"messageSid": sid, "fromId": phone, "toId": "shop", "body": body,
                                                    "channel": "whatsapp"}}, key=key)
        assert r.code == 200
    r = await api.post("/v1/send_custom_channel_message", {"customData": {
        "fromId": "+14155550004", "customChannel": "sms", "body": "An earlier reply"}}, key=key)
    assert r.code == 200 and r.json["contactId"] == ids[4]
    await deliver_all(worker)
    receiver.requests.clear()
    c = (await create(api, account, list_id, campaignId="mixed")).json
    _delete_contact(services, ids[3])
    result = await services.db.write_background(hand_over, c["id"], BATCH_MAX, now_iso())  # one batch: all 5
    assert (result["status"], result["queued"], result["skipped"]) == ("completed", 3, 2)
    after = await campaign(api, account, c["id"])
    assert after["status"] == "completed"
    assert after["counts"] == {"total": 5, "pending": 0, "queued": 3, "sent": 0, "failed": 0, "retrying": 0, "skipped": 2,
                               "cancelled": 0}
    assert await services.db.read(recipient_statuses, c["id"]) == {"pending": 0, "queued": 3, "sent": 0, "failed": 0,
                                                          "retrying": 0, "skipped": 2, "cancelled": 0}
    await deliver_all(worker)
    secret = await secret_of(services, account)
    payloads = {p["contactId"]: p for p in (Webhook(secret).verify(q["body"], q["headers"]) for q in receiver.requests)}
    assert sorted(payloads) == sorted([ids[0], ids[1], ids[4]])
    assert (payloads[ids[0]]["toId"], payloads[ids[0]]["channel"]) == (None, None)
    assert (payloads[ids[1]]["toId"], payloads[ids[1]]["channel"]) == ("+14155550001", "whatsapp")
    assert (payloads[ids[4]]["toId"], payloads[ids[4]]["channel"]) == ("+14155550004", None)
    assert {p["campaignId"] for p in payloads.values()} == {"mixed"}
    assert payloads[ids[4]]["body"] == "Hi Ann4 Lee4!" and payloads[ids[4]]["userId"]
    message = (await api.get(f"/v1/messages/{payloads[ids[1]]['messageId']}", key=key)).json
    assert (message["author"], message["direction"], message["toId"]) == ("campaign", "outbound", "+14155550001")
    skipped = {r["contactId"]: r for r in await recipients(api, account, c["id"], status="skipped")}
    assert set(skipped) == {ids[2]} and skipped[ids[2]]["messageId"] is None  # a gone contact is not listed


async def test_counts_are_exact_after_each_batch(api, services, account, receiver):
    """Batches of 3: after each, the counts equal the recipients' statuses, exactly one batch more is handed
    over, each queued contact's conversation shows the campaign's message, and the batch announced its
    contacts with one messages.created event."""
    await set_webhook(api, account, receiver.url)
    list_id, ids = await make_list(services, account, people(10))
    r = await api.post(INBOUND, {"customData": {"messageSid": "s1", "fromId": "+14155550004", "toId": "shop",
                                                "body": "stop"}}, key=account["api_key"])
    assert r.code == 200
    c = (await create(api, account, list_id, ratePerMinute=1_000_000)).json
    ordered = sorted(ids)
    for step in range(1, 5):
        await services.db.write_background(hand_over, c["id"], 3, now_iso())
        counts = (await campaign(api, account, c["id"]))["counts"]
        statuses = await services.db.read(recipient_statuses, c["id"])
        assert {k: counts[k] for k in statuses} == statuses
        handed = ordered[:min(10, 3 * step)]
        assert counts["pending"] == 10 - len(handed) and counts["queued"] + counts["skipped"] == len(handed)
        assert counts["skipped"] == (1 if ids[4] in handed else 0)
        queued = [i for i in handed if i != ids[4]]
        assert await services.db.read(_campaign_conversations, account["account_id"]) == sorted(queued)
        created = await services.db.read(_batch_events, account["account_id"])
        assert created[-1] == [i for i in ordered[3 * (step - 1):3 * step] if i != ids[4]]
    assert (await campaign(api, account, c["id"]))["status"] == "completed"


def _campaign_conversations(cx, account_id):
    return [r[0] for r in cx.execute("SELECT contact_id FROM conversations WHERE account_id = ?"
                                     " AND last_author = 'campaign' ORDER BY contact_id", (account_id,))]


def _batch_events(cx, account_id):
    return [json.loads(r[0])["contactIds"] for r in cx.execute(
        "SELECT data FROM events WHERE account_id = ? AND type = 'messages.created' ORDER BY id", (account_id,))]


async def test_a_batch_of_opted_out_contacts_only_makes_no_message(api, services, account, receiver):
    await set_webhook(api, account, receiver.url)
    list_id, ids = await make_list(services, account, people(2))
    for i in range(len(ids)):
        r = await api.post(INBOUND, {"customData": {"messageSid": f"s{i}", "fromId": f"+1415555000{i}",
                                                    "toId": "shop", "body": "STOP"}}, key=account["api_key"])
        assert r.code == 200
    c = (await create(api, account, list_id)).json
    result = await services.db.write_background(hand_over, c["id"], BATCH_MAX, now_iso())
    assert (result["status"], result["queued"], result["skipped"]) == ("completed", 0, 2)
    done = await campaign(api, account, c["id"])
    assert done["status"] == "completed" and done["counts"]["skipped"] == 2 and done["counts"]["queued"] == 0
    assert await services.db.read(_campaign_conversations, account["account_id"]) == []
    assert await services.db.read(_batch_events, account["account_id"]) == []


async def test_batches_follow_the_bucket_and_the_runner_resumes_after_its_last_batch(api, services, account, receiver,
                                                                                     runner):
    """The runner hands over at most what the rate allows (a bucket of one second's worth, starting with
    one token) and continues from its cursor: a new runner (a restart) never makes a second message."""
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(12))
    c = (await create(api, account, list_id, ratePerMinute=120)).json  # 2 per second
    await runner.step()
    assert (await campaign(api, account, c["id"]))["counts"]["queued"] == 1
    runner.clock_state["now"] += 0.4  # not a whole token yet
    await runner.step()
    assert (await campaign(api, account, c["id"]))["counts"]["queued"] == 1
    runner.clock_state["now"] += 10  # the bucket holds at most one second's worth: 2
    await runner.step()
    assert (await campaign(api, account, c["id"]))["counts"]["queued"] == 3
    restarted = CampaignRunner(services, clock=lambda: 5000.0, batch_size=BATCH_MAX)
    await restarted.step()
    after = await campaign(api, account, c["id"])
    assert after["counts"]["queued"] == 4 and after["counts"]["pending"] == 8
    runner.clock_state["now"] += 10
    await run_all(runner)
    rows = await recipients(api, account, c["id"])
    assert len({r["messageId"] for r in rows}) == 12 and all(r["status"] == "queued" for r in rows)


async def test_a_scheduled_campaign_snapshots_its_list_when_it_starts(api, services, account, receiver, runner):
    """docs/design.md#api-decisions: status scheduled (startAt in the future) → running; the runner snapshots the list's
    members when the campaign starts, so a contact added meanwhile is included and one added later is not."""
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(2))
    c = (await create(api, account, list_id, startAt="2999-01-01T00:00:00Z")).json
    assert c["status"] == "scheduled" and c["counts"]["total"] == 0 and c["startedAt"] is None
    await runner.step()
    assert (await campaign(api, account, c["id"]))["status"] == "scheduled"
    await services.db.write(_set_start, c["id"], "2000-01-01T00:00:00.000Z")
    _, more = await make_list(services, account, people(1, start=50), name="Other")
    await lists.add_contact(services.db, account["account_id"], list_id, more[0])
    await runner.step()
    started = await campaign(api, account, c["id"])
    assert started["status"] == "running" and started["counts"]["total"] == 3
    await lists.add_contact(services.db, account["account_id"], list_id,
                            (await contacts.create_contact(services.db, account["account_id"], phone="+14155559999"))[0]["id"])
    await run_all(runner)
    assert (await campaign(api, account, c["id"]))["counts"]["total"] == 3


def _set_start(cx, campaign_id, start_at):
    cx.execute("UPDATE campaigns SET start_at = ? WHERE id = ?", (start_at, campaign_id))


async def test_an_empty_list_completes_at_once(api, services, account, receiver):
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, [])
    c = (await create(api, account, list_id)).json
    assert c["status"] == "completed" and c["counts"]["total"] == 0 and c["finishedAt"]


# ---- state machine -----------------------------------------------------------------------------

async def test_the_state_machine_and_its_409s(api, services, account, receiver, runner, worker):
    """docs/design.md#api-decisions: pause, resume, cancel (queued messages are dropped, sent ones stay), retry-failed;
    an action the status does not allow is 409 CONFLICT and changes nothing."""
    key = account["api_key"]
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(6))
    c = (await create(api, account, list_id)).json

    async def act(action, code=200):
        r = await api.post(f"/v1/campaigns/{c['id']}/{action}", key=key)
        assert r.code == code, (action, r.body)
        if code == 409:
            assert r.json["error"]["code"] == "CONFLICT"
        return r.json

    await act("resume", 409)
    await act("retry-failed", 409)  # running, but nothing failed
    runner.clock_state["now"] += 0.2
    await runner.step()  # one token: one message queued
    paused = await act("pause")
    assert paused["status"] == "paused" and paused["pausedReason"] == "paused by a person"
    await act("pause", 409)
    await act("retry-failed", 409)
    await run_all(runner)
    assert (await campaign(api, account, c["id"]))["counts"]["queued"] == 1  # nothing handed over while paused
    assert await worker.run_due(later(utcnow(), 3600)) == 0  # and the queued message is held
    resumed = await act("resume")
    assert resumed["status"] == "running" and resumed["pausedReason"] is None
    assert await worker.run_due(utcnow()) == 1
    runner.clock_state["now"] += 0.2
    await runner.step()
    cancelled = await act("cancel")
    assert cancelled["status"] == "cancelled" and cancelled["finishedAt"]
    assert cancelled["counts"] == {"total": 6, "pending": 0, "queued": 0, "sent": 1, "failed": 0, "retrying": 0, "skipped": 0,
                                   "cancelled": 5}
    for action in ("pause", "resume", "cancel", "retry-failed"):
        await act(action, 409)
    assert await worker.run_due(later(utcnow(), 3600)) == 0  # the dropped message is never sent
    [dropped] = [r for r in await recipients(api, account, c["id"], status="cancelled") if r["messageId"]]
    message = (await api.get(f"/v1/messages/{dropped['messageId']}", key=key)).json
    assert message["status"] == "Cancelled"
    assert len(receiver.requests) == 1
    r = await api.post(f"/v1/campaigns/{c['id']}/restart", key=key)
    assert r.code == 404


async def test_retry_failed_resends_only_the_failed_ones(api, services, account, receiver, runner, worker):
    """docs/design.md#api-decisions: retry-failed "re-sends only the failed ones", with the same message ids; the counts end
    exact."""
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(4))
    c = (await create(api, account, list_id)).json
    await run_all(runner)
    receiver.answers = [(200, {}, b"ok"), (404, {}, b"no"), (200, {}, b"ok"), (410, {}, b"gone")]
    await deliver_all(worker)
    after = await campaign(api, account, c["id"])
    assert after["status"] == "completed" and after["counts"]["sent"] == 2 and after["counts"]["failed"] == 2
    failed = await recipients(api, account, c["id"], status="failed")
    assert {f["error"]["httpStatus"] for f in failed} == {404, 410}
    r = await api.post(f"/v1/campaigns/{c['id']}/retry-failed", key=account["api_key"])
    assert r.code == 200 and r.json["counts"]["queued"] == 2 and r.json["counts"]["failed"] == 0
    await deliver_all(worker, later(utcnow(), 60))
    done = await campaign(api, account, c["id"])
    assert done["counts"]["sent"] == 4 and done["counts"]["failed"] == 0
    retried = {json.loads(q["body"])["messageId"] for q in receiver.requests[4:]}
    assert retried == {f["messageId"] for f in failed} and len(receiver.requests) == 6


async def test_most_first_sends_failing_pauses_the_campaign(api, services, account, runner, worker):
    """The auto-pause rule (docs/api.md "Campaigns"): of the first 20 first attempts, 16 or more failed → the
    campaign pauses itself with the reason recorded, and what it had queued is held."""
    closed = Receiver()  # nobody listens: every attempt is a connection error
    await set_webhook(api, account, closed.url)
    list_id, _ = await make_list(services, account, people(150))
    c = (await create(api, account, list_id, ratePerMinute=6000)).json
    await runner.step()  # the first round finds one token (a new bucket starts with one)
    runner.clock_state["now"] += 1
    await runner.step()  # a second's worth: 100 more
    for _ in range(10):
        await worker.run_due(utcnow())
    paused = await campaign(api, account, c["id"])
    assert paused["status"] == "paused"
    assert paused["pausedReason"].startswith("paused automatically:") and "connection error" in paused["pausedReason"]
    attempted = paused["counts"]["retrying"]  # connection errors: each has a retry scheduled (held now)
    assert 20 <= attempted < 30 and paused["counts"]["queued"] == 101 - attempted and paused["counts"]["failed"] == 0
    assert await worker.run_due(later(utcnow(), 86400)) == 0  # queued and retries are held
    runner.clock_state["now"] += 60
    await runner.step()
    assert (await campaign(api, account, c["id"]))["counts"]["pending"] == 49  # and nothing more is handed over


async def test_counts_stay_exact_under_concurrent_batches_deliveries_and_actions(api, services, account, receiver,
                                                                                  runner, worker):
    """Counts are kept in the transactions of the changes they count: with batches, deliveries (some
    failing) and pause/resume racing, the counts always equal the recipients' statuses."""
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(60))
    c = (await create(api, account, list_id, ratePerMinute=1_000_000)).json
    receiver.answers = [(500, {}, b"x") if i % 3 == 0 else (200, {}, b"ok") for i in range(60)]
    worker.start()
    key = account["api_key"]

    async def pause_resume():
        for _ in range(5):
            await api.post(f"/v1/campaigns/{c['id']}/pause", key=key)
            await asyncio.sleep(0.01)
            await api.post(f"/v1/campaigns/{c['id']}/resume", key=key)

    async def batches():
        for _ in range(40):
            runner.clock_state["now"] += 0.1
            await runner.step()
            await asyncio.sleep(0.005)

    async def check():
        for _ in range(30):
            counts, truth = await services.db.read(_counts_and_statuses, c["id"])  # one snapshot
            assert {k: counts[k] for k in truth} == truth and sum(truth.values()) == counts["total"]
            await asyncio.sleep(0.01)

    await asyncio.gather(pause_resume(), batches(), check())
    await worker.stop()
    final = await campaign(api, account, c["id"])
    assert_counts_add_up(final)
    truth = await services.db.read(recipient_statuses, c["id"])
    assert {k: final["counts"][k] for k in truth} == truth


def _counts_and_statuses(cx, campaign_id):
    """The campaign's counts and its recipients' statuses, read in one transaction (one snapshot: on PostgreSQL
    READ COMMITTED gives each statement its own, and a batch committing between the two reads looked like a
    miscount)."""
    cx.execute("BEGIN ISOLATION LEVEL REPEATABLE READ" if dialect_of(cx).name == "postgresql" else "BEGIN")
    try:
        row = campaign_store.get_campaign_in_tx(cx, None, campaign_id)
        return {name: row[name] for name in campaign_store.COUNTS}, recipient_statuses(cx, campaign_id)
    finally:
        cx.execute("COMMIT")


# ---- recipients, CSV ---------------------------------------------------------------------------

async def test_recipients_page_and_the_csv_export(api, services, account, receiver, runner, worker):
    await set_webhook(api, account, receiver.url)
    list_id, ids = await make_list(services, account, people(5) + [{"email": "x@example.com", "first_name": "=cmd()"}])
    c = (await create(api, account, list_id)).json
    await run_all(runner)
    receiver.answers = [(404, {}, b"no")]
    await deliver_all(worker)
    key = account["api_key"]
    r = await api.get(f"/v1/campaigns/{c['id']}/recipients?limit=4", key=key)
    assert len(r.json["data"]) == 4 and r.json["nextCursor"]
    r2 = await api.get(f"/v1/campaigns/{c['id']}/recipients?limit=4&cursor={r.json['nextCursor']}", key=key)
    assert [x["contactId"] for x in r.json["data"] + r2.json["data"]] == sorted(ids) and r2.json["nextCursor"] is None
    assert (await api.get(f"/v1/campaigns/{c['id']}/recipients?status=bogus", key=key)).code == 400

    r = await api.client.fetch(f"/v1/campaigns/{c['id']}/recipients.csv?apiKey={key}")
    assert r.code == 200 and r.headers["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.body.decode())))
    assert len(rows) == 6 and {row["contactId"] for row in rows} == set(ids)
    [failed] = [row for row in rows if row["status"] == "failed"]
    assert failed["httpStatus"] == "404" and failed["error"].startswith("HTTP 404")
    assert {row["firstName"] for row in rows} >= {"'=cmd()"}  # no formula reaches a spreadsheet
    assert {row["phone"] for row in rows if row["phone"]} >= {"'+14155550000"}
    r = await api.client.fetch(f"/v1/campaigns/{c['id']}/recipients.csv?status=failed&apiKey={key}")
    assert len(list(csv.DictReader(io.StringIO(r.body.decode())))) == 1


# ---- lanes: replies are not starved ------------------------------------------------------------

async def test_a_reply_goes_out_before_a_campaign_backlog(api, services, account, receiver, runner, worker):
    """A campaign shares the account's delivery concurrency (docs/design.md#api-decisions) but its backlog never delays the
    account's replies: they are read first, and campaigns leave a slot free."""
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(30))
    await create(api, account, list_id, ratePerMinute=1_000_000)
    await runner.step()
    runner.clock_state["now"] += 1
    await runner.step()
    r = await api.post("/v1/send_custom_channel_message", {"customData": {
        "fromId": "user-9", "customChannel": "chat", "body": "A reply"}}, key=account["api_key"])
    assert r.code == 200
    await worker.run_due(utcnow())  # one round: 4 per account, the reply first
    bodies = [json.loads(q["body"])["body"] for q in receiver.requests]
    assert "A reply" in bodies and len(bodies) == 4
    assert worker.campaign_slots == 3


# ---- opt-out keywords --------------------------------------------------------------------------

async def test_opt_out_and_back_in_with_the_accounts_keywords(api, services, account):
    """docs/design.md#api-decisions: optOutKeywords / optInKeywords account settings, case-insensitive, the whole body."""
    key = account["api_key"]

    async def say(body, sid):
        r = await api.post(INBOUND, {"customData": {"messageSid": sid, "fromId": "u-1", "toId": "t", "body": body}},
                           key=key)
        assert r.code == 200
        message = (await api.get(f"/v1/messages/{r.json['messageId']}", key=key)).json
        return (await api.get(f"/v1/contacts/{message['contactId']}", key=key)).json["optedOut"]

    assert await say("please stop calling me", "1") is False  # not the whole body
    assert await say("Unsubscribe", "2") is True
    assert await say("start", "3") is False
    r = await api.patch("/v1/account/settings", {"optOutKeywords": [" Halt ", "halt", "ARRÊT"],
                                                 "optInKeywords": ["go"]}, key=key)
    assert r.code == 200 and r.json["optOutKeywords"] == ["Halt", "ARRÊT"] and r.json["optInKeywords"] == ["go"]
    assert await say("STOP", "4") is False  # replaced
    assert await say("arrêt", "5") is True
    assert await say("GO", "6") is False
    for bad, field in (({"optOutKeywords": []}, "optOutKeywords"), ({"optInKeywords": ["x" * 33]}, "optInKeywords"),
                       ({"optInKeywords": ["halt"]}, "halt"), ({"optOutKeywords": ["  "]}, "optOutKeywords[0]")):
        r = await api.patch("/v1/account/settings", bad, key=key)
        assert r.code == 400 and field in r.json["error"]["message"], (bad, r.body)
    r = await api.patch("/v1/account/settings", {"optOutKeywords": None, "optInKeywords": None}, key=key)
    assert r.json["optOutKeywords"] == ["STOP", "UNSUBSCRIBE"]
    assert (await api.get("/v1/account", key=key)).json["settings"]["optInKeywords"] == ["START"]


async def test_a_keyword_reply_that_changes_the_opt_out_notifies_contact_updated(api, services, account, receiver,
                                                                                   worker):
    """A STOP (START) reply changes optedOut as a PATCH does, so it queues contact.updated with the contact as
    the API shows it, in the message's transaction; a repeated STOP changes nothing and queues nothing."""
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"contact.updated": receiver.url}}, key=key)
    assert r.code == 200, r.body

    async def say(body, sid):
        """The notifications this reply delivered, and the contact afterwards."""
        before = len(receiver.requests)
        r = await api.post(INBOUND, {"customData": {"messageSid": sid, "fromId": "u-1", "toId": "t", "body": body}},
                           key=key)
        assert r.code == 200, r.body
        await deliver_all(worker)
        message = (await api.get(f"/v1/messages/{r.json['messageId']}", key=key)).json
        contact = (await api.get(f"/v1/contacts/{message['contactId']}", key=key)).json
        return [json.loads(q["body"]) for q in receiver.requests[before:]], contact

    assert (await say("hello", "1"))[0] == []  # a new contact: contact.created, which nobody listens to
    sent, contact = await say("STOP", "2")
    assert [body["event"] for body in sent] == ["contact.updated"]
    assert sent[0]["data"] == contact and contact["optedOut"] is True
    assert contact["optOutChange"]["via"] == "reply" and contact["optOutChange"]["by"] == "STOP"
    assert (await say(" stop ", "3"))[0] == []  # already opted out: nothing changed
    sent, contact = await say("Start", "4")
    assert [body["event"] for body in sent] == ["contact.updated"]
    assert sent[0]["data"] == contact and contact["optedOut"] is False
    assert (await say("stop now please", "5"))[0] == []  # not a keyword (the whole body is not one)


# ---- answers to a campaign ---------------------------------------------------------------------

async def test_an_answer_without_campaign_id_is_attributed_to_the_latest_campaign(api, services, account, receiver,
                                                                                  runner):
    """Answers to a campaign reach bot.campaigns[campaignId] (docs/design.md#api-decisions): an inbound message with a
    campaignId keeps it; one without it, from a contact that got a campaign message in the last 72 h,
    gets that campaign's."""
    key = account["api_key"]
    await set_webhook(api, account, receiver.url)
    r = await api.post(INBOUND, {"customData": {"messageSid": "a", "fromId": "+14155550000", "toId": "t",
                                                "body": "hi"}}, key=key)
    contact_id = (await api.get(f"/v1/messages/{r.json['messageId']}", key=key)).json["contactId"]
    lst = await lists.create_list(services.db, account["account_id"], "One")
    await lists.add_contact(services.db, account["account_id"], lst["id"], contact_id)
    await create(api, account, lst["id"], campaignId="promo-7")
    await run_all(runner)

    async def inbound(sid, **extra):
        r = await api.post(INBOUND, {"customData": {"messageSid": sid, "fromId": "+14155550000", "toId": "t",
                                                    "body": "yes please", **extra}}, key=key)
        return (await api.get(f"/v1/messages/{r.json['messageId']}", key=key)).json["campaignId"]

    assert await inbound("b") == "promo-7"
    assert await inbound("c", campaignId="other") == "other"
    await services.db.write(_age_campaign_messages, contact_id, "2000-01-01T00:00:00.000Z")
    assert await inbound("d") is None


def _age_campaign_messages(cx, contact_id, created_at):
    cx.execute("UPDATE messages SET created_at = ? WHERE contact_id = ? AND author = 'campaign'", (created_at, contact_id))


# ---- tenancy -----------------------------------------------------------------------------------

async def test_another_accounts_key_sees_changes_and_learns_nothing(api, services, account, other_account, receiver,
                                                                    runner):
    await set_webhook(api, account, receiver.url)
    await set_webhook(api, other_account, receiver.url)
    list_id, _ = await make_list(services, account, people(2))
    c = (await create(api, account, list_id)).json
    key = other_account["api_key"]
    assert (await api.get("/v1/campaigns", key=key)).json == {"data": [], "nextCursor": None}
    for path in (f"/v1/campaigns/{c['id']}", f"/v1/campaigns/{c['id']}/recipients",
                 f"/v1/campaigns/{c['id']}/recipients.csv"):
        r = await api.get(path, key=key)
        assert r.code == 404 and r.json["error"]["code"] == "NOT_FOUND", path
    for action in ("pause", "resume", "cancel", "retry-failed"):
        r = await api.post(f"/v1/campaigns/{c['id']}/{action}", key=key)
        assert r.code == 404 and r.json["error"]["message"] == f"no campaign with id {c['id']}"
    r = await create(api, other_account, list_id)  # the first account's list
    assert r.code == 404 and r.json["error"]["code"] == "LIST_NOT_FOUND"
    assert await campaign(api, account, c["id"]) == c
