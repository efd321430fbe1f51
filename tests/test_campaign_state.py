"""Issue 18 item 12, campaign state exactly right: (a) a recipient whose delivery failed with a retry scheduled
is `retrying`, not `failed`, and a cancel stops those retries; (b) retry-failed re-queues only what can be sent
and says how many could not; (c) cancel and retry-failed touch the recipients in bounded batches, the rest on
the runner's background lane. After every step the counts equal the recipients' statuses."""
import csv
import io
import json

from common.ids import utcnow
from storage import campaign_actions
from storage import delivery as delivery_store
from tests.campaign_helpers import recipient_statuses, campaign, create, deliver_all, make_list, people, recipients, run_all, set_webhook
from tests.delivery_helpers import later


async def assert_exact(api, services, account, campaign_id):
    """The campaign's counts as the API shows them equal its recipients' statuses, and add up to total."""
    c = await campaign(api, account, campaign_id)
    counts = c["counts"]
    assert {k: v for k, v in counts.items() if k != "total"} == await services.db.read(recipient_statuses, campaign_id)
    assert counts["total"] == sum(v for k, v in counts.items() if k != "total")
    return c


def sql(services, statement, *params):
    cx = services.db.connect_sync()
    try:
        with cx:
            cursor = cx.execute(statement, params)
            return cursor.fetchall() if cursor.description else []  # psycopg has no rows to fetch after a DELETE
    finally:
        cx.close()


async def act(api, account, campaign_id, action):
    return await api.post(f"/v1/campaigns/{campaign_id}/{action}", key=account["api_key"])


async def test_a_delivery_with_a_retry_scheduled_is_retrying_and_cancel_stops_it(api, services, account, receiver,
                                                                                 runner, worker):
    """(a) 503 answers: every recipient has a retry scheduled. They count as retrying (API, recipients filter,
    CSV, campaign.progress), failed stays 0 and the campaign reads Completed; cancel is allowed and stops
    the retries (they become failed for good); nothing is attempted again."""
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(3))
    c = (await create(api, account, list_id)).json
    await run_all(runner)
    receiver.answers = [(503, {}, b"busy")] * 3
    assert await deliver_all(worker) == 3
    after = await assert_exact(api, services, account, c["id"])
    assert after["status"] == "completed"
    assert (after["counts"]["retrying"], after["counts"]["failed"], after["counts"]["queued"]) == (3, 0, 0)
    retrying = await recipients(api, account, c["id"], status="retrying")
    assert len(retrying) == 3 and all(r["error"]["nextAttemptAt"] for r in retrying)
    r = await api.client.fetch(f"/v1/campaigns/{c['id']}/recipients.csv?apiKey={account['api_key']}")
    assert [row["status"] for row in csv.DictReader(io.StringIO(r.body.decode()))] == ["retrying"] * 3
    [progress] = sql(services, "SELECT data FROM events WHERE type = 'campaign.progress' ORDER BY id DESC LIMIT 1")
    assert json.loads(progress[0])["counts"]["retrying"] == 3

    r = await act(api, account, c["id"], "cancel")
    assert r.code == 200, r.body  # was 409: "completed and has no queued message left to cancel"
    cancelled = await assert_exact(api, services, account, c["id"])
    assert cancelled["status"] == "cancelled" and cancelled["pendingAction"] is None
    assert (cancelled["counts"]["retrying"], cancelled["counts"]["failed"]) == (0, 3)
    assert all(r["error"]["nextAttemptAt"] is None for r in await recipients(api, account, c["id"], status="failed"))
    assert await worker.run_due(later(utcnow(), 86400 * 2)) == 0  # no retry goes out any more
    assert len(receiver.requests) == 3


