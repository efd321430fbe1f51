"""Send test event (issue 26 §3): POST /v1/account/webhook-test posts a signed {"event": "ping", …} to the
Custom Channel Webhook URL now, outside the outbox, through the deliveries' guard, signing and timeout."""
import asyncio
import dataclasses
import json
from datetime import timedelta

import pytest
from standardwebhooks import Webhook

from common.errors import RateLimited
from common.ids import iso, utcnow
from services import accounts, webhook_ping
from storage import webhook_tests as slot_store
from storage.outbox import list_outbox
from tests.delivery_helpers import queue_reply
from tests.waiting import until

TEST = "/v1/account/webhook-test"


# --webhook-timeout-seconds 1: the ping keeps the deliveries' timeout (the default is 15 s).
pytestmark = pytest.mark.settings(webhook_timeout_seconds=1.0)


async def _save_url(api, account, url):
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": url}, key=account["api_key"])
    assert r.code == 200, r.body


async def test_the_ping_reaches_a_real_receiver_signed_and_verifiable(api, services, account, receiver):
    await _save_url(api, account, receiver.url)
    secret = (await api.get("/v1/account/webhook-secret", key=account["api_key"])).json["secret"]
    r = await api.post(TEST, key=account["api_key"])
    assert r.code == 200, r.body
    assert r.json["httpStatus"] == 200 and r.json["responseBody"] == "ok" and r.json["error"] is None
    assert isinstance(r.json["durationMs"], int) and r.json["durationMs"] >= 0
    [request] = receiver.requests
    headers = {name.lower(): value for name, value in request["headers"].items()}
    ping = Webhook(secret).verify(request["body"], headers)  # raises WebhookVerificationError when wrong
    assert ping["event"] == "ping" and ping["accountId"] == account["account_id"]
    assert ping["id"] == headers["webhook-id"]
    assert await list_outbox(services.db, account["account_id"]) == []  # outside the outbox


async def test_a_failing_receiver_is_reported_with_its_status_and_the_first_kilobyte(api, account, receiver):
    await _save_url(api, account, receiver.url)
    receiver.answers.append((500, {}, b"x" * 3000))
    r = await api.post(TEST, key=account["api_key"])
    assert r.code == 200, r.body
    assert r.json["httpStatus"] == 500 and r.json["error"] == "HTTP 500 Internal Server Error"
    assert r.json["responseBody"] == "x" * 1024


async def test_the_ping_keeps_the_delivery_timeout(api, account, receiver):
    await _save_url(api, account, receiver.url)
    receiver.answers.append("hang")
    r = await api.post(TEST, key=account["api_key"])
    assert r.code == 200 and r.json["error"] == "timeout: no answer within 1 s" and r.json["httpStatus"] is None


async def test_no_url_is_409_and_another_accounts_key_sends_nothing(api, account, other_account, receiver):
    """Tenancy: the ping goes to the calling account's URL only."""
    r = await api.post(TEST, key=account["api_key"])
    assert r.code == 409 and r.json["error"]["code"] == "CONFLICT"
    assert "customChannelWebhookUrl is not set" in r.json["error"]["message"]
    await _save_url(api, other_account, receiver.url)
    assert (await api.post(TEST, key=account["api_key"])).code == 409
    assert receiver.requests == []


async def test_a_refused_connection_names_no_address(api, account, receiver):
    await receiver.close()  # nothing listens on its port now
    await _save_url(api, account, f"http://localhost:{receiver.port}/hook")
    r = await api.post(TEST, key=account["api_key"])
    assert r.code == 200, r.body
    # The OSError's own text is "Connect call failed ('127.0.0.1', port)": not passed on.
    assert r.json["httpStatus"] is None
    assert r.json["error"] == "connection error: ConnectionRefusedError: Connection refused"


async def test_the_ping_goes_through_the_ssrf_guard_at_connect_time(services, account, receiver):
    """A private URL stored earlier (or by a server that allowed it) is refused when the ping connects,
    without --allow-private-webhooks, like a delivery; the answer names the host, not its address."""
    # 10 s: the guard resolves the host within the request's time, and 1 s ran out on a loaded CI machine.
    strict = dataclasses.replace(services, settings=services.settings.model_copy(
        update={"allow_private_webhooks": False, "webhook_timeout_seconds": 10.0}))
    await accounts.update_settings(services.db, account["account_id"],
                                   {"customChannelWebhookUrl": f"https://localhost:{receiver.port}/hook"})
    result = await webhook_ping.send_test_event(strict, account["account_id"])
    assert result["httpStatus"] is None and receiver.requests == []
    assert result["error"] == ("webhook URL refused: localhost is not a public address. "
                               "For local testing start Parley with --allow-private-webhooks.")
    assert "127.0.0.1" not in json.dumps(result)


