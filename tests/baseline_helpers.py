"""Every JSON request body of the API, for tests that probe all of them (tests/test_control_characters.py,
tests/test_bad_input.py): a body each operation accepts with every string field set (BASELINES), the ids its
placeholders stand for (the `world` fixture, imported by name), the URL, key and body to call each operation with,
and a snapshot of the stored data to show a refused request changed nothing."""
import json
import re

import pytest

from handlers import routes
from handlers.openapi import build_document
from tests import db_direct

LIST, CONTACT, SUB, USER = "{list}", "{contact}", "{sub}", "{user}"
DUPLICATE, WIDGET = "{duplicate}", "{widget}"  # a second contact of the same person; the account's chat widget
CONVERSATION, CANNED = "{conversation}", "{canned}"
DRAFT, DRAFT_TO_START = "{draft}", "{draft to start}"  # campaigns made as drafts (issue 43 §7)

BASELINES = {  # a body each operation accepts (tests/test_control_characters.py checks it), with every string field set
    ("PATCH", "/v1/account"): {"name": "Bakery Bergmann"},
    ("PATCH", "/v1/account/settings"): {
        "optOutKeywords": ["STOP"], "optInKeywords": ["START"], "defaultCountry": "DE",
        "customChannelWebhookUrl": "http://127.0.0.1:9/hook",
        "notificationUrls": {"contact.created": "http://127.0.0.1:9/created"},
        "bot": {"greeting": "Hello!\n\tWelcome", "fallback": "Sorry", "handoffKeywords": ["human"],
                "rules": [{"keywords": ["price"], "answer": "10 EUR\na month"}],
                "provider": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m", "apiKey": "sk-test",
                             "systemPrompt": "Be brief.\nBe kind."},
                "campaigns": {"spring": {"greeting": "Spring!"}}},
        "widget": {"enabled": True, "allowedOrigins": ["https://shop.example"], "title": "Chat",
                   "greeting": "Hi!\nHow can we help?", "color": "#2563eb"},
        "assignment": {"mode": "balanced", "awayAfterMinutes": 30},
        "csat": {"enabled": False, "question": "How did we do?"}},
    ("POST", "/v1/contacts"): {"firstName": "Ada", "lastName": "Lovelace", "phone": "+14155552671",
                               "email": "ada@example.com"},
    ("POST", "/v1/lists"): {"name": "Leads"},
    ("POST", "/v1/lists/{listId}/contacts"): {"contactId": CONTACT},
    ("POST", "/v1/incoming_custom_channel_message"): {"customData": {
        "messageSid": "SM1", "fromId": "user-1", "toId": "shop", "body": "Hi!\n\tPrices?", "status": "received",
        "channel": "web chat", "campaignId": "spring", "firstName": "Ada", "lastName": "L", "email": "a@example.com",
        "mediaUrl": "https://cdn.example.com/photo.jpg", "mediaContentType": "image/jpeg"}},
    ("POST", "/v1/send_custom_channel_message"): {"customData": {
        "fromId": "user-1", "customChannel": "web chat", "body": "Thanks!\n\tBye", "campaignId": "spring",
        "firstName": "Ada", "lastName": "L", "email": "a@example.com",
        "mediaUrl": "https://cdn.example.com/photo.jpg", "mediaContentType": "image/jpeg"}},
    ("POST", "/v1/subaccounts"): {"name": "Bakery", "email": "bakery@example.com"},
    ("POST", "/v1/subaccounts/credits"): {"email": SUB, "amount": 1, "description": "Top-up\nfor March"},
    ("POST", "/v1/campaigns"): {"name": "Spring", "listId": LIST, "body": "Hi {{firstName}}\n\tSale!",
                                "campaignId": "spring", "channel": "web chat", "startAt": "2030-01-01T00:00:00Z"},
    ("POST", "/v1/bot/test"): {"body": "price?\n", "campaignId": "spring", "contactId": CONTACT},
    ("PATCH", "/v1/contacts/{contactId}"): {"firstName": "Ed", "lastName": "Existing", "phone": "+14155552699",
                                            "email": "patched@example.com"},
    ("PATCH", "/v1/lists/{listId}"): {"name": "Renamed"},
    ("POST", "/v1/users"): {"email": "sam@example.com", "name": "Sam", "role": "agent"},
    ("PATCH", "/v1/users/{userId}"): {"name": "Sam K.", "role": "agent", "email": "sam.k@acme.example"},
    ("POST", "/v1/conversations/bulk"): {"conversationIds": [CONVERSATION], "status": "resolved",
                                         "assigneeUserId": USER},
    ("PATCH", "/v1/conversations/{conversationId}"): {"status": "snoozed", "snoozedUntil": "2030-01-01T00:00:00Z",
                                                      "assigneeUserId": USER},
    ("POST", "/v1/canned-replies"): {"code": "thanks", "body": "Thanks {{firstName}}!\n\tBye"},
    ("PATCH", "/v1/canned-replies/{cannedReplyId}"): {"code": "hours", "body": "9 to 5\n\tdaily"},
    ("POST", "/v1/conversations/{contactId}/notes"): {"body": "Called back.\n\tWaiting."},
    ("POST", "/v1/account/api-keys"): {"name": "CRM bridge"},
    ("POST", "/v1/campaigns/{campaignId}/start"): {"startAt": "2030-01-01T00:00:00Z"},
    ("POST", "/v1/campaigns/{campaignId}/preview"): {"contactId": CONTACT},
    ("POST", "/v1/campaigns/{campaignId}/test"): {"contactId": CONTACT},
    ("PUT", "/v1/account/business-hours"): {
        "timezone": "Europe/Berlin", "weekly": {"mon": [["09:00", "17:00"]]}, "holidays": ["2030-12-25"],
        "holidayCountry": "DE", "outsideHoursMessage": "Closed.\n\tBack at {{nextOpenAt}}"},
    ("POST", "/v1/contacts/{contactId}/merge"): {"otherId": DUPLICATE, "keep": {"email": "other", "phone": "this"}},
    ("POST", "/v1/contacts/{contactId}/messages"): {"body": "Thanks!\n\tBye", "channel": "web chat",
                                                    "mediaUrl": "https://cdn.example.com/photo.jpg",
                                                    "mediaContentType": "image/jpeg"},
    ("POST", "/widget/{widgetId}/messages"): {"body": "Hello!\n\tAnyone there?"},
    ("POST", "/widget/{widgetId}/identify"): {"id": "user-42", "hash": "0" * 64, "email": "ada@example.com",
                                             "name": "Ada"},
    ("POST", "/widget/{widgetId}/email"): {"email": "ada@example.com"},
    ("POST", "/widget/{widgetId}/csat"): {"rating": 5, "comment": "Quick!\n\tThanks"},
}
ALIASES = {"/incomingCustomChannelMessage": "/v1/incoming_custom_channel_message",
           "/v1/sendCustomChannelMessage": "/v1/send_custom_channel_message"}
