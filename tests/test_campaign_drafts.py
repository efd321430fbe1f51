"""Issue 43 item 7, campaigns you can check before they go: a draft (draft: true) sends nothing and snapshots
nothing until POST /v1/campaigns/{id}/start, which starts it now or schedules it (the runner starts it at
that time); its preview is the body filled for a sample contact with the count it would send to; a test
sends one real message to one contact without starting it; a draft can be cancelled; bad input is 400
naming the field; another account's key finds nothing. A create without the new fields starts at once, as
before (tests/test_campaigns.py). The runner and the delivery worker are driven a step at a time; the
receiver is a real local HTTP server. Both databases (make test / make test-postgres)."""
import asyncio
import json
from datetime import timedelta

import pytest

from common.ids import iso, now_iso, parse_iso, utcnow
from storage.db import reads
from tests.campaign_helpers import campaign, create, deliver_all, make_list, people, run_all, set_webhook
from tests.inbound_helpers import INBOUND

ZERO = {"total": 0, "pending": 0, "queued": 0, "sent": 0, "failed": 0, "retrying": 0, "skipped": 0, "cancelled": 0}


@reads
def _outbox_rows(cx, account_id):
    return cx.execute("SELECT COUNT(*) FROM outbox WHERE account_id = ? AND kind = 'reply'", (account_id,)).fetchone()[0]


@reads
def _campaign_status(cx, campaign_id):
    return cx.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0]


async def outbox_rows(services, account):
    return await _outbox_rows(services.db, account["account_id"])


async def draft(api, account, list_id, **fields):
    r = await create(api, account, list_id, draft=True, **fields)
    assert r.code == 201, r.body
    return r.json


async def post(api, account, path, body=None):
    if body is None:
        return await api.post(path, key=account["api_key"])
    return await api.post(path, body, key=account["api_key"])


def payloads(receiver):
    return [json.loads(request["body"]) for request in receiver.requests]


async def test_a_draft_sends_nothing_until_it_is_started(api, services, account, receiver, runner, worker):
    await set_webhook(api, account, receiver.url)
    list_id, ids = await make_list(services, account, people(3))
    c = await draft(api, account, list_id)
    assert c["status"] == "draft" and c["counts"] == ZERO and c["startedAt"] is None
    await run_all(runner)
    await deliver_all(worker)
    assert await outbox_rows(services, account) == 0 and receiver.requests == []
    assert (await campaign(api, account, c["id"]))["status"] == "draft"

    r = await post(api, account, f"/v1/campaigns/{c['id']}/start")  # no body: now
    assert r.code == 200, r.body
    assert r.json["status"] == "running" and r.json["counts"]["total"] == 3 and r.json["startedAt"]
    await run_all(runner)
    await deliver_all(worker)
    assert await outbox_rows(services, account) == 3
    assert sorted(p["contactId"] for p in payloads(receiver)) == sorted(ids)
    assert (await campaign(api, account, c["id"]))["counts"]["sent"] == 3

    again = await post(api, account, f"/v1/campaigns/{c['id']}/start")
    assert again.code == 409 and again.json["error"]["code"] == "CONFLICT", again.body
    assert "draft or scheduled" in again.json["error"]["message"]


async def test_a_create_without_the_new_fields_starts_at_once_as_before(api, services, account, receiver, runner,
                                                                       worker):
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(2))
    r = await create(api, account, list_id, draft=False)
    assert r.code == 201 and r.json["status"] == "running" and r.json["counts"]["total"] == 2
    await run_all(runner)
    await deliver_all(worker)
    assert len(receiver.requests) == 2


async def test_a_draft_started_with_startAt_is_scheduled_and_starts_at_that_time(api, services, account, receiver,
                                                                                runner):
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(2))
    c = await draft(api, account, list_id)
    start_at = iso(utcnow() + timedelta(seconds=2))
    r = await post(api, account, f"/v1/campaigns/{c['id']}/start", {"startAt": start_at})
    assert r.code == 200, r.body
    assert r.json["status"] == "scheduled" and r.json["startAt"] == start_at and r.json["counts"] == ZERO
    for _ in range(300):  # the runner's rounds until it starts it (the wall clock passes startAt)
        await runner.step()
        if await _campaign_status(services.db, c["id"]) != "scheduled":
            break
        await asyncio.sleep(0.1)
    started = await campaign(api, account, c["id"])
    assert started["status"] == "running" and started["counts"]["total"] == 2
    assert parse_iso(started["startedAt"]) >= parse_iso(start_at)  # not before its time

    # A scheduled one can be started early: now.
    later = await draft(api, account, list_id)
    r = await post(api, account, f"/v1/campaigns/{later['id']}/start", {"startAt": "2999-01-01T00:00:00Z"})
    assert r.json["status"] == "scheduled" and r.json["startAt"] == "2999-01-01T00:00:00.000Z"
    r = await post(api, account, f"/v1/campaigns/{later['id']}/start", {})
    assert r.code == 200 and r.json["status"] == "running" and r.json["startAt"] <= now_iso()


