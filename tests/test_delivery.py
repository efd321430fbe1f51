"""The outbox worker against real local HTTP receivers: signing, Sent/Failed, retries, attempts, SSRF
at connect time, restarts, fairness. The worker's clock is driven by the tests (run_due(now))."""
import asyncio
import dataclasses
import socket
from datetime import datetime, timedelta, timezone

import pytest
from standardwebhooks import Webhook

import server
from services import accounts, netguard
from services.delivery import RETRY_SCHEDULE
from services.webhook_post import parse_retry_after
from services.netguard import CheckedResolver
from common.errors import Conflict, NotFound
from common.ids import iso, new_id, parse_iso, utcnow
from services.signing import sign
from storage import delivery as store
from storage.messages import get_message
from storage.outbox import enqueue_notification_in_tx, list_outbox
from tests.delivery_helpers import Receiver, delivery_state, later, queue_reply, secret_of, set_reply_url

# A 1 s attempt timeout keeps the timeout test short (the default is 15 s).
pytestmark = pytest.mark.settings(webhook_timeout_seconds=1.0)

SIX_FIELDS = {"contactId", "messageId", "userId", "body", "toId", "channel"}


def _execute(cx, sql):
    cx.execute(sql)


async def new_account(services):
    return await accounts.create_account(services.db, services.box, services.keys, name="Other",
                                         email=f"{new_id('x')}@example.com", with_user=False)


# ---- signing -----------------------------------------------------------------------------------

def test_signature_matches_the_standardwebhooks_reference():
    """docs/design.md#api-decisions: webhook-signature "v1,<base64 HMAC-SHA256 of id.timestamp.body>", secret whsec_…"""
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = '{"a":1}'
    reference = Webhook(secret).sign("msg_1", datetime.fromtimestamp(1700000000, tz=timezone.utc), body)
    assert sign([secret], "msg_1", 1700000000, body) == reference
    other = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"
    both = sign([other, secret], "msg_1", 1700000000, body)
    assert both.split(" ") == [sign([other], "msg_1", 1700000000, body), reference]


# ---- outcomes ----------------------------------------------------------------------------------

async def test_2xx_is_sent_with_the_six_fields_and_a_verifiable_signature(services, account, receiver, workers):
    """Spec §6: the service sends a JSON body with contactId, messageId, userId, body, toId, channel;
    "the message status becomes Sent on success"."""
    await set_reply_url(services, account, receiver.url)
    message_id, payload = await queue_reply(services, account)
    worker = workers()
    assert await worker.run_due(utcnow()) == 1

    assert len(receiver.requests) == 1
    request = receiver.requests[0]
    assert request["headers"]["Content-Type"] == "application/json"
    verified = Webhook(await secret_of(services, account)).verify(request["body"], request["headers"])
    assert set(verified) == SIX_FIELDS and verified == payload
    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert message["status"] == "Sent" and message["error"] is None
    assert outbox["status"] == "sent" and outbox["attempts"] == 1 and outbox["sent_at"]
    assert request["headers"]["Webhook-Id"] == outbox["webhook_id"]
    assert [(a["http_status"], a["error"], a["response_excerpt"]) for a in attempts] == [(200, None, "ok")]
    assert await worker.run_due(later(utcnow(), 86400)) == 0  # sent rows are never sent again


async def test_during_a_secret_rotation_both_secrets_sign(services, account, receiver, workers):
    """docs/design.md#api-decisions: secret whsec_…, "rotatable with an overlap during which both sign"."""
    old = await secret_of(services, account)
    new = (await accounts.rotate_webhook_secret(services.db, services.box, account["account_id"]))["secret"]
    await set_reply_url(services, account, receiver.url)
    await queue_reply(services, account)
    await workers().run_due(utcnow())
    request = receiver.requests[0]
    assert len(request["headers"]["Webhook-Signature"].split(" ")) == 2
    Webhook(old).verify(request["body"], request["headers"])
    Webhook(new).verify(request["body"], request["headers"])


