"""Campaigns through the real server process over HTTPS (tests/parley_process.py) with a real local
receiver (issue 13): 50 contacts → 50 signed, personalised deliveries with the campaignId, one each; an
opted-out contact skipped and counted; ratePerMinute holding over the run; a receiver that fails some
requests and exact sent/failed counts with retries; cancel mid-run; kill -9 mid-campaign and a restart."""
import signal
from collections import Counter
import time

from standardwebhooks import Webhook

from tests import db_direct
from tests.parley_process import ParleyProcess
from tests.delivery_helpers import ThreadedReceiver as Receiver
from tests.waiting import wait_until

ARGS = ("--allow-private-webhooks", "--rate-limit", "1000000", "--webhook-timeout-seconds", "5")


def setup_account(client, key, receiver, n, opted_out=()):
    """Webhook URL, a list of n contacts (Ann0 …), and opt-outs (by index) through a STOP message."""
    assert client.patch("/v1/account/settings", params=key, json={"customChannelWebhookUrl": receiver.url}).status_code == 200
    list_id = client.post("/v1/lists", params=key, json={"name": "Leads"}).json()["id"]
    contacts = []
    for i in range(n):
        r = client.post("/v1/contacts", params=key, json={"firstName": f"Ann{i}", "phone": f"+1415555{i:04d}"})
        assert r.status_code == 201, r.text
        contacts.append(r.json())
        assert client.post(f"/v1/lists/{list_id}/contacts", params=key, json={"contactId": r.json()["id"]}).status_code == 200
    for i in opted_out:
        r = client.post("/v1/incoming_custom_channel_message", params=key, json={"customData": {
            "messageSid": f"stop-{i}", "fromId": contacts[i]["phone"], "toId": "shop", "body": "STOP"}})
        assert r.status_code == 200
    return list_id, contacts


def counts(client, key, campaign_id):
    return client.get(f"/v1/campaigns/{campaign_id}", params=key).json()


def test_fifty_contacts_get_one_signed_personalised_message_each_at_the_rate(tmp_path):
    """Issue 13: a list of 50 contacts → 50 deliveries, each contact once, personalised body, campaignId in
    each payload (signatures verified with standardwebhooks); an opted-out contact is skipped and counted;
    ratePerMinute holds over the run: by time t after the POST at most 1 + t × rate / 60 messages can exist,
    so the k-th arrival (from 0) comes at least k × 60 / rate seconds after the POST, however slow the run."""
    rate = 600
    with Receiver() as receiver, ParleyProcess(tmp_path / "data", *ARGS, http=False) as parley, \
            parley.client() as client:
        key = {"apiKey": parley.first_run["api_key"]}
        secret = client.get("/v1/account/webhook-secret", params=key).json()["secret"]
        list_id, contacts = setup_account(client, key, receiver, 51, opted_out=[7])
        posted = time.monotonic()
        r = client.post("/v1/campaigns", params=key, json={
            "name": "Spring", "listId": list_id, "body": "Hi {{firstName}}, spring is here", "campaignId": "spring",
            "ratePerMinute": rate})
        assert r.status_code == 201, r.text
        campaign_id = r.json()["id"]
        done = wait_until(lambda: (c := counts(client, key, campaign_id))["counts"]["sent"] == 50 and c, timeout=60)
        assert done["status"] == "completed"
        assert done["counts"] == {"total": 51, "pending": 0, "queued": 0, "sent": 50, "failed": 0, "retrying": 0, "skipped": 1,
                                  "cancelled": 0}
        skipped = client.get(f"/v1/campaigns/{campaign_id}/recipients", params={**key, "status": "skipped"}).json()
        assert [s["contactId"] for s in skipped["data"]] == [contacts[7]["id"]]

    payloads = [Webhook(secret).verify(r["body"], r["headers"]) for r in receiver.requests]
    expected = {c["id"]: f"Hi {c['firstName']}, spring is here" for i, c in enumerate(contacts) if i != 7}
    assert len(payloads) == 50 and {p["contactId"]: p["body"] for p in payloads} == expected
    assert {p["campaignId"] for p in payloads} == {"spring"}
    assert all(p["toId"] is None and p["contact"]["phone"] for p in payloads)  # never wrote: reached by phone
    arrivals = sorted(r["at"] - posted for r in receiver.requests)
    for k, at in enumerate(arrivals):
        assert at >= k * 60 / rate - 0.001, f"message {k} arrived {at:.3f} s after the POST, before its turn"