async def test_the_preview_is_the_body_filled_for_a_sample_contact_and_sends_nothing(api, services, account,
                                                                                     receiver):
    await set_webhook(api, account, receiver.url)
    list_id, ids = await make_list(services, account, people(3))
    c = await draft(api, account, list_id)
    r = await post(api, account, f"/v1/campaigns/{c['id']}/preview")
    assert r.code == 200, r.body
    assert r.json["body"] == "Hi Ann0 Lee0!" and r.json["contact"]["id"] == ids[0]
    assert r.json["contact"]["name"] == "Ann0 Lee0" and r.json["recipients"] == {"total": 3, "optedOut": 0}
    assert [s["id"] for s in r.json["sample"]] == ids

    r = await api.post(INBOUND, {"customData": {"messageSid": "p1", "fromId": "+14155550001", "toId": "shop",
                                                "body": "STOP"}}, key=account["api_key"])
    assert r.code == 200
    other = (await api.post("/v1/contacts", {"email": "zoe@example.com", "firstName": "Zoe"},
                            key=account["api_key"])).json
    r = await post(api, account, f"/v1/campaigns/{c['id']}/preview", {"contactId": other["id"]})
    assert r.code == 200 and r.json["body"] == "Hi Zoe !" and r.json["contact"]["email"] == "zoe@example.com"
    assert r.json["recipients"] == {"total": 3, "optedOut": 1}

    empty = (await api.post("/v1/lists", {"name": "Empty"}, key=account["api_key"])).json
    c2 = await draft(api, account, empty["id"])
    r = await post(api, account, f"/v1/campaigns/{c2['id']}/preview", {})
    assert r.json == {"body": "Hi  !", "contact": None, "recipients": {"total": 0, "optedOut": 0}, "sample": []}

    r = await post(api, account, f"/v1/campaigns/{c['id']}/preview", {"contactId": "ct_nobody"})
    assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND"
    assert await outbox_rows(services, account) == 0 and receiver.requests == []
    assert (await campaign(api, account, c["id"]))["status"] == "draft"


async def test_a_test_send_reaches_one_contact_and_does_not_start_the_campaign(api, services, account, receiver,
                                                                               runner, worker):
    await set_webhook(api, account, receiver.url)
    list_id, ids = await make_list(services, account, people(3))
    me = (await api.post("/v1/contacts", {"email": "owner@example.com", "firstName": "Me"},
                         key=account["api_key"])).json  # "yourself": a contact that is not on the list
    c = await draft(api, account, list_id, channel="sms")
    r = await post(api, account, f"/v1/campaigns/{c['id']}/test", {"contactId": me["id"]})
    assert r.code == 200, r.body
    assert r.json["contactId"] == me["id"] and r.json["body"] == "Hi Me !"
    await run_all(runner)
    await deliver_all(worker)
    [payload] = payloads(receiver)  # exactly one request reached the receiver
    assert payload["contactId"] == me["id"] and payload["messageId"] == r.json["messageId"]
    assert payload["body"] == "Hi Me !" and payload["campaignId"] == c["id"] and payload["channel"] == "sms"
    message = (await api.get(f"/v1/messages/{r.json['messageId']}", key=account["api_key"])).json
    assert message["status"] == "Sent" and message["author"] == "campaign"
    after = await campaign(api, account, c["id"])
    assert after["status"] == "draft" and after["counts"] == ZERO
    assert await outbox_rows(services, account) == 1

    # A list member, then one who opted out: refused, naming the field, nothing sent.
    r = await post(api, account, f"/v1/campaigns/{c['id']}/test", {"contactId": ids[1]})
    assert r.code == 200 and r.json["body"] == "Hi Ann1 Lee1!"
    r = await api.post(INBOUND, {"customData": {"messageSid": "t1", "fromId": "+14155550002", "toId": "shop",
                                                "body": "STOP"}}, key=account["api_key"])
    r = await post(api, account, f"/v1/campaigns/{c['id']}/test", {"contactId": ids[2]})
    assert r.code == 400 and "contactId" in r.json["error"]["message"] and "opted out" in r.json["error"]["message"]
    assert await outbox_rows(services, account) == 2


