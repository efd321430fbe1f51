"""The bot on a real small model (issue 22): Gemma 3 270M served by llama-cpp-python's server on this box
(scripts/local_model.py; installed and assembled if missing, which compiles llama.cpp the first time).

Latency: QUESTIONS conversations one after the other (a person waiting for the answer), inbound POST -> the
bot's reply at the receiver; p50/p99, and how many answers needed the plain-text path (detail "unstructured
answer") or failed. Throughput cost: inbound req/s (wrk, bot off for those messages) alone, and while two
conversations keep the model busy: the model and Parley share the 2 cores. Run alone: bench/run.py --only
bot_real_model.
"""
import statistics
import sys
import threading
import time
from pathlib import Path

NAME = "bot_real_model"
TITLE = "Bot on a real small model (Gemma 3 270M, llama-cpp-python): reply latency and its cost"
QUESTIONS = ["Hi, when do you open on Saturday?", "Are you open on Sunday?", "What time do you close on Friday?",
             "Can I come by on Monday morning?", "I want to talk to a person", "Do you repair e-bikes?"]
ROUNDS = 2  # each question twice: 12 answers
SYSTEM_PROMPT = ("You answer for Acme Bikes, a bicycle shop. Opening hours: Monday to Friday 9:00 to 18:00, "
                 "Saturday 10:00 to 16:00, closed on Sunday. Repairs from $20.")
CAMPAIGN = "ai"  # the bot is on for this campaign only: wrk's messages (no campaign) are not answered


def percentile(values, p):
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 1) if ordered else None


def run(ctx):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import local_model
    from tests.parley_process import free_port
    from tests.test_delivery_e2e import ThreadedReceiver
    install_seconds = local_model.install()
    data = ctx.fresh_data_dir("bot_real_model")
    parley = ctx.start_parley(data, "--allow-private-webhooks")
    receiver = ThreadedReceiver(free_port()).__enter__()
    model = local_model.LocalModelServer(local_model.model_path(), ctx.workdir / "llama.log").start()
    key = ctx.first_run["api_key"]
    try:
        with parley.client(params={"apiKey": key}, timeout=300) as api:
            r = api.patch("/v1/account/settings", json={
                "customChannelWebhookUrl": f"http://127.0.0.1:{receiver.port}/hook",
                "bot": {"active": False, "fallback": "A person will answer soon.", "campaigns": {CAMPAIGN: {"active": True}},
                        "provider": {"baseUrl": model.base_url, "model": local_model.MODEL_NAME, "timeoutSeconds": 120,
                                     "systemPrompt": SYSTEM_PROMPT}}})
            assert r.status_code == 200, r.text

            def converse(question, sid):
                """Seconds from the inbound POST to the reply at the receiver, and the bot's outcome."""
                started = time.monotonic()
                r = api.post("/v1/incoming_custom_channel_message", json={"customData": {
                    "messageSid": sid, "fromId": sid, "toId": "shop", "body": question, "channel": "webchat",
                    "campaignId": CAMPAIGN}})
                message_id = r.json()["messageId"]
                while True:
                    bot = api.get(f"/v1/messages/{message_id}").json()["bot"]
                    if bot and (not bot["replyId"] or any(
                            bot["replyId"] in str(p.get("body", "")) for p in list(receiver.requests))):
                        return time.monotonic() - started, bot
                    if time.monotonic() - started > 300:
                        return None, bot
                    time.sleep(0.05)

            ctx.wait_for_quiet()
            answers = []
            for round_ in range(ROUNDS):
                for n, question in enumerate(QUESTIONS):
                    seconds, bot = converse(question, ctx.salts.sid(f"ai{round_}-{n}"))
                    answers.append({"question": question, "seconds": seconds, "outcome": (bot or {}).get("outcome"),
                                    "detail": (bot or {}).get("detail", "")})
                    ctx.log(f"  {seconds and round(seconds, 1)} s {answers[-1]['outcome']}: {answers[-1]['detail'][:90]}")

            # Throughput cost: inbound alone, then while two conversations keep the model generating.
            path = f"/v1/incoming_custom_channel_message?apiKey={key}"
            ctx.wait_for_quiet()
            alone = ctx.load.wrk(parley.base, parley.proc.pid, "inbound", path, ctx.salts.sid("ai-alone"), 500,
                                 duration=10)
            busy, stop = [], threading.Event()

            def keep_busy(worker):
                while not stop.is_set():
                    converse(QUESTIONS[0], ctx.salts.sid(f"ai-busy{worker}-{len(busy)}"))
                    busy.append(worker)
            threads = [threading.Thread(target=keep_busy, args=(w,)) for w in range(2)]
            for t in threads:
                t.start()
            time.sleep(2)
            beside = ctx.load.wrk(parley.base, parley.proc.pid, "inbound", path, ctx.salts.sid("ai-beside"), 500,
                                  duration=10, quiet_first=False)
            stop.set()
            for t in threads:
                t.join(320)
    finally:
        model.stop()
        receiver.__exit__(None, None, None)
        parley.stop()
    done = [a["seconds"] for a in answers if a["seconds"] is not None]
    return {"install_seconds": round(install_seconds, 1), "answers": len(answers),
            "reply_p50_s": percentile(done, 50), "reply_p99_s": percentile(done, 99),
            "reply_mean_s": round(statistics.mean(done), 1) if done else None,
            "plain_text_path": sum(a["detail"].startswith("unstructured answer") for a in answers),
            "handoffs": sum(a["outcome"] == "handoff" for a in answers),
            "failed": sum(a["outcome"] == "provider_failed" for a in answers),
            "inbound_alone_rps": alone["rps"], "inbound_beside_model_rps": beside["rps"],
            "ratio": round(beside["rps"] / alone["rps"], 3) if alone["rps"] else None, "samples": answers}


def render(r):
    return [
        f"Reply latency (inbound POST -> the reply at the receiver, one conversation at a time, {r['answers']} "
        f"answers): p50 {r['reply_p50_s']} s, p99 {r['reply_p99_s']} s (mean {r['reply_mean_s']} s). The plain-text "
        f"path (after an unusable structured answer) answered {r['plain_text_path']} of them; {r['handoffs']} handed "
        f"off, {r['failed']} failed (fallback).",
        "",
        f"Inbound req/s alone {r['inbound_alone_rps']:.0f}; while two conversations keep the model generating "
        f"{r['inbound_beside_model_rps']:.0f} (x{r['ratio']}): the model and Parley share the cores.",
    ]


def goals(r):
    return []  # figures to report; a model this small on 2 shared cores has no target of Parley's to meet