async def test_a_tls_failure_says_what_failed(api, account, tmp_path):
    """An https receiver whose certificate nobody signed: the answer says the verification failed."""
    import ssl

    import tornado.httpserver
    import tornado.testing
    import tornado.web

    from services.tls import write_self_signed

    write_self_signed(tmp_path / "cert.pem", tmp_path / "key.pem", ["localhost"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = tornado.httpserver.HTTPServer(tornado.web.Application([]), ssl_options=context)
    sock, port = tornado.testing.bind_unused_port()
    server.add_sockets([sock])
    try:
        await _save_url(api, account, f"https://localhost:{port}/hook")
        r = await api.post(TEST, key=account["api_key"])
    finally:
        server.stop()
        await server.close_all_connections()
    assert r.json["httpStatus"] is None
    assert r.json["error"].startswith("connection error: TLS: ") and "certificate" in r.json["error"], r.json
    assert "127.0.0.1" not in r.json["error"]


@pytest.fixture
def patient(services):
    """The services with a 30 s timeout: tests hang at the receiver until released."""
    return dataclasses.replace(services, settings=services.settings.model_copy(
        update={"webhook_timeout_seconds": 30.0, "delivery_concurrency_per_account": 3}))


async def test_tests_in_flight_are_capped_per_account_with_the_deliveries(patient, api, account, other_account,
                                                                          receiver, workers):
    """Issue 36 item 8: 200 parallel tests held 200 sockets. At most delivery_concurrency_per_account at once,
    a delivery in flight counting as one, each test beyond that answered RateLimited with Retry-After; another
    account's tests are not counted against this one."""
    receiver.answers = ["hang"] * 10
    for owner in (account, other_account):
        await accounts.update_settings(patient.db, owner["account_id"], {"customChannelWebhookUrl": receiver.url})
    await queue_reply(patient, account)
    delivery = asyncio.ensure_future(workers(patient).run_due(utcnow()))  # one delivery in flight
    assert await until(lambda: receiver.in_flight == 1)
    tests = [asyncio.ensure_future(webhook_ping.send_test_event(patient, account["account_id"])) for _ in range(6)]
    assert await until(lambda: receiver.in_flight == 3 and sum(t.done() for t in tests) == 4)
    refused = [t.exception() for t in tests if t.done()]
    assert all(isinstance(e, RateLimited) and int(e.headers["Retry-After"]) >= 1 for e in refused), refused
    other = asyncio.ensure_future(webhook_ping.send_test_event(patient, other_account["account_id"]))
    assert await until(lambda: receiver.in_flight == 4)  # another account's slots are its own
    receiver.release.set()
    await asyncio.gather(delivery, other, *[t for t in tests if not t.done()])
    result = await webhook_ping.send_test_event(patient, account["account_id"])  # the slots were given back
    assert result["httpStatus"] == 200


async def test_a_test_beyond_the_cap_is_429_in_the_error_shape(api, services, account):
    """Every slot taken (a process's tests, or one that died: its slots lapse after the timeout): the API
    answers 429 RATE_LIMITED with Retry-After."""
    await _save_url(api, account, "http://127.0.0.1:9/hook")
    now = utcnow()
    for n in range(services.settings.delivery_concurrency_per_account):
        assert await slot_store.take_slot(services.db, account["account_id"], f"wht_{n}", iso(now),
                                          iso(now + timedelta(seconds=60)), 99)
    r = await api.post(TEST, key=account["api_key"])
    assert r.code == 429 and r.json["error"]["code"] == "RATE_LIMITED", r.body
    assert int(r.headers["Retry-After"]) >= 1
    later = now + timedelta(seconds=61)  # the slots lapsed: a test takes one again
    assert await slot_store.take_slot(services.db, account["account_id"], "wht_after", iso(later), iso(later), 1)


async def test_the_ping_honours_the_tls_profile(services, account, tmp_path):
    """Issue 36 item 8: under --tls-profile modern the ping negotiated TLS 1.2 (it used Python's defaults, not
    the deliveries' context). A receiver that speaks TLS 1.2 at most is refused at the handshake."""
    import ssl

    import tornado.httpserver
    import tornado.testing
    import tornado.web

    from services.tls import write_self_signed

    write_self_signed(tmp_path / "cert.pem", tmp_path / "key.pem", ["localhost"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = tornado.httpserver.HTTPServer(tornado.web.Application([]), ssl_options=context)
    sock, port = tornado.testing.bind_unused_port()
    server.add_sockets([sock])
    modern = dataclasses.replace(services, settings=services.settings.model_copy(  # 10 s: as the SSRF test above
        update={"tls_profile": "modern", "webhook_timeout_seconds": 10.0}))
    try:
        await accounts.update_settings(services.db, account["account_id"],
                                       {"customChannelWebhookUrl": f"https://localhost:{port}/hook"})
        result = await webhook_ping.send_test_event(modern, account["account_id"])
    finally:
        server.stop()
        await server.close_all_connections()
    assert result["httpStatus"] is None and result["error"].startswith("connection error: TLS: ")
    assert "certificate" not in result["error"], result  # refused for its version, before any certificate