async def test_retry_failed_requeues_only_what_can_be_sent(api, services, account, receiver, runner, worker):
    """(b) After retention removed a failed recipient's delivery, retry-failed re-queues the others, says how
    many it could not, and leaves that one failed (it used to be queued for ever, sending nothing); when
    none can be sent it is 409 and changes nothing."""
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(4))
    c = (await create(api, account, list_id)).json
    await run_all(runner)
    receiver.answers = [(404, {}, b"no")] * 3 + [(200, {}, b"ok")]
    await deliver_all(worker)
    assert (await assert_exact(api, services, account, c["id"]))["counts"]["failed"] == 3
    failed = await recipients(api, account, c["id"], status="failed")
    gone = failed[0]["messageId"]
    sql(services, "DELETE FROM delivery_attempts WHERE outbox_id IN (SELECT id FROM outbox WHERE message_id = ?)", gone)
    sql(services, "DELETE FROM outbox WHERE message_id = ?", gone)
    r = await act(api, account, c["id"], "retry-failed")
    assert r.code == 200, r.body
    assert r.json["retry"] == {"requeued": 2, "notRetryable": 1}
    assert (r.json["counts"]["queued"], r.json["counts"]["failed"]) == (2, 1)
    await assert_exact(api, services, account, c["id"])
    assert await deliver_all(worker, later(utcnow(), 60)) == 2
    done = await assert_exact(api, services, account, c["id"])
    assert (done["counts"]["sent"], done["counts"]["failed"], done["counts"]["queued"]) == (3, 1, 0)
    assert [r["messageId"] for r in await recipients(api, account, c["id"], status="failed")] == [gone]

    await delivery_store.prune_finished(services.db, "9999-01-01T00:00:00.000Z", 100)  # retention, everything
    r = await act(api, account, c["id"], "retry-failed")
    assert r.code == 409 and "removed by retention" in r.json["error"]["message"], r.body
    assert (await assert_exact(api, services, account, c["id"]))["counts"]["failed"] == 1


async def test_cancel_of_a_large_campaign_runs_in_bounded_batches(api, services, account, receiver, runner, worker,
                                                                  monkeypatch):
    """(c) The request's write does one bounded batch and marks the campaign (pendingAction); the runner's
    background writes do the rest, a batch each, and the counts add up after every one. Meanwhile the
    delivery worker hands out none of the cancelled campaign's messages."""
    monkeypatch.setattr(campaign_actions, "BATCH", 4)
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(13))
    c = (await create(api, account, list_id, ratePerMinute=600)).json
    await runner.step()  # one token: one message
    runner.clock_state["now"] += 1
    await runner.step()  # a second's worth: 10 more; 2 recipients stay pending
    before = await assert_exact(api, services, account, c["id"])
    assert before["counts"]["queued"] > 4 and before["counts"]["pending"] > 0
    r = await act(api, account, c["id"], "cancel")
    assert r.code == 200 and r.json["status"] == "cancelled" and r.json["pendingAction"] == "cancel"
    assert r.json["counts"]["cancelled"] == 4  # one batch in the request
    await assert_exact(api, services, account, c["id"])
    assert await worker.run_due(later(utcnow(), 3600)) == 0  # nothing of it goes out meanwhile
    batches = 0
    while (await campaign(api, account, c["id"]))["pendingAction"]:
        await runner.finish_actions()
        batches += 1
        await assert_exact(api, services, account, c["id"])
    assert batches == 3  # 9 left: 4 + 4 + 1
    done = await assert_exact(api, services, account, c["id"])
    assert done["counts"]["cancelled"] == 13 and done["counts"]["queued"] == done["counts"]["pending"] == 0
    assert await worker.run_due(later(utcnow(), 3600)) == 0 and receiver.requests == []


async def test_retry_failed_of_a_large_campaign_runs_in_bounded_batches(api, services, account, receiver, runner,
                                                                        worker, monkeypatch):
    """(c) retry-failed likewise: a batch in the request, the rest by the runner, spaced at the campaign's
    rate across batches; every failure goes out again once, and the counts add up after every batch."""
    monkeypatch.setattr(campaign_actions, "BATCH", 3)
    await set_webhook(api, account, receiver.url)
    list_id, _ = await make_list(services, account, people(8))
    c = (await create(api, account, list_id, ratePerMinute=60)).json
    await run_all(runner)
    receiver.answers = [(404, {}, b"no")] * 8
    await deliver_all(worker, later(utcnow(), 3600))
    assert (await assert_exact(api, services, account, c["id"]))["counts"]["failed"] == 8
    r = await act(api, account, c["id"], "retry-failed")
    assert r.code == 200 and r.json["pendingAction"] == "retry" and r.json["retry"] == {"requeued": 8,
                                                                                         "notRetryable": 0}
    assert r.json["counts"]["queued"] == 3
    while (await campaign(api, account, c["id"]))["pendingAction"]:
        await runner.finish_actions()
        await assert_exact(api, services, account, c["id"])
    due = [row[0] for row in sql(services, "SELECT next_attempt_at FROM outbox WHERE campaign_id = ?"
                                           " AND status = 'pending' ORDER BY next_attempt_at", c["id"])]
    assert len(due) == 8 and len(set(due)) == 8  # one a second (60 a minute), not three at a time
    assert await deliver_all(worker, later(utcnow(), 3600)) == 8
    done = await assert_exact(api, services, account, c["id"])
    assert done["counts"]["sent"] == 8 and done["counts"]["failed"] == 0
