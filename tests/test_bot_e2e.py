"""The bot through the real server.py over HTTPS (issue 10 "What it must show"): replies reach a real local
receiver, verified with standardwebhooks; a real local HTTP server speaking chat-completions is the AI
provider. One server for the module; each test has its own account and its own receiver path."""
import http.server
import json
import threading

import pytest

from tests.bot_helpers import FALLBACK, Account, receiver  # noqa: F401 (receiver: a fixture)
from tests.parley_process import ParleyProcess, create_agency_with_subaccount, free_port, run_cli
from tests.waiting import wait_until

RULES = [{"keywords": ["price", "cost"], "answer": "Plans start at $10."}]
_accounts = iter(range(1, 1000))


class ThreadedProvider:
    """A chat-completions server in a thread. The request's model picks the behaviour: "echo" answers
    "You said: <last message>", "fail" answers 500, "slow" answers after 3 s (beyond a 1 s timeout),
    "blocked" waits until the test sets `unblock`."""

    def __init__(self):
        self.requests = []
        self.unblock = threading.Event()
        self.blocked = threading.Event()  # set once a "blocked" request has arrived
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                provider.requests.append(body)
                model = body["model"]
                if model == "fail":
                    return self._send(500, {"error": {"message": "the model crashed"}})
                if model == "slow":
                    provider.unblock.wait(3)
                if model == "blocked":
                    provider.blocked.set()
                    provider.unblock.wait(30)
                reply = "You said: " + body["messages"][-1]["content"]
                self._send(200, {"choices": [{"index": 0, "message": {
                    "role": "assistant", "content": json.dumps({"reply": reply, "handoff": False})}}]})

            def _send(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass  # Parley gave up waiting (its timeout)

            def log_message(self, *args):
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self):
        self.unblock.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def provider():
    p = ThreadedProvider()
    yield p
    p.close()


@pytest.fixture(scope="module")
def parley(tmp_path_factory):
    data = tmp_path_factory.mktemp("bot") / "data"
    with ParleyProcess(data, "--allow-private-webhooks", "--bot-history-messages", "3", http=False) as process:
        yield process


@pytest.fixture
def account(parley, receiver):
    n = next(_accounts)
    created = run_cli(parley.data_dir, "create-account", "--name", f"Shop {n}", "--email", f"shop{n}@example.com")
    acc = Account(parley, receiver, created)
    yield acc
    acc.client.close()


def test_a_rule_answers_a_matching_question_and_the_receiver_gets_the_signed_reply(account):
    """Spec §4.4: the service "has the bot answer when it is active"; §6: a reply "written by the bot" is
    POSTed to the Custom Channel Webhook; docs/design.md#api-decisions: signed per Standard Webhooks."""
    account.configure({"active": True, "rules": RULES})
    asked = account.say("How much does it cost?", from_id="+14155552671")
    payload = account.reply_to(asked)
    inbound = account.client.get(f"/v1/messages/{asked}").json()
    assert payload["body"] == "Plans start at $10." and payload["toId"] == "+14155552671"
    assert payload["channel"] == "webchat" and payload["contactId"] == inbound["contactId"]
    assert set(payload) >= {"contactId", "messageId", "userId", "body", "toId", "channel"}
    assert "campaignId" not in payload
    assert inbound["bot"] == {"outcome": "rule", "detail": 'keyword "cost" of rules[0]',
                              "replyId": payload["messageId"]}
    reply = wait_until(lambda: (m := account.client.get(f"/v1/messages/{payload['messageId']}").json())
                       ["status"] == "Sent" and m)
    assert reply["author"] == "bot" and reply["direction"] == "outbound"