def test_a_receiver_failing_some_requests_ends_with_exact_counts_and_retries(tmp_path):
    """docs/design.md#api-decisions retries (5xx retried after 5 s, other 4xx final); the campaign's counts end exact and every
    recipient's status and error says what happened."""
    def answer(payload, earlier):
        n = int(payload["contact"]["firstName"][3:])  # Ann<n>
        if n % 5 == 0:
            return 503 if earlier == 0 else 200  # fails once, then the retry succeeds
        return 404 if n % 7 == 3 else 200         # final
    with Receiver(answer=answer) as receiver, ParleyProcess(tmp_path / "data", *ARGS, http=False) as parley, \
            parley.client() as client:
        key = {"apiKey": parley.first_run["api_key"]}
        list_id, contacts = setup_account(client, key, receiver, 20)
        r = client.post("/v1/campaigns", params=key, json={
            "name": "Flaky", "listId": list_id, "body": "Hello {{firstName}}", "ratePerMinute": 6000})
        campaign_id = r.json()["id"]
        for c in contacts:
            c["n"] = int(c["firstName"][3:])
        finals = {c["id"] for c in contacts if c["n"] % 5 != 0 and c["n"] % 7 == 3}
        retried = {c["id"] for c in contacts if c["n"] % 5 == 0}
        done = wait_until(lambda: (c := counts(client, key, campaign_id))["counts"]["sent"] == 20 - len(finals)
                          and c["counts"]["queued"] == 0 and c, timeout=60)
        assert done["counts"]["failed"] == len(finals) and done["status"] == "completed"
        failed = client.get(f"/v1/campaigns/{campaign_id}/recipients", params={**key, "status": "failed"}).json()["data"]
        assert {f["contactId"] for f in failed} == finals
        assert all(f["error"]["httpStatus"] == 404 and f["error"]["nextAttemptAt"] is None for f in failed)
    by_contact = {}
    for p in receiver.payloads():
        by_contact.setdefault(p["contactId"], []).append(p["messageId"])
    assert {c for c, ids in by_contact.items() if len(ids) == 2} == retried
    assert all(len(set(ids)) == 1 for ids in by_contact.values()) and len(by_contact) == 20


def test_cancel_mid_run_stops_new_sends(tmp_path):
    """docs/design.md#api-decisions: cancel — queued messages are dropped, sent ones stay. After the cancel is answered at most
    the attempts already in flight (3 campaign slots per account) still arrive."""
    with Receiver() as receiver, ParleyProcess(tmp_path / "data", *ARGS, http=False) as parley, \
            parley.client() as client:
        key = {"apiKey": parley.first_run["api_key"]}
        list_id, _ = setup_account(client, key, receiver, 50)
        campaign_id = client.post("/v1/campaigns", params=key, json={
            "name": "Stop me", "listId": list_id, "body": "Hello {{firstName}}", "ratePerMinute": 300}).json()["id"]
        wait_until(lambda: len(receiver.requests) >= 5)
        r = client.post(f"/v1/campaigns/{campaign_id}/cancel", params=key)
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        at_cancel = len(receiver.requests)
        # Settled: no recipient is left pending, queued or retrying (the attempts in flight were recorded).
        final = wait_until(lambda: (c := counts(client, key, campaign_id))["counts"]["pending"] == 0
                           and c["counts"]["queued"] == 0 and c["counts"]["retrying"] == 0 and c, timeout=30)
        late = len(receiver.requests) - at_cancel
    # The server has stopped: what it recorded is all it ever sent, and nothing was left for it to send.
    outbox = Counter(r["status"] for r in db_direct.rows(parley, "SELECT status FROM outbox WHERE kind = 'reply'"))
    assert late <= 3
    assert outbox["pending"] == 0 and outbox["sent"] == final["counts"]["sent"]
    assert final["counts"]["sent"] == len({p["messageId"] for p in receiver.payloads()})
    assert final["counts"]["sent"] + final["counts"]["cancelled"] == 50 and final["counts"]["cancelled"] >= 35


def test_kill_9_mid_campaign_then_restart_every_contact_gets_exactly_one_message_id(tmp_path):
    """Issue 13: kill -9 of the server mid-campaign, then a restart → every contact received exactly one
    message id (a delivery cut short may be repeated, with the same messageId and webhook-id)."""
    data = tmp_path / "data"
    with Receiver() as receiver:
        parley = ParleyProcess(data, *ARGS, http=False).start()
        key = {"apiKey": parley.first_run["api_key"]}
        try:
            with parley.client() as client:
                list_id, contacts = setup_account(client, key, receiver, 50)
                campaign_id = client.post("/v1/campaigns", params=key, json={
                    "name": "Crash", "listId": list_id, "body": "Hi {{firstName}}", "ratePerMinute": 600}).json()["id"]
                wait_until(lambda: len(receiver.requests) >= 15)
        finally:
            parley.stop(signal.SIGKILL)
        assert len(receiver.requests) < 50
        with ParleyProcess(data, *ARGS, http=False) as again, again.client() as client:
            done = wait_until(lambda: (c := counts(client, key, campaign_id))["counts"]["sent"] == 50 and c, timeout=60)
            assert done["status"] == "completed" and done["counts"]["total"] == 50
    by_contact = {}
    for p in receiver.payloads():
        by_contact.setdefault(p["contactId"], set()).add(p["messageId"])
    assert sorted(by_contact) == sorted(c["id"] for c in contacts)
    assert all(len(ids) == 1 for ids in by_contact.values()), {c: ids for c, ids in by_contact.items() if len(ids) > 1}
