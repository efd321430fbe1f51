"""CSAT (issue 41, docs/guide.md "Customer satisfaction (CSAT)"), in-process on both databases: the setting and its bad
input; a resolution asks once on the contact's channel (a link to a one-question page, its token only in what is
delivered) and not again within a day; the page's single-use token (also two answers at once) and its bad input;
the widget's question and answer; csat.submitted as event and notification; the Reports, the person's export,
merge, erasure; and another account's key, token or visitor seeing and changing nothing."""
import asyncio
import json
import re
from datetime import timedelta

from common.ids import utcnow
from services import conversation_status, csat
from storage.db import fetch_all, reads
from tests.contact_helpers import inbound
from tests.event_helpers import events_of
from tests.team_users import add_user
from tests.widget_helpers import Visitor, enable
from tests.ui_helpers import FormClient

SETTINGS = "/v1/account/settings"
QUESTION = "How did we do today?"


@reads
def _asks(cx, account_id):
    return fetch_all(cx, "SELECT contact_id, channel, token_hash, rating, comment, answered_at, agent_user_id"
                         " FROM csat_asks WHERE account_id = ? ORDER BY asked_at, id", (account_id,))


@reads
def _reply_payloads(cx, account_id):
    return [json.loads(row[0]) for row in cx.execute("SELECT payload FROM outbox WHERE account_id = ? AND kind = 'reply'"
                                                     " ORDER BY id", (account_id,))]


@reads
def _notifications(cx, account_id, event_type):
    return [json.loads(row[0])["data"] for row in cx.execute(
        "SELECT payload FROM outbox WHERE account_id = ? AND kind = 'notification' AND event_type = ? ORDER BY id",
        (account_id, event_type))]


async def turn_on(api, account, **more):
    r = await api.patch(SETTINGS, {"csat": {"enabled": True, "question": QUESTION, **more},
                                   "customChannelWebhookUrl": "https://hooks.example/replies",
                                   "notificationUrls": {"csat.submitted": "https://hooks.example/csat"}},
                        key=account["api_key"])
    assert r.code == 200, r.body
    return r.json


async def resolve(api, account, contact_id):
    r = await api.patch(f"/v1/conversations/{contact_id}", {"status": "resolved"}, key=account["api_key"])
    assert r.code == 200, r.body


async def asked_link(services, account):
    """The page token of the account's newest ask, as its delivery carries it."""
    payloads = await _reply_payloads(services.db, account["account_id"])
    [token] = re.findall(r"https://\S+/csat/([A-Za-z0-9_-]+)", payloads[-1]["body"])
    return token


async def test_the_setting_is_stored_with_defaults_and_bad_values_change_nothing(api, account):
    key = account["api_key"]
    r = await api.patch(SETTINGS, {"csat": {"enabled": True}}, key=key)
    assert r.code == 200 and r.json["csat"] == {"enabled": True, "question": csat.DEFAULT_QUESTION}, r.body
    for bad, field in [({"enabled": "yes"}, "csat.enabled"), ({"question": "x" * 301}, "csat.question"),
                       ({"question": "Rate\x07us"}, "csat.question"), ({"question": "  "}, "csat.question"),
                       ({"enabled": True, "when": "now"}, "csat.when")]:
        r = await api.patch(SETTINGS, {"csat": bad}, key=key)
        assert r.code == 400 and r.json["error"]["code"] == "VALIDATION_ERROR", r.body
        assert field in r.json["error"]["message"], (bad, r.json)
    assert (await api.get("/v1/account", key=key)).json["settings"]["csat"] == {"enabled": True, "question": csat.DEFAULT_QUESTION}


