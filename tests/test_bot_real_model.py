"""The bot on a real small local model (issue 22): llama-cpp-python's server running Gemma 3 270M, through the
real server.py over HTTPS, its replies reaching a real local receiver. Slow and heavy (the llama.cpp build
takes minutes): skipped unless PARLEY_AI_MODEL (a .gguf to serve) or PARLEY_AI_SERVER (an OpenAI-compatible
/v1 URL already running) is set; `make test-ai` sets it up and runs this file.

A model this small is judged loosely: a question answered from the system prompt gets a reply that is not
empty, not the fallback and not a format's placeholder; "I want to talk to a person" hands off in at least one
structured mode the model manages."""
import os
import sys
from pathlib import Path

import pytest

from services import bot_answer
from tests.bot_helpers import FALLBACK, Account, receiver  # noqa: F401 (receiver: a fixture)
from tests.parley_process import ParleyProcess
from tests.waiting import wait_until
from tests.ui_helpers import open_page, sign_in

pytestmark = pytest.mark.skipif(not (os.environ.get("PARLEY_AI_MODEL") or os.environ.get("PARLEY_AI_SERVER")),
                                reason="a real model: set PARLEY_AI_MODEL or PARLEY_AI_SERVER (make test-ai)")
SYSTEM_PROMPT = ("You answer for Acme Bikes, a bicycle shop. Opening hours: Monday to Friday 9:00 to 18:00, "
                 "Saturday 10:00 to 16:00, closed on Sunday.")
QUESTION = "Hi, when do you open on Saturday?"
HANDOFF = "I want to talk to a person"
ANSWER_SECONDS = 240  # one answer of a 270M model on 2 busy cores, the plain-text retry included


@pytest.fixture(scope="module")
def model_url(tmp_path_factory):
    if os.environ.get("PARLEY_AI_SERVER"):
        yield os.environ["PARLEY_AI_SERVER"].rstrip("/")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from local_model import LocalModelServer
    with LocalModelServer(os.environ["PARLEY_AI_MODEL"], tmp_path_factory.mktemp("llama") / "server.log") as server:
        yield server.base_url


@pytest.fixture(scope="module")
def parley(tmp_path_factory):
    process = ParleyProcess(tmp_path_factory.mktemp("bot-ai") / "data", "--allow-private-webhooks", http=False)
    try:
        yield process.start(timeout=120)
    finally:
        process.stop()


@pytest.fixture(scope="module")
def shop(parley, receiver):
    return Account(parley, receiver, {"api_key": parley.first_run["api_key"],
                                      "account_id": parley.first_run.get("account_id", "owner")})


def _bot(model_url, mode="auto"):
    return {"active": True, "fallback": FALLBACK, "provider": {
        "baseUrl": model_url, "model": "gemma-3-270m", "systemPrompt": SYSTEM_PROMPT, "timeoutSeconds": 120,
        "mode": mode}}


def _outcome(shop, message_id):
    return wait_until(lambda: shop.client.get(f"/v1/messages/{message_id}").json()["bot"], timeout=ANSWER_SECONDS)


def test_a_question_answered_from_the_system_prompt_reaches_the_receiver(shop, model_url):
    shop.configure(_bot(model_url))
    asked = shop.say(QUESTION, from_id="saturday-1")
    outcome = _outcome(shop, asked)
    assert outcome["outcome"] in ("provider", "handoff") and outcome["replyId"], outcome
    payload = wait_until(lambda: next((p for p in shop.replies() if p["messageId"] == outcome["replyId"]), None))
    reply = payload["body"]
    print(f"\nreal model ({outcome['detail']}): {reply!r}")
    assert reply.strip() and reply != FALLBACK and not bot_answer.parroted(reply)
    assert "<end_of_turn>" not in reply and "<start_of_turn>" not in reply


def test_asking_for_a_person_hands_off_in_a_structured_mode(shop, model_url):
    """Each structured mode answers (never the fallback, never example text); a handoff in one of them passes.
    Gemma 3 270M has not handed off in any request shape tried (bench/README.md, "Bot on a real small model"):
    that is recorded as an expected failure with what each mode answered, so a model that does hand off passes."""
    seen = {}
    for n, mode in enumerate(("auto", "json_object", "json_schema")):
        shop.configure(_bot(model_url, mode))
        outcome = _outcome(shop, shop.say(HANDOFF, from_id=f"person-{n}"))
        seen[mode] = outcome
        if outcome["outcome"] == "handoff":
            break
        if outcome["outcome"] == "provider_failed" and "response_format" in outcome["detail"]:
            continue  # a format this server does not take (llama-cpp-python's server and json_schema)
        assert outcome["outcome"] == "provider", (mode, outcome)
        reply = wait_until(lambda: next((p["body"] for p in shop.replies() if p["messageId"] == outcome["replyId"]),
                                        None))
        assert reply.strip() and reply != FALLBACK and not bot_answer.parroted(reply), (mode, reply)
    print(f"\nhandoff by mode: {seen}")
    if not any(o["outcome"] == "handoff" for o in seen.values()):
        pytest.xfail(f"the model answered without handing off in every structured mode: {seen}")


def test_the_try_it_panel_shows_the_same(shop, model_url, parley, chromium):
    shop.configure(_bot(model_url))
    context, page = open_page(chromium)
    context.set_default_timeout(ANSWER_SECONDS * 1000)
    try:
        sign_in(page, parley)
        page.goto(parley.base + "/bot")
        page.fill("#try-body", QUESTION)
        page.click("#try button[type=submit]")
        result = page.locator("#try-result")
        result.wait_for()
        assert result.locator("code").first.inner_text() in ("provider", "handoff")
        reply = result.locator("q.reply").inner_text()
        assert reply.strip() and reply != FALLBACK and not bot_answer.parroted(reply)
        assert result.locator("code.provider-mode").inner_text() in ("json_schema", "json_object", "plain")
        assert page.console_errors == []
    finally:
        context.close()
