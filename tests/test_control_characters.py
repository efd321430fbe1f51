"""Control characters in identifier-like text (issue 27 item 3): every string field of every JSON request
body and every field of every UI form, given a C0 or C1 control character, is a 4xx naming the field, never
a 500, and nothing is stored. Free text (message bodies, the bot's answers, notes) keeps newlines and tabs.

Found by an outside scanner: POST /bot/campaign with campaignId=probe%0Aline2 saved the override and then
answered 500 (the redirect header refused the newline); PATCH /v1/account/settings with that campaign key
answered 200 and stored it."""
import copy
from html.parser import HTMLParser


from handlers import routes
from handlers.openapi import build_document
from tests.baseline_helpers import (call_args, operations_with_a_body, snapshot, string_fields,
                                    world)  # noqa: F401 (world: a fixture)

CONTROLS = ["\n", "\x00", "\x1b", "\x7f", "\x85"]  # C0 (newline, NUL, ESC), DEL, C1 (NEL)
# Fields of text for people: they keep newlines and tabs. Every other string field must refuse controls.
FREE_TEXT = {"body", "answer", "greeting", "fallback", "systemPrompt", "description", "outsideHoursMessage", "comment"}
# Refused before anything else when a field has a control character, but answered only by a visitor whose chat
# shows a question (tests/test_csat.py): no baseline of these is accepted here.
ANSWERED_ONLY_WHEN_ASKED = {("POST", "/widget/{widgetId}/csat")}


def with_control(body, path, kind, char):
    body = copy.deepcopy(body)
    *parents, last = path
    target = body
    for part in parents:
        target = target[part]
    if kind == "key":
        target[last[:1] + char + last[1:]] = target.pop(last)
    else:
        target[last] = target[last][:1] + char + target[last][1:]
    return body


async def test_every_identifier_like_field_of_the_json_api_refuses_control_characters(
        api, services, world, account, agency, sub):
    checked = 0
    before = snapshot(services)
    for method, path in operations_with_a_body():
        url, key, body = call_args(method, path, world, account, agency, sub)
        if body is None:
            assert method == "PATCH" and path == "/v1/subaccounts/{subAccountId}", f"no baseline for {path}"
            continue  # autoRecharge: numbers only
        for field, kind in string_fields(body):
            # Free text keeps newlines and tabs, never U+0000 (PostgreSQL's text cannot hold it: it was a 500)
            for char in (["\x00"] if kind == "value" and field[-1] in FREE_TEXT else CONTROLS):
                r = await api.call(method, url, with_control(body, field, kind, char), key=key, query_key=False)
                assert 400 <= r.code < 500, (method, path, field, repr(char), r.code, r.body)
                message = r.json["error"] if isinstance(r.json["error"], str) else r.json["error"]["message"]
                named = ".".join(str(p) for p in field if not isinstance(p, int) and p != "customData")
                assert named.split(".")[-1] in message or (kind == "key" and "campaigns" in message), (
                    path, field, message)
                checked += 1
    assert snapshot(services) == before  # nothing stored by any of them
    assert checked > 150