AGENCY_ONLY = {"/v1/subaccounts", "/v1/subaccounts/credits", "/v1/subaccounts/{subAccountId}"}



def operations_with_a_body():
    document = build_document(routes())
    return [(method.upper(), path) for path, item in document["paths"].items()
            for method, op in item.items() if "requestBody" in op]


def string_fields(value, path=()):
    """(path, kind) of every string in a body: kind "value", or "key" for a dict key (bot.campaigns)."""
    if isinstance(value, str):
        yield path, "value"
    elif isinstance(value, dict):
        for key, inner in value.items():
            if path and path[-1] == "campaigns":
                yield path + (key,), "key"
            yield from string_fields(inner, path + (key,))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from string_fields(inner, path + (index,))


# Not data a request changes: the shared rate limit's state (PostgreSQL: every API request, refused or not, is
# counted there), the background workers' leases (renewed on a clock) and the writer's own batch record (a key's
# last use is written in the background, below).
_NOT_DATA = ("rate_limits", "worker_leases", "writer_batches")


# A key's last use (its last column) is written in the background by every request, refused or not (issue 44 §4).
_LAST_USED = re.compile(r"""(,\s*)(?:'[^']*'|NULL|None)(\)?;?)$""")


def snapshot(services):
    # Sorted: PostgreSQL returns an updated row (a key's last use) at another place in its table.
    return sorted(_LAST_USED.sub(r"\1<lastUsedAt>\2", line) if line.startswith(("api_keys: ", 'INSERT INTO "api_keys"'))
            else line for line in db_direct.dump_text(services).splitlines()
            if not any(line.startswith((f"{table}: ", f'INSERT INTO "{table}"')) for table in _NOT_DATA))