def test_a_message_with_a_campaign_id_uses_that_campaigns_rules(account):
    """Spec §4.4: customData.campaignId "Routes the message to a specific bot configuration"."""
    account.configure({"active": True, "rules": RULES, "campaigns": {
        "spring-sale": {"rules": [{"keywords": ["price"], "answer": "Spring price: $5."}]}}})
    spring = account.reply_to(account.say("price?", campaignId="spring-sale"))
    plain = account.reply_to(account.say("price?"))
    assert (spring["body"], spring["campaignId"]) == ("Spring price: $5.", "spring-sale")
    assert plain["body"] == "Plans start at $10." and "campaignId" not in plain


def test_an_inactive_bot_a_reaction_and_a_repeated_message_sid_are_not_answered(account):
    """Spec §4.4: messageSid is "Used to prevent a message being processed twice"; docs/design.md#api-decisions: a reaction
    "is stored and never answered by the bot"; the bot answers "when it is active"."""
    account.configure({"active": False, "rules": RULES})
    inactive = account.say("price?")
    account.configure({"active": True})
    reaction = account.say("price", messageType="reaction")
    answered = account.say("price?", sid="once")
    assert account.say("price?", sid="once") == answered  # the same message again (another body is a 409)
    sentinel = account.say("what does it cost?")
    account.reply_to(answered)
    account.reply_to(sentinel)
    for message_id in (inactive, reaction):
        assert account.client.get(f"/v1/messages/{message_id}").json()["bot"] is None
    assert len(account.replies()) == 2


def test_a_handoff_keyword_and_a_human_reply_pause_the_bot(account):
    """Issue 10: "A handoff keyword pauses the bot for that contact"; "a reply sent by a person (API send
    now, the inbox later) pauses the bot for that contact for pauseMinutesAfterHumanReply"."""
    account.configure({"active": True, "rules": RULES, "handoffKeywords": ["human", "agent"],
                       "pauseMinutesAfterHumanReply": 30})
    handoff = account.outcome(account.say("Can I talk to a human?", from_id="alice"))
    assert handoff["outcome"] == "handoff" and handoff["replyId"] is not None  # bot.handoffMessage, issue 25 §3
    paused = account.outcome(account.say("What is the price?", from_id="alice"))
    assert paused["outcome"] == "paused" and "(handoff)" in paused["detail"]

    account.reply_to(account.say("price?", from_id="bob"))
    r = account.client.post("/v1/send_custom_channel_message", json={"customData": {
        "fromId": "bob", "customChannel": "webchat", "body": "Hi Bob, Sam here."}})
    assert r.status_code == 200, r.text
    paused = account.outcome(account.say("And the price?", from_id="bob"))
    assert paused["outcome"] == "paused" and "(human_reply)" in paused["detail"]
    wait_until(lambda: len(account.replies()) == 3)  # the handoff message, the bot's answer, the person's reply
    assert sorted(p["body"] for p in account.replies()) == ["Hi Bob, Sam here.", "Plans start at $10.",
                                                            "Thanks! A person will answer here soon."]


def test_a_sub_account_at_zero_credits_gets_no_reply_and_the_reason_is_readable(parley, receiver):
    """docs/design.md#api-decisions "Credits": "at zero the bot stays silent and the inbox says why"; issue 10: "the reason is
    readable through the API"."""
    _, sub = create_agency_with_subaccount(parley.data_dir, "agency-zero@example.com", "client-zero@example.com")
    account = Account(parley, receiver, sub)
    try:
        account.configure({"active": True, "rules": RULES, "fallback": FALLBACK})
        assert account.client.get("/v1/account").json()["credits"] == 0
        silent = account.outcome(account.say("price?"))
        assert silent == {"outcome": "no_credits", "replyId": None,
                          "detail": 'the balance of 0 credits is below creditsPerReply 1 (rule: keyword "price" of '
                                    'rules[0])'}
        dry = account.client.post("/v1/bot/test", json={"body": "price?"}).json()
        assert (dry["reply"], dry["reason"]) == (None, "no_credits")
        assert account.replies() == []
    finally:
        account.client.close()


# ---- the AI provider -------------------------------------------------------------------------

