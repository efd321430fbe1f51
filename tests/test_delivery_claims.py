"""Webhook delivery shared by several processes (issue 20): a due row is claimed by one process at a time, and
taken over by another once the claim of a process that died lapses."""
import asyncio

from common.ids import iso, utcnow
from storage import delivery as store
from tests.delivery_helpers import delivery_state, later, queue_reply, set_reply_url


def _claims(cx, outbox_id):
    return tuple(cx.execute("SELECT claimed_by, claimed_until FROM outbox WHERE id = ?", (outbox_id,)).fetchone())


async def test_a_row_claimed_by_a_process_that_died_is_delivered_once_its_claim_lapses(services, account, receiver,
                                                                                       workers):
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    _, outbox, _ = await delivery_state(services, account, message_id)
    now = utcnow()
    # Another process claimed it for 60 s, then was killed before recording anything.
    assert await store.claim(services.db, [outbox["id"]], "dead", iso(now), iso(later(now, 60))) == [outbox["id"]]
    assert await store.claim(services.db, [outbox["id"]], "someone", iso(now), iso(later(now, 60))) == []
    worker = workers()
    assert await worker.run_due(later(now, 30)) == 0 and receiver.requests == []
    assert await worker.run_due(later(now, 61)) == 1
    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert message["status"] == "Sent" and len(attempts) == 1 and len(receiver.requests) == 1
    assert await services.db.read(_claims, outbox["id"]) == (None, None)  # the outcome ends the claim


async def test_two_processes_deliver_each_row_once(services, account, receiver, workers):
    await set_reply_url(services, account, receiver.url)
    for n in range(30):
        await queue_reply(services, account, body=f"reply {n}")
    first, second = workers(per_account=30, concurrency=30), workers(per_account=30, concurrency=30)
    second.owner = "another process"
    now = utcnow()
    done = await asyncio.gather(first.run_due(now), second.run_due(now))
    done += await asyncio.gather(first.run_due(now), second.run_due(now))
    ids = [request["headers"]["Webhook-Id"] for request in receiver.requests]
    assert sum(done) == 30 and len(ids) == 30 and len(set(ids)) == 30