async def test_500_is_failed_with_status_and_body_excerpt_stored_and_retried(services, account, receiver, workers):
    """Spec §3: "URL answers with an error ... Failed. Error details are stored with the message";
    docs/design.md#api-decisions: details are the HTTP status, the first 1 KB of the answer and the time; 5xx is retried."""
    receiver.answers = [(500, {}, b"x" * 3000)]
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    now = utcnow()
    await workers().run_due(now)

    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert message["status"] == "Failed"
    error = message["error"]
    assert error["httpStatus"] == 500 and error["error"].startswith("HTTP 500")
    assert error["response"] == "x" * 1024 and error["at"] == iso(now)
    assert outbox["status"] == "pending" and outbox["last_error"] == error
    assert error["nextAttemptAt"] == outbox["next_attempt_at"] > iso(later(now, 5))
    assert len(attempts) == 1 and attempts[0]["http_status"] == 500


async def test_fail_then_recover_is_sent_after_a_retry_with_the_same_webhook_id(services, account, receiver, workers):
    """docs/design.md#api-decisions: "webhook-id stays the same across retries, and a later success moves the message to
    Sent; every attempt is recorded"."""
    receiver.answers = [(503, {}, b"busy")]
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    worker = workers()
    now = utcnow()
    assert await worker.run_due(now) == 1
    assert await worker.run_due(later(now, 4)) == 0  # the first retry waits 5 s
    assert await worker.run_due(later(now, 10)) == 1

    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert message["status"] == "Sent" and message["error"] is None
    assert outbox["status"] == "sent" and outbox["attempts"] == 2
    assert [a["http_status"] for a in attempts] == [503, 200]
    ids = {r["headers"]["Webhook-Id"] for r in receiver.requests}
    assert len(receiver.requests) == 2 and ids == {outbox["webhook_id"]}
    secret = await secret_of(services, account)
    for request in receiver.requests:
        Webhook(secret).verify(request["body"], request["headers"])


async def test_302_is_failed_and_not_followed(services, account, receiver, workers):
    """docs/design.md#api-decisions: "3xx is a failure; redirects are not followed"."""
    receiver.answers = [(302, {"Location": f"http://127.0.0.1:{receiver.port}/elsewhere"}, b"moved")]
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    worker = workers()
    now = utcnow()
    await worker.run_due(now)

    assert [r["path"] for r in receiver.requests] == ["/hook"]
    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert message["status"] == "Failed" and message["error"]["httpStatus"] == 302
    assert "not followed" in message["error"]["error"] and message["error"]["response"] == "moved"
    assert outbox["status"] == "failed" and message["error"]["nextAttemptAt"] is None
    assert await worker.run_due(later(now, 86400)) == 0


async def test_other_4xx_is_final(services, account, receiver, workers):
    """docs/design.md#api-decisions: only 5xx/408/429/timeouts are retried; other 4xx are final."""
    receiver.answers = [(404, {}, b"no such hook")]
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    worker = workers()
    now = utcnow()
    await worker.run_due(now)
    assert await worker.run_due(later(now, 86400)) == 0
    message, outbox, _ = await delivery_state(services, account, message_id)
    assert message["status"] == "Failed" and message["error"]["httpStatus"] == 404
    assert outbox["status"] == "failed" and len(receiver.requests) == 1


async def test_timeout_is_failed_with_a_timeout_error_and_retried(services, account, receiver, workers):
    """docs/design.md#api-decisions: "Timeout per attempt" (a setting; 1 s here); timeouts are retried."""
    receiver.answers = ["hang"]
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    await workers().run_due(utcnow())
    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert message["status"] == "Failed"
    assert message["error"]["httpStatus"] is None and message["error"]["error"].startswith("timeout")
    assert outbox["status"] == "pending" and attempts[0]["error"].startswith("timeout")
    assert len(receiver.requests) == 1