def test_the_providers_answer_is_delivered_with_a_bounded_history(account, provider):
    """Issue 10: "its answer is delivered; the conversation history it receives is bounded" (the server runs
    with --bot-history-messages 3)."""
    account.configure({"active": True, "provider": {"baseUrl": provider.base_url, "model": "echo",
                                                    "systemPrompt": "You sell bikes."}})
    for text in ("first", "second", "third"):
        account.reply_to(account.say(text, from_id="carol"))
    payload = account.reply_to(account.say("fourth", from_id="carol"))
    assert payload["body"] == "You said: fourth"
    sent = provider.requests[-1]["messages"]
    assert sent[0]["role"] == "system" and sent[0]["content"].startswith("You sell bikes.")
    assert sent[1:] == [{"role": "user", "content": "third"}, {"role": "assistant", "content": "You said: third"},
                        {"role": "user", "content": "fourth"}]


@pytest.mark.parametrize("model, error", [("slow", "timeout: no answer within 1 s"),
                                          ("fail", "HTTP 500 Internal Server Error")])
def test_a_provider_timeout_or_500_is_survived_with_the_fallback(account, provider, model, error):
    """Issue 10: "its timeout and its 500 are survived (fallback sent, outcome recorded)"."""
    account.configure({"active": True, "fallback": FALLBACK, "provider": {
        "baseUrl": provider.base_url, "model": model, "timeoutSeconds": 1}})
    asked = account.say("Which bike?")
    payload = account.reply_to(asked)
    assert payload["body"] == FALLBACK
    outcome = account.client.get(f"/v1/messages/{asked}").json()["bot"]
    assert outcome["outcome"] == "provider_failed" and outcome["detail"].startswith(error), outcome
    assert account.client.get("/v1/account").status_code == 200  # and the server carries on


def test_a_blocked_provider_does_not_delay_the_inbound_200(account, provider):
    """Issue 10: "a provider that sleeps 5 s does not delay the inbound 200": the 200 arrives while the
    provider is still blocked (it waits for an event this test sets only after the 200)."""
    provider.unblock.clear()
    provider.blocked.clear()
    account.configure({"active": True, "provider": {"baseUrl": provider.base_url, "model": "blocked",
                                                    "timeoutSeconds": 60}})
    asked = account.say("Are you there?")  # returns with the 200
    assert provider.blocked.wait(30)  # the bot's call is in the provider now, and blocked
    assert account.client.get(f"/v1/messages/{asked}").json()["bot"] is None  # still deciding
    provider.unblock.set()
    assert account.reply_to(asked)["body"] == "You said: Are you there?"


def test_messages_left_undecided_by_a_killed_server_are_answered_after_the_restart(tmp_path, receiver, provider):
    """The bot's queue is in memory: a server killed (kill -9) while the bot waits for the provider loses
    it, and the restarted server answers those recent messages (docs/api.md "Bot": a restart answers what the
    bot never decided on in the last 10 minutes). Nothing is answered twice: a decision and its reply are
    one transaction."""
    import signal
    data = tmp_path / "data"
    provider.unblock.clear()
    provider.blocked.clear()
    with ParleyProcess(data, "--allow-private-webhooks", http=False) as first:
        account = Account(first, receiver, first.first_run)
        account.configure({"active": True, "provider": {"baseUrl": provider.base_url, "model": "blocked",
                                                        "timeoutSeconds": 60}})
        asked = account.say("Still there?")
        assert provider.blocked.wait(30)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(30)
        account.client.close()
    provider.unblock.set()  # the killed server's call is gone; the next one is answered at once
    with ParleyProcess(data, "--allow-private-webhooks", http=False) as second:
        second.first_run = first.first_run
        account = Account(second, receiver, first.first_run)
        account.secret = account.client.get("/v1/account/webhook-secret").json()["secret"]
        try:
            assert account.reply_to(asked)["body"] == "You said: Still there?"
            assert len([p for p in account.replies()]) == 1
        finally:
            account.client.close()