async def test_a_resolution_asks_once_and_not_again_within_a_day(api, services, account, other_account):
    key, account_id = account["api_key"], account["account_id"]
    contact_id = await inbound(api, key, "c1", "+14155550001", "My order is late")
    await resolve(api, account, contact_id)  # csat is off: nobody is asked
    assert await _asks(services.db, account_id) == []
    await api.patch(f"/v1/conversations/{contact_id}", {"status": "open"}, key=key)
    await turn_on(api, account)

    await resolve(api, account, contact_id)
    await resolve(api, account, contact_id)  # resolved already: no new resolution
    [ask] = await _asks(services.db, account_id)
    assert (ask["contact_id"], ask["channel"], ask["rating"]) == (contact_id, "custom", None)
    # The message as stored (thread, API, search) shows the link without its token; the delivery carries it.
    messages = (await api.get(f"/v1/contacts/{contact_id}/messages", key=key)).json["data"]
    [asked] = [m for m in messages if m["messageType"] == "csat"]
    assert asked["author"] == "auto" and re.fullmatch(rf"{re.escape(QUESTION)}\nhttps://\S+/csat/…", asked["body"])
    [payload] = await _reply_payloads(services.db, account_id)
    token = re.fullmatch(rf"{re.escape(QUESTION)}\n\S+/csat/([A-Za-z0-9_-]{{43}})", payload["body"]).group(1)
    assert ask["token_hash"] != token and len(ask["token_hash"]) == 64  # only its hash is stored

    # Reopened by the contact and resolved again the same day: not asked again; a day later it is.
    await inbound(api, key, "c2", "+14155550001", "One more thing")
    await resolve(api, account, contact_id)
    assert len(await _asks(services.db, account_id)) == 1
    await conversation_status.change(services, account_id, [contact_id], status="open")
    await conversation_status.change(services, account_id, [contact_id], status="resolved",
                                     now=utcnow() + csat.ASK_GAP + timedelta(minutes=1))
    assert len(await _asks(services.db, account_id)) == 2

    # An opted-out contact is not asked.
    quiet = await inbound(api, key, "c3", "+14155550002", "Thanks, bye")
    assert (await api.patch(f"/v1/contacts/{quiet}", {"optedOut": True}, key=key)).code == 200
    await resolve(api, account, quiet)
    assert [a["contact_id"] for a in await _asks(services.db, account_id)] == [contact_id, contact_id]

    # Another account's key cannot resolve (so ask) this conversation, and its account has no asks.
    r = await api.patch(f"/v1/conversations/{contact_id}", {"status": "open"}, key=other_account["api_key"])
    assert r.code == 404
    assert await _asks(services.db, other_account["account_id"]) == []


async def test_two_resolutions_at_once_ask_once(api, services, account):
    """On PostgreSQL the two transactions run at once (two processes would too): the conditional UPDATE and the
    contact's lock let one ask."""
    key, account_id = account["api_key"], account["account_id"]
    await turn_on(api, account)
    agent = await add_user(services, account_id, "agent@example.com")
    contact_ids = [await inbound(api, key, f"r{n}", f"+1415555010{n}") for n in range(3)]
    # Each conversation resolved twice at once, once also assigned (that change goes through the status check:
    # the contact's lock and the day's rule stop the second ask).
    await asyncio.gather(*(conversation_status.change(services, account_id, [c], status="resolved", **assign)
                           for c in contact_ids for assign in ({}, {"assignee_user_id": agent})))
    assert sorted(a["contact_id"] for a in await _asks(services.db, account_id)) == sorted(contact_ids)