async def test_closed_port_is_failed_with_the_connection_error(services, account, workers):
    """Spec §3: "URL ... is unreachable → Failed. The error details are stored with the message"."""
    closed = Receiver()  # a free port nobody listens on
    await set_reply_url(services, account, closed.url)
    message_id, _ = await queue_reply(services, account)
    await workers().run_due(utcnow())
    message, outbox, _ = await delivery_state(services, account, message_id)
    assert message["status"] == "Failed"
    assert message["error"]["error"].startswith("connection error") and message["error"]["httpStatus"] is None
    assert outbox["status"] == "pending"


async def test_retry_after_is_honoured(services, account, receiver, workers):
    """docs/design.md#api-decisions: retries on the schedule, "Retry-After honoured"."""
    receiver.answers = [(429, {"Retry-After": "120"}, b"slow down")]
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    worker = workers()
    now = utcnow()
    await worker.run_due(now)
    assert await worker.run_due(later(now, 30)) == 0  # the schedule alone would retry after 5 s
    assert await worker.run_due(later(now, 121)) == 1
    message, _, _ = await delivery_state(services, account, message_id)
    assert message["status"] == "Sent"


def test_retry_after_parsing():
    now = utcnow().replace(microsecond=0)
    assert parse_retry_after("30") == 30
    assert parse_retry_after(now.strftime("%a, %d %b %Y %H:%M:%S GMT"), later(now, -60)) == 60
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


async def test_the_retry_schedule_then_final(services, account, receiver, workers):
    """docs/design.md#api-decisions: retried "on the Standard Webhooks schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h)"
    with jitter; every attempt is recorded; after the last one the message stays Failed."""
    receiver.answers = [(500, {}, b"down")] * 20
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    worker = workers()
    now = utcnow()
    await worker.run_due(now)
    for delay in RETRY_SCHEDULE:
        _, outbox, _ = await delivery_state(services, account, message_id)
        due = outbox["next_attempt_at"]
        assert iso(later(now, delay)) <= due <= iso(later(now, delay * 1.1 + 2))
        assert await worker.run_due(later(now, delay * 0.99)) == 0
        now = later(now, delay * 1.1 + 2)
        assert await worker.run_due(now) == 1
    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert len(attempts) == len(RETRY_SCHEDULE) + 1 == len(receiver.requests) == 8
    assert outbox["status"] == "failed" and message["status"] == "Failed"
    assert message["error"]["nextAttemptAt"] is None
    assert await worker.run_due(later(now, 10 * 86400)) == 0


async def test_no_webhook_url_is_failed(services, account, workers):
    """Outbound with no Custom Channel Webhook URL at send time: Failed, "no webhook URL configured"
    (final; a manual retry sends it once a URL is saved)."""
    message_id, _ = await queue_reply(services, account)
    await workers().run_due(utcnow())
    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert message["status"] == "Failed" and message["error"]["error"] == "no webhook URL configured"
    assert outbox["status"] == "failed" and len(attempts) == 1


# ---- SSRF at delivery --------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_private_target_is_refused_at_connect_time(services, account, receiver, workers, host):
    """docs/design.md#api-decisions: private, loopback and link-local targets are refused "at connect time (resolve, then
    check the address) unless --allow-private-webhooks". The URL was stored earlier (bypassing the
    save-time check); no request reaches the receiver."""
    strict = dataclasses.replace(services, settings=services.settings.model_copy(
        update={"allow_private_webhooks": False}))
    await set_reply_url(services, account, f"https://{host}:{receiver.port}/hook")
    message_id, _ = await queue_reply(services, account)
    worker = workers(strict)
    now = utcnow()
    await worker.run_due(now)
    assert receiver.requests == []
    message, outbox, _ = await delivery_state(services, account, message_id)
    error = message["error"]["error"]
    assert message["status"] == "Failed" and f"{host} is not a public address" in error
    assert "--allow-private-webhooks" in error
    if host == "localhost":  # the error names the host, never what it resolved to (issue 26 §3)
        assert "127.0.0.1" not in error and "::1" not in error
    assert outbox["status"] == "failed"
    assert await worker.run_due(later(now, 86400)) == 0