async def test_u0000_in_any_path_or_query_parameter_is_a_4xx_naming_it_never_a_500(api, services, account):
    """On PostgreSQL a lookup of an id with U+0000 was a 500 (its text cannot hold one): a path part with it
    names nothing (404), a query parameter with it is a 400 naming the parameter."""
    before = snapshot(services)
    probed = 0
    for path, item in build_document(routes())["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "patch", "put", "delete"):
                continue
            params = op.get("parameters", []) + item.get("parameters", [])
            url = path
            for param in params:
                if param["in"] == "path":
                    url = url.replace("{" + param["name"] + "}", "x%00y")
            body = {} if method in ("post", "patch", "put") else None
            if url != path:
                r = await api.call(method.upper(), url, body, key=account["api_key"], query_key=False)
                assert r.code == 404, (method, url, r.code, r.body)
                probed += 1
            for param in params:
                if param["in"] == "query" and param["name"] != "apiKey":
                    r = await api.call(method.upper(), f"{path}?{param['name']}=a%00b", body,
                                       key=account["api_key"], query_key=False)
                    assert 400 <= r.code < 500, (method, path, param["name"], r.code, r.body)
                    if r.code == 400:
                        assert param["name"] in r.json["error"]["message"], (path, r.json)
                    probed += 1
    assert snapshot(services) == before
    assert probed > 30, probed


async def test_the_baselines_are_accepted_with_newlines_and_tabs_in_free_text(api, world, account, agency, sub):
    """So that the refusals above come from the control characters alone; message bodies keep theirs."""
    for method, path in operations_with_a_body():
        url, key, body = call_args(method, path, world, account, agency, sub)
        if body is not None and (method, path) not in ANSWERED_ONLY_WHEN_ASKED:
            r = await api.call(method, url, body, key=key, query_key=False)
            assert 200 <= r.code < 300, (method, path, r.code, r.body)
            if path == "/v1/incoming_custom_channel_message":
                message = await api.get(f"/v1/messages/{r.json['messageId']}", key=key)
                assert message.json["body"] == "Hi!\n\tPrices?"


async def test_the_scanners_campaign_key_is_400_and_not_stored(api, account):
    r = await api.patch("/v1/account/settings", {"bot": {"campaigns": {"probe\nline2": {"greeting": "x"}}}},
                        key=account["api_key"])
    assert r.code == 400
    assert r.json["error"]["message"] == ("bot.campaigns.probe\\nline2: must not contain control characters "
                                          "(U+000A)")
    assert (await api.get("/v1/account", key=account["api_key"])).json["settings"].get("bot") is None


# --- every UI form -----------------------------------------------------------------------------------

class _Forms(HTMLParser):
    """The POST forms of a page: [(action, {field: default value})]."""

    def __init__(self):
        super().__init__()
        self.forms, self._fields = [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and (attrs.get("method") or "").lower() == "post":
            self._fields = {}
            self.forms.append((attrs.get("action"), self._fields))
        elif self._fields is not None and tag in ("input", "textarea", "select") and attrs.get("name"):
            if attrs.get("type") not in ("checkbox", "radio", "file", "submit") or attrs.get("checked") is not None:
                self._fields.setdefault(attrs["name"], attrs.get("value") or "")

    def handle_endtag(self, tag):
        if tag == "form":
            self._fields = None


UI_FREE_TEXT = {"body", "greeting", "fallback", "provider-systemPrompt", "description", "next", "password",
                "current_password", "new_password", "new_password_again", "comment"}


async def forms_of(client, pages):
    found = {}
    for page in pages:
        r = await client.get(page)
        assert r.code == 200, (page, r.code)
        parser = _Forms()
        parser.feed(r.text)
        for action, fields in parser.forms:
            found.setdefault(action or page, fields)
    return found


async def test_every_field_of_every_ui_form_refuses_control_characters(
        api, services, signed_in, ui_account, ui_agency, agency_browser):
    key = ui_account["api_key"]
    await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "http://127.0.0.1:9/hook"}, key=key)
    contact = (await api.post("/v1/contacts", {"email": "c@example.com"}, key=key)).json["id"]
    lst = (await api.post("/v1/lists", {"name": "L"}, key=key)).json["id"]
    await api.post(f"/v1/lists/{lst}/contacts", {"contactId": contact}, key=key)
    campaign = (await api.post("/v1/campaigns", {"name": "C", "listId": lst, "body": "b",
                                                 "startAt": "2030-01-01T00:00:00Z"}, key=key)).json["id"]
    await api.patch("/v1/account/settings", {"bot": {"campaigns": {"spring": {"greeting": "x"}}}}, key=key)
    sub = (await api.post("/v1/subaccounts", {"name": "S", "email": "s@example.com"},
                          key=ui_agency["api_key"])).json["id"]
    forms = {client: await forms_of(client, pages) for client, pages in (
        (signed_in, ["/settings", "/contacts", f"/contacts/{contact}", "/lists", f"/lists/{lst}", "/campaigns",
                     f"/campaigns/{campaign}", "/bot", "/inbox", f"/inbox/{contact}", "/contacts/import"]),
        (agency_browser, ["/agency", f"/agency/subaccounts/{sub}"]))}
    before = snapshot(services)
    probed = set()
    for client, found in forms.items():
        for action, fields in found.items():
            for name in fields:
                if name == "_xsrf" or "password" in name:  # hashed, never stored as text
                    continue
                free_text = name in UI_FREE_TEXT or name.endswith("-answer")
                for char in (["\x00"] if free_text else ["\n", "\x85"]):
                    form = {**fields, name: (fields[name] or "probe")[:1] + char + "line2"}
                    form.pop("_xsrf", None)
                    r = await client.post(action, form)
                    assert 400 <= r.code < 500, (action, name, repr(char), r.code)
                    assert name in r.text, (action, name)
                    probed.add((action, name))
    assert snapshot(services) == before
    assert ("/bot/campaign", "campaignId") in probed and ("/contacts", "firstName") in probed
    assert any(name == "body" for _, name in probed)  # free text was probed with U+0000
    assert len(probed) > 30, sorted(probed)