async def test_the_page_answers_once_emits_the_event_and_refuses_bad_input(api, services, account, other_account,
                                                                           http_server_client, caplog):
    key, account_id = account["api_key"], account["account_id"]
    await turn_on(api, account)
    contact_id = await inbound(api, key, "p1", "+14155550011", "Where is my parcel?")
    await resolve(api, account, contact_id)
    token = await asked_link(services, account)
    page = FormClient(http_server_client)
    r = await page.get(f"/csat/{token}")
    assert r.code == 200 and QUESTION in r.text and 'name="_xsrf"' in r.text, r.text
    assert "<script>" not in (await page.get(f"/csat/{token}")).text

    for form, field in [({"rating": "0"}, "rating"), ({"rating": "6"}, "rating"), ({"rating": "good"}, "rating"),
                        ({"rating": "4", "comment": "x" * 1001}, "comment"),
                        ({"rating": "4", "comment": "bad\x1bbyte"}, "comment")]:
        r = await page.post(f"/csat/{token}", form)
        assert r.code == 400 and field.capitalize() in r.text, (form, r.code)
    assert (await page.post(f"/csat/{token}", {"rating": "4"}, xsrf=False)).code == 403  # the form's XSRF token
    assert [a["rating"] for a in await _asks(services.db, account_id)] == [None]  # nothing changed
    assert (await page.get("/csat/" + "A" * 43)).code == 404

    # Two answers at once: one is kept, the other is told the link was used.
    first, second = await asyncio.gather(
        page.post(f"/csat/{token}", {"rating": "5", "comment": "Fast <b>and</b> kind"}),
        page.post(f"/csat/{token}", {"rating": "1"}))
    assert sorted([first.code, second.code]) == [200, 410], (first.code, second.code)
    [ask] = await _asks(services.db, account_id)
    kept = (5, "Fast <b>and</b> kind") if first.code == 200 else (1, None)
    assert (ask["rating"], ask["comment"]) == kept
    again = await page.get(f"/csat/{token}")
    assert again.code == 410 and "answered this question already" in again.text

    [event] = await events_of(api, key, "csat.submitted")  # checked against the event's schema
    assert event["data"] == {"contactId": contact_id, "rating": kept[0], "comment": kept[1]}
    assert await _notifications(services.db, account_id, "csat.submitted") == [event["data"]]
    assert await events_of(api, other_account["api_key"], "csat.submitted") == []
    assert "GET /csat/***" in caplog.text and token not in caplog.text  # the access log masks the token


async def test_an_expired_page_says_so(api, services, account, http_server_client):
    key, account_id = account["api_key"], account["account_id"]
    await turn_on(api, account)
    contact_id = await inbound(api, key, "e1", "+14155550021")
    await resolve(api, account, contact_id)
    token = await asked_link(services, account)
    await services.db.write(_expire, account_id)
    page = FormClient(http_server_client)
    r = await page.get(f"/csat/{token}")
    assert r.code == 410 and "expired" in r.text


def _expire(cx, account_id):
    cx.execute("UPDATE csat_asks SET expires_at = '2000-01-01T00:00:00.000Z' WHERE account_id = ?", (account_id,))


async def test_the_widget_asks_in_the_chat_and_its_visitor_answers_once(api, services, account, other_account):
    key, account_id = account["api_key"], account["account_id"]
    widget_id = await enable(api, account)
    await turn_on(api, account)
    visitor = Visitor(api, widget_id)
    sent = await visitor.send("Can I change my order?")
    assert sent.code == 201, sent.body
    contact_id = (await api.get(f"/v1/messages/{sent.json['message']['id']}", key=key)).json["contactId"]
    await resolve(api, account, contact_id)
    history = await visitor.history()
    asked = history["messages"][-1]
    assert (asked["body"], asked["csat"], asked["mine"]) == (QUESTION, True, False)
    assert history["csat"] == {"messageId": asked["id"], "question": QUESTION}
    assert await _reply_payloads(services.db, account_id) == []  # the chat reads it: nothing to deliver

    # Bad input, a stranger, and another account's widget change nothing.
    for body, field in [({"rating": 0}, "rating"), ({"rating": 6}, "rating"), ({"rating": "5"}, "rating"),
                        ({"rating": 4, "comment": "x" * 1001}, "comment"),
                        ({"rating": 4, "comment": "a\x00b"}, "comment")]:
        r = await api.post(f"/widget/{widget_id}/csat", body, headers=visitor.headers())
        assert r.code == 400 and field in r.json["error"]["message"], (body, r.body)
    stranger = Visitor(api, widget_id)
    await stranger.send("Hi")
    assert (await api.post(f"/widget/{widget_id}/csat", {"rating": 1}, headers=stranger.headers())).code == 410
    their_widget = await enable(api, other_account)
    r = await api.post(f"/widget/{their_widget}/csat", {"rating": 1}, headers=visitor.headers())
    assert r.code == 403, r.body
    assert [a["rating"] for a in await _asks(services.db, account_id)] == [None]

    r = await api.post(f"/widget/{widget_id}/csat", {"rating": 4, "comment": "Thanks!\nAll good."},
                       headers=visitor.headers())
    assert r.code == 200 and r.json == {"answered": True}, r.body
    assert (await api.post(f"/widget/{widget_id}/csat", {"rating": 2}, headers=visitor.headers())).code == 410
    assert (await visitor.history())["csat"] is None
    [event] = await events_of(api, key, "csat.submitted")
    assert event["data"] == {"contactId": contact_id, "rating": 4, "comment": "Thanks!\nAll good."}