async def test_plain_http_is_refused_at_delivery_without_allow_private(services, account, receiver, workers):
    """docs/design.md#api-decisions: webhook URLs must be https unless --allow-private-webhooks."""
    strict = dataclasses.replace(services, settings=services.settings.model_copy(
        update={"allow_private_webhooks": False}))
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    await workers(strict).run_due(utcnow())
    message, _, _ = await delivery_state(services, account, message_id)
    assert receiver.requests == [] and "https" in message["error"]["error"]


async def test_checked_resolver_returns_only_checked_addresses():
    """The HTTP client connects to the addresses netguard checked, not to a second lookup."""
    with pytest.raises(netguard.BlockedAddress):
        await CheckedResolver(allow_private=False).resolve("localhost", 443)
    with pytest.raises(netguard.BlockedAddress):
        await CheckedResolver(allow_private=False).resolve("10.1.2.3", 443)
    assert await CheckedResolver(allow_private=False).resolve("8.8.8.8", 443) == [(socket.AF_INET, ("8.8.8.8", 443))]
    allowed = await CheckedResolver(allow_private=True).resolve("127.0.0.1", 8080)
    assert allowed == [(socket.AF_INET, ("127.0.0.1", 8080))]


# ---- notifications -----------------------------------------------------------------------------

async def test_notifications_are_delivered_signed(services, account, receiver, workers):
    """docs/design.md#api-decisions Notifications: "same outbox, signing and retries. Body {event, id, occurredAt,
    accountId, data}"."""
    account_id = account["account_id"]
    await accounts.update_settings(services.db, account_id,
                                   {"notificationUrls": {"contact.created": receiver.url}})
    receiver.answers = [(500, {}, b"oops")]
    webhook_id = await services.db.write(enqueue_notification_in_tx, account_id, "contact.created",
                                         {"contactId": "ct_1"})
    worker = workers()
    now = utcnow()
    await worker.run_due(now)
    [queued] = await list_outbox(services.db, account_id, kind="notification")
    outbox = await store.get_outbox(services.db, account_id, queued["id"])
    assert outbox["webhook_id"] == webhook_id and outbox["last_error"]["httpStatus"] == 500
    await worker.run_due(later(now, 10))

    outbox = await store.get_outbox(services.db, account_id, outbox["id"])
    assert outbox["status"] == "sent" and outbox["last_error"] is None
    secret = await secret_of(services, account)
    bodies = [Webhook(secret).verify(r["body"], r["headers"]) for r in receiver.requests]
    assert len(bodies) == 2 and bodies[0] == bodies[1]
    assert set(bodies[1]) == {"event", "id", "occurredAt", "accountId", "data"}
    assert bodies[1]["event"] == "contact.created" and bodies[1]["id"] == webhook_id
    assert bodies[1]["accountId"] == account_id and bodies[1]["data"] == {"contactId": "ct_1"}
    assert {r["headers"]["Webhook-Id"] for r in receiver.requests} == {webhook_id}


# ---- manual retry ------------------------------------------------------------------------------