async def test_a_draft_can_be_cancelled_and_then_never_sends(api, services, account, receiver, runner, worker):
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(2))
    c = await draft(api, account, list_id)
    r = await post(api, account, f"/v1/campaigns/{c['id']}/cancel")
    assert r.code == 200 and r.json["status"] == "cancelled" and r.json["counts"] == ZERO
    r = await post(api, account, f"/v1/campaigns/{c['id']}/start")
    assert r.code == 409
    await run_all(runner)
    await deliver_all(worker)
    assert await outbox_rows(services, account) == 0


async def test_a_list_with_a_draft_cannot_be_deleted(api, services, account, receiver):
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(1))
    c = await draft(api, account, list_id)
    r = await api.delete(f"/v1/lists/{list_id}", key=account["api_key"])
    assert r.code == 409 and r.json["error"]["existingId"] == c["id"], r.body
    assert "draft" in r.json["error"]["message"]


@pytest.mark.parametrize("path, body, field", [
    ("start", {"startAt": "2000-01-01T00:00:00Z"}, "startAt"),
    ("start", {"startAt": "2031-01-01T10:00:00"}, "startAt"),
    ("start", {"startAt": "soon"}, "startAt"),
    ("start", {"when": "now"}, "when"),
    ("test", {}, "contactId"),
    ("test", {"contactId": " "}, "contactId"),
    ("test", {"contactId": 7}, "contactId"),
    ("preview", {"contactId": ""}, "contactId"),
    ("preview", {"extra": 1}, "extra"),
])
async def test_bad_input_is_400_naming_the_field_and_changes_nothing(api, services, account, receiver, path, body,
                                                                     field):
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(1))
    c = await draft(api, account, list_id)
    r = await post(api, account, f"/v1/campaigns/{c['id']}/{path}", body)
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR" and field in r.json["error"]["message"], r.body
    assert await campaign(api, account, c["id"]) == c
    assert await outbox_rows(services, account) == 0


@pytest.mark.parametrize("fields, field", [({"draft": True, "startAt": "2999-01-01T00:00:00Z"}, "startAt"),
                                           ({"draft": "yes"}, "draft")])
async def test_a_bad_draft_create_is_400_naming_the_field(api, services, account, receiver, fields, field):
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(1))
    r = await create(api, account, list_id, **fields)
    assert r.code == 400 and field in r.json["error"]["message"], r.body
    assert (await api.get("/v1/campaigns", key=account["api_key"])).json["data"] == []


async def test_another_accounts_key_finds_no_draft_and_no_contact(api, services, account, other_account, receiver):
    await set_webhook(api, account, receiver.url)
    await set_webhook(api, other_account, receiver.url)
    list_id, ids = await make_list(services, account, people(1))
    c = await draft(api, account, list_id)
    for path, body in (("start", None), ("preview", None), ("test", {"contactId": ids[0]}), ("cancel", None)):
        r = await post(api, other_account, f"/v1/campaigns/{c['id']}/{path}", body)
        assert r.code == 404 and r.json["error"]["code"] == "NOT_FOUND", (path, r.body)
    theirs_list, theirs = await make_list(services, other_account, people(1, start=10), name="Theirs")
    for path in ("preview", "test"):  # the other account's contact, through my own draft
        r = await post(api, account, f"/v1/campaigns/{c['id']}/{path}", {"contactId": theirs[0]})
        assert r.code == 404 and r.json["error"]["code"] == "CONTACT_NOT_FOUND", (path, r.body)
    assert await campaign(api, account, c["id"]) == c
    assert await outbox_rows(services, account) == 0 and await outbox_rows(services, other_account) == 0
    assert receiver.requests == []


async def test_the_status_check_still_refuses_unknown_statuses(services, account, api, receiver):
    """Migration 0437 widened campaigns.status's CHECK by 'draft' and nothing else."""
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(1))
    c = await draft(api, account, list_id)
    with pytest.raises(Exception, match="(?i)check"):
        await services.db.write(_set_status, c["id"], "bogus")
    assert await _campaign_status(services.db, c["id"]) == "draft"


def _set_status(cx, campaign_id, status):
    cx.execute("UPDATE campaigns SET status = ? WHERE id = ?", (status, campaign_id))