async def test_reports_export_and_erasure_hold_the_answers_of_their_own_account(api, services, account, other_account):
    key, account_id = account["api_key"], account["account_id"]
    await turn_on(api, account)
    contact_id = await inbound(api, key, "x1", "+14155550031", "Broken zip")
    owner = await add_user(services, account_id, "agent@example.com")
    await api.patch(f"/v1/conversations/{contact_id}", {"assigneeUserId": owner}, key=key)
    await resolve(api, account, contact_id)
    await csat.answer_page(services.db, await asked_link(services, account), 2, "Slow")

    day = utcnow().date().isoformat()
    days = (await api.get(f"/v1/reports/csat-days?from={day}&to={day}", key=key)).json
    assert days["rows"] == [{"day": day, "answers": 1, "satisfied": 0, "percentSatisfied": 0.0, "averageRating": 2.0}]
    agents = (await api.get("/v1/reports/csat-agents", key=key)).json["rows"]
    assert [(r["userId"], r["answers"], r["averageRating"]) for r in agents] == [(owner, 1, 2.0)]
    theirs = (await api.get(f"/v1/reports/csat-days?from={day}&to={day}", key=other_account["api_key"])).json
    assert theirs["rows"][0]["answers"] == 0
    assert (await api.get("/v1/reports/csat-agents", key=other_account["api_key"])).json["rows"] == []

    exported = (await api.get(f"/v1/contacts/{contact_id}/export", key=key)).json["csatAnswers"]
    assert [(a["rating"], a["comment"], a["agentUserId"], a["channel"]) for a in exported] == [(2, "Slow", owner,
                                                                                                 "custom")]
    # Merged into another record of the person, the answer goes with it.
    twin = (await api.post("/v1/contacts", {"email": "ada@example.com"}, key=key)).json["id"]
    assert (await api.post(f"/v1/contacts/{twin}/merge", {"otherId": contact_id}, key=key)).code == 200
    assert [a["contact_id"] for a in await _asks(services.db, account_id)] == [twin]
    contact_id = twin
    assert (await api.delete(f"/v1/contacts/{contact_id}", key=other_account["api_key"])).code == 404
    r = await api.delete(f"/v1/contacts/{contact_id}", key=key)
    assert r.code == 200 and r.json["removed"]["csatAnswers"] == 1, r.body
    assert await _asks(services.db, account_id) == []
    assert (await api.get(f"/v1/reports/csat-days?from={day}&to={day}", key=key)).json["rows"][0]["answers"] == 0


async def test_the_settings_section_names_a_bad_question_and_saves_a_good_one(signed_in, services, ui_account):
    page = (await signed_in.get("/settings")).text
    assert 'id="csat"' in page and 'action="/settings/csat"' in page
    r = await signed_in.post("/settings/csat", {"enabled": "on", "question": "x" * 301})
    assert r.code == 400 and "csat.question" in r.text and 'value="' + "x" * 301 + '"' in r.text
    settings = (await services.db.read(_settings, ui_account["account_id"]))
    assert "csat" not in settings  # nothing saved
    r = await signed_in.post("/settings/csat", {"enabled": "on", "question": ""})
    assert r.code == 303, r.text
    assert (await services.db.read(_settings, ui_account["account_id"]))["csat"] == {
        "enabled": True, "question": csat.DEFAULT_QUESTION}


def _settings(cx, account_id):
    return json.loads(cx.execute("SELECT settings FROM accounts WHERE id = ?", (account_id,)).fetchone()[0])