async def test_manual_retry_sends_a_final_failure_again(services, account, receiver, workers):
    """docs/design.md#api-decisions: "a manual retry exists in the UI"."""
    receiver.answers = [(410, {}, b"gone")]
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    worker = workers()
    await worker.run_due(utcnow())
    assert (await delivery_state(services, account, message_id))[1]["status"] == "failed"

    other = await new_account(services)
    with pytest.raises(NotFound):
        await worker.retry_now(other["account_id"], message_id)  # another account's message
    with pytest.raises(NotFound):
        await worker.retry_now(account["account_id"], "msg_unknown")
    assert (await worker.retry_now(account["account_id"], message_id))["status"] == "queued"
    assert await worker.run_due(utcnow()) == 1
    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert message["status"] == "Sent" and outbox["status"] == "sent" and len(attempts) == 2
    with pytest.raises(Conflict):
        await worker.retry_now(account["account_id"], message_id)


@pytest.mark.parametrize("late_answer", [(410, {}, b"gone"), (503, {}, b"busy")])
async def test_a_manual_retry_asked_during_an_attempt_is_kept(services, account, receiver, workers, late_answer):
    """A Retry asked while an attempt is in flight is not overwritten by that attempt's outcome: a Failed
    reply's scheduled retry is being attempted when the Retry comes; when that attempt fails (finally, 410,
    or with a retry scheduled 5 s later, 503) the row stays due at the time the Retry asked for, and the
    next step sends it."""
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    receiver.answers = [(503, {}, b"busy"), ("hang", *late_answer)]
    worker = workers(dataclasses.replace(services, settings=services.settings.model_copy(
        update={"webhook_timeout_seconds": 30.0})))
    assert await worker.run_due(utcnow()) == 1
    message, outbox, _ = await delivery_state(services, account, message_id)
    assert message["status"] == "Failed" and outbox["status"] == "pending"  # its retry is scheduled
    due = parse_iso(outbox["next_attempt_at"])
    attempt = asyncio.ensure_future(worker.run_due(due))
    await wait_for(lambda: _true(receiver.in_flight == 1))
    worker.clock = lambda: later(due, 1)
    assert (await worker.retry_now(account["account_id"], message_id))["status"] == "queued"
    receiver.release.set()
    assert await attempt == 1
    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert (outbox["status"], outbox["next_attempt_at"], len(attempts)) == ("pending", iso(later(due, 1)), 2)
    assert message["status"] == "Failed" and message["error"]["nextAttemptAt"] == iso(later(due, 1))
    assert await worker.run_due(later(due, 1)) == 1
    message, outbox, attempts = await delivery_state(services, account, message_id)
    assert message["status"] == "Sent" and outbox["status"] == "sent" and len(attempts) == 3


async def _true(value):
    return value


async def test_stop_without_grace_cancels_the_attempts_in_flight_at_once(services, account, receiver, workers):
    """stop(grace=0) cancels attempts in flight at once (it waited for them without a limit): the
    attempt cut short is not recorded, so the row is still due and is sent again after a restart."""
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    receiver.answers = ["hang"]
    worker = workers(dataclasses.replace(services, settings=services.settings.model_copy(
        update={"webhook_timeout_seconds": 30.0})))
    worker.start()
    await wait_for(lambda: _true(receiver.in_flight == 1))
    await asyncio.wait_for(worker.stop(grace=0), 10)  # the receiver would hold it for 30 s
    _, outbox, attempts = await delivery_state(services, account, message_id)
    assert outbox["status"] == "pending" and outbox["attempts"] == 0 and attempts == []


# ---- restarts, wake-ups, fairness --------------------------------------------------------------

async def test_pending_rows_survive_a_restart(settings, services, account, workers):
    """docs/design.md#api-decisions: "Outbox rows survive restarts". The receiver is down for the first attempt; the
    services are closed and opened again on the same data; the new worker delivers."""
    receiver = Receiver()  # not listening yet
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    now = utcnow()
    await workers().run_due(now)
    assert (await delivery_state(services, account, message_id))[0]["status"] == "Failed"
    await services.close()

    reopened = await server.open_services(settings)
    try:
        receiver.start()
        assert await workers(reopened).run_due(later(now, 10)) == 1
        message, outbox, attempts = await delivery_state(reopened, account, message_id)
        assert message["status"] == "Sent" and len(attempts) == 2 and len(receiver.requests) == 1
    finally:
        await receiver.close()
        await reopened.close()