@pytest.fixture
def world(io_loop, api, account, agency, sub):
    """Ids the baselines refer to, and the key each operation is called with."""
    async def make():
        r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "http://127.0.0.1:9/hook"},
                            key=account["api_key"])
        assert r.code == 200, r.body
        contact = await api.post("/v1/contacts", {"email": "existing@example.com"}, key=account["api_key"])
        lst = await api.post("/v1/lists", {"name": "Existing"}, key=account["api_key"])
        user = await api.post("/v1/users", {"email": "member@example.com", "role": "agent"}, key=account["api_key"])
        inbound = await api.post("/v1/incoming_custom_channel_message", {"customData": {
            "messageSid": "SM-world", "fromId": "+14155550100", "toId": "shop", "body": "Hello"}},
            key=account["api_key"])
        conversation = (await api.get(f"/v1/messages/{inbound.json['messageId']}", key=account["api_key"])).json
        canned = await api.post("/v1/canned-replies", {"code": "existing", "body": "Hi"}, key=account["api_key"])
        duplicate = await api.post("/v1/contacts", {"phone": "+14155550177", "email": "home@example.com"},
                                   key=account["api_key"])
        r = await api.patch("/v1/account/settings", {"widget": {"enabled": True}}, key=account["api_key"])
        assert r.code == 200, r.body
        widget = (await api.get("/v1/account/widget", key=account["api_key"])).json["widgetId"]
        drafts = [await api.post("/v1/campaigns", {"name": name, "listId": lst.json["id"], "body": "Hi",
                                                   "draft": True}, key=account["api_key"]) for name in ("D", "S")]
        assert [d.code for d in drafts] == [201, 201], [d.body for d in drafts]
        return {CONTACT: contact.json["id"], LIST: lst.json["id"], SUB: sub["email"], USER: user.json["id"],
                CONVERSATION: conversation["contactId"], CANNED: canned.json["id"], DRAFT: drafts[0].json["id"],
                DRAFT_TO_START: drafts[1].json["id"], DUPLICATE: duplicate.json["id"], WIDGET: widget}
    return io_loop.run_sync(make)


def fill(body, world):
    text = json.dumps(body)
    for placeholder, value in world.items():
        text = text.replace(json.dumps(placeholder), json.dumps(value))
    return json.loads(text)


def call_args(method, path, world, account, agency, sub):
    path = ALIASES.get(path, path)
    key = agency["api_key"] if path in AGENCY_ONLY else account["api_key"]
    url = (path.replace("{listId}", world[LIST]).replace("{subAccountId}", sub["account_id"])
           .replace("{contactId}", world[CONVERSATION if path.endswith("/messages") else CONTACT])
           .replace("{userId}", world[USER]).replace("{widgetId}", world[WIDGET])
           .replace("{conversationId}", world[CONVERSATION]).replace("{cannedReplyId}", world[CANNED])
           .replace("{campaignId}", world[DRAFT_TO_START] if path.endswith("/start") else world[DRAFT]))
    body = BASELINES.get((method, path))
    return url, key, None if body is None else fill(body, world)
