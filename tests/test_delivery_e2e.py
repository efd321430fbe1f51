"""Webhook delivery through the real server process (HTTPS, --allow-private-webhooks): a reply queued
while the receiver is down is delivered after the server restarts."""

from standardwebhooks import Webhook

from tests.delivery_helpers import ThreadedReceiver
from tests.parley_process import ParleyProcess, free_port
from tests.waiting import wait_until


def test_a_reply_queued_while_the_receiver_is_down_is_delivered_after_a_restart(tmp_path):
    """Spec §6: "the message status becomes Sent on success and Failed on error or unreachability";
    docs/design.md#api-decisions: "Outbox rows survive restarts", "a later success moves the message to Sent", "every
    attempt is recorded"."""
    data = tmp_path / "data"
    args = ("--allow-private-webhooks", "--webhook-timeout-seconds", "2")
    receiver_port = free_port()
    with ParleyProcess(data, *args, http=False) as parley, parley.client() as client:
        key = {"apiKey": parley.first_run["api_key"]}
        r = client.patch("/v1/account/settings", params=key,
                         json={"customChannelWebhookUrl": f"http://127.0.0.1:{receiver_port}/hook"})
        assert r.status_code == 200, r.text
        secret = client.get("/v1/account/webhook-secret", params=key).json()["secret"]
        r = client.post("/v1/send_custom_channel_message", params=key,
                        json={"customData": {"fromId": "user-7", "customChannel": "chat",
                                             "body": "Your order has shipped"}})
        assert r.status_code == 200, r.text
        message_id = r.json()["messageId"]

        # Nobody listens on the receiver's port: the first attempt fails and the error is stored.
        failed = wait_until(lambda: (m := client.get(f"/v1/messages/{message_id}", params=key).json())
                            ["status"] == "Failed" and m)
        assert failed["error"]["error"].startswith("connection error")
        assert [a["httpStatus"] for a in failed["attempts"]] == [None]

    with ThreadedReceiver(receiver_port) as receiver:
        with ParleyProcess(data, *args, http=False) as parley, parley.client() as client:
            wait_until(lambda: receiver.requests)
            sent = wait_until(lambda: (m := client.get(f"/v1/messages/{message_id}", params=key).json())
                              ["status"] == "Sent" and m)
    assert len(receiver.requests) == 1
    request = receiver.requests[0]
    payload = Webhook(secret).verify(request["body"], request["headers"])
    assert payload["messageId"] == message_id and payload["body"] == "Your order has shipped"
    assert payload["toId"] == "user-7" and payload["channel"] == "chat"
    assert set(payload) >= {"contactId", "messageId", "userId", "body", "toId", "channel"}
    assert sent["error"] is None
    assert [a["httpStatus"] for a in sent["attempts"]] == [None, 200]