async def wait_for(predicate, timeout=10.0):
    """Poll until predicate() is true; a deadline, not a timing assertion."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_notify_wakes_the_running_worker(services, account, receiver, workers):
    """Writers call services.delivery.notify() after their commit; the worker sends at once rather
    than at its next poll (60 s here, longer than the test's deadline)."""
    await set_reply_url(services, account, receiver.url)
    worker = workers(poll_seconds=60)
    worker.start()

    async def first_round_over():  # the loop found nothing and now waits (60 s) for a notify
        return worker.rounds_finished >= 1
    await wait_for(first_round_over)
    message_id, _ = await queue_reply(services, account)
    worker.notify()

    async def sent():
        return (await get_message(services.db, account["account_id"], message_id))["status"] == "Sent"
    await wait_for(sent)


async def test_a_slow_receiver_does_not_stall_other_accounts(services, workers):
    """docs/design.md#api-decisions / issue: bounded concurrency overall and per account, so one slow receiver cannot
    hold every slot. Account A's receiver hangs; account B's message is still delivered."""
    slow, fast = Receiver().start(), Receiver().start()
    patient = dataclasses.replace(services, settings=services.settings.model_copy(
        update={"webhook_timeout_seconds": 30.0}))
    a, b = await new_account(services), await new_account(services)
    await set_reply_url(services, a, slow.url)
    await set_reply_url(services, b, fast.url)
    slow.answers = ["hang"] * 5
    a_messages = [(await queue_reply(services, a))[0] for _ in range(5)]
    b_message, _ = await queue_reply(services, b)
    worker = workers(patient, concurrency=3, per_account=2)
    worker.start()
    try:
        async def b_sent():
            return (await get_message(services.db, b["account_id"], b_message))["status"] == "Sent"
        await wait_for(b_sent)
        assert slow.in_flight == 2  # the per-account bound, while B went through
        slow.release.set()

        async def all_a_sent():
            for message_id in a_messages:
                if (await get_message(services.db, a["account_id"], message_id))["status"] != "Sent":
                    return False
            return True
        await wait_for(all_a_sent)
        assert len(slow.requests) == 5
    finally:
        await worker.stop()
        await slow.close()
        await fast.close()


def _refuse_attempts_sql(dialect, outbox_id):
    """A real trigger, standing in for a full disk, that refuses the attempt records of one outbox row."""
    if dialect == "sqlite":
        return [f"CREATE TRIGGER refuse_attempts BEFORE INSERT ON delivery_attempts WHEN NEW.outbox_id = {outbox_id}"
                " BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END"], ["DROP TRIGGER refuse_attempts"]
    return ["CREATE FUNCTION refuse_attempts() RETURNS trigger LANGUAGE plpgsql AS"
            " 'BEGIN RAISE EXCEPTION ''disk full (test)''; END'",
            "CREATE TRIGGER refuse_attempts BEFORE INSERT ON delivery_attempts FOR EACH ROW"
            f" WHEN (NEW.outbox_id = {outbox_id}) EXECUTE FUNCTION refuse_attempts()"], \
        ["DROP TRIGGER refuse_attempts ON delivery_attempts", "DROP FUNCTION refuse_attempts()"]


async def test_an_attempt_whose_outcome_cannot_be_written_is_held_back(services, account, receiver, workers):
    """When the database refuses the attempt's record (here a real trigger standing in for a full disk), the row
    is still due; it is not re-sent at every poll but held for 30 s, then delivered. The other outcomes recorded
    in the same transaction are kept (each in its own SAVEPOINT; on PostgreSQL the refused INSERT travels with
    the next statement, and its error rolls back that outcome alone)."""
    await set_reply_url(services, account, receiver.url)
    message_id, _ = await queue_reply(services, account)
    other_id, _ = await queue_reply(services, account)
    dialect = "postgresql" if services.settings.uses_postgres else "sqlite"
    refuse, allow = _refuse_attempts_sql(dialect, (await delivery_state(services, account, message_id))[1]["id"])
    for sql in refuse:
        await services.db.write(_execute, sql)
    worker = workers()
    now = utcnow()
    assert await worker.run_due(now) == 2
    assert len(receiver.requests) == 2
    assert (await get_message(services.db, account["account_id"], message_id))["status"] == "Pending"
    assert (await get_message(services.db, account["account_id"], other_id))["status"] == "Sent"
    assert len((await delivery_state(services, account, other_id))[2]) == 1
    assert await worker.run_due(later(now, 5)) == 0
    for sql in allow:
        await services.db.write(_execute, sql)
    assert await worker.run_due(later(now, 31)) == 1
    message, _, attempts = await delivery_state(services, account, message_id)
    assert message["status"] == "Sent" and len(attempts) == 1 and len(receiver.requests) == 3
    webhook_ids = {(await delivery_state(services, account, m))[1]["webhook_id"] for m in (message_id, other_id)}
    assert {r["headers"]["Webhook-Id"] for r in receiver.requests} == webhook_ids


async def test_a_message_sent_through_the_api_is_delivered_with_the_six_fields(api, services, account, receiver,
                                                                              workers):
    """Spec §4.5 + §6: POST /send_custom_channel_message; the receiver gets contactId, messageId, userId,
    body, toId ("equals the fromId"), channel; "the message status becomes Sent on success"."""
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": receiver.url}, key=key)
    assert r.code == 200, r.body
    r = await api.post("/v1/send_custom_channel_message",
                       {"customData": {"fromId": "user-9", "customChannel": "acme-chat", "body": "Hi there"}},
                       key=key)
    assert r.code == 200, r.body
    message_id, contact_id = r.json["messageId"], r.json["contactId"]
    assert await workers().run_due(utcnow()) == 1

    request = receiver.requests[0]
    payload = Webhook(await secret_of(services, account)).verify(request["body"], request["headers"])
    assert set(payload) >= SIX_FIELDS
    assert payload["messageId"] == message_id and payload["contactId"] == contact_id
    assert payload["body"] == "Hi there" and payload["toId"] == "user-9" and payload["channel"] == "acme-chat"
    r = await api.get(f"/v1/messages/{message_id}", key=key)
    assert r.json["status"] == "Sent" and [a["httpStatus"] for a in r.json["attempts"]] == [200]


@pytest.mark.sqlite_only("EXPLAIN QUERY PLAN is SQLite's planner")
async def test_picking_due_rows_is_a_seek_per_account_not_a_scan_of_the_backlog(services, account):
    """A bot answering a burst of messages leaves a backlog of replies; picking the next due rows must not
    read all of it each time (bench/README.md, the rule bot: the ranked scan took a third of the server's
    time). The pick stays fair: at most per_account rows per account, oldest first, in both lanes."""
    from tests.db_direct import query_plans
    other = await new_account(services)
    backlog = [(await queue_reply(services, account))[0] for _ in range(30)]
    await queue_reply(services, other)
    now = iso(utcnow() + timedelta(seconds=1))
    rows = await store.due_rows(services.db, now, per_account=4, limit=10)
    assert [r["message_id"] for r in rows if r["account_id"] == account["account_id"]] == backlog[:4]
    assert sum(r["account_id"] == other["account_id"] for r in rows) == 1
    plans = query_plans(services.db.path, lambda cx: store.due_rows.sync(cx, now, per_account=4, limit=10))
    details = [d for plan in plans.values() for d in plan]
    assert details and not [d for d in details if d.startswith("SCAN outbox")], plans
    assert any("outbox_direct_by_account" in d for d in details)
    assert any("outbox_campaign_due" in d for d in details)
