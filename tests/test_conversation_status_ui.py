"""The inbox's status and assignee actions in the UI (issue 21), in-process with a cookie-keeping client: the
thread's forms (work without a script: 303 back), the list's badges, checkboxes and bulk bar, the views, bad
input changing nothing, and another account's conversations out of reach."""
import re

from storage.db import fetch_all, reads
from tests.team_users import add_user
from tests.inbound_helpers import inbound
from tests.ui_helpers import link_ids


@reads
def _state(cx, contact_id):
    return fetch_all(cx, "SELECT status, snoozed_until, assignee_user_id FROM conversations WHERE contact_id = ?",
                     (contact_id,))[0]


async def _two(services, ui_account):
    account_id = ui_account["account_id"]
    ann = await inbound(services, account_id, "+14155550001", "Hi, Ann here", first_name="Ann")
    ben = await inbound(services, account_id, "+14155550002", "Hi, Ben here", first_name="Ben")
    bob = await add_user(services, account_id, "bob@acme.example")
    return ann["contact_id"], ben["contact_id"], bob


async def test_thread_forms_assign_resolve_snooze_and_reopen(signed_in, services, ui_account):
    ann, _, bob = await _two(services, ui_account)
    page = (await signed_in.get(f"/inbox/{ann}")).text
    assert 'class="badge status-open">Open<' in page and "Unassigned" in page
    assert f'<option value="{bob}">bob@acme.example</option>' in page and "owner@acme.example (me)" in page

    r = await signed_in.post(f"/inbox/{ann}/state", {"action": "assign", "assignee": bob})
    assert (r.code, r.headers["Location"]) == (303, f"/inbox/{ann}")
    assert (await _state(services.db, ann))["assignee_user_id"] == bob
    fragment = (await signed_in.get(f"/inbox/{ann}/state")).text
    assert "Assigned to <strong>bob@acme.example</strong>" in fragment
    assert (await signed_in.post(f"/inbox/{ann}/state", {"action": "resolve"})).code == 303
    assert (await _state(services.db, ann))["status"] == "resolved"
    assert "Reopen" in (await signed_in.get(f"/inbox/{ann}/state")).text
    r = await signed_in.post(f"/inbox/{ann}/state", {"action": "snooze", "snooze": "tomorrow", "utc_offset": "120"})
    assert r.code == 303
    state = await _state(services.db, ann)
    assert state["status"] == "snoozed" and state["snoozed_until"][11:16] == "07:00"  # 9:00 at UTC+2
    assert (await signed_in.post(f"/inbox/{ann}/state", {"action": "assign", "assignee": ""})).code == 303
    assert (await _state(services.db, ann))["assignee_user_id"] is None


async def test_bad_actions_and_another_accounts_ids_change_nothing(signed_in, services, ui_account, other):
    ann, _, _ = await _two(services, ui_account)
    before = await _state(services.db, ann)
    for form, field in (({"action": "close"}, "action"), ({"action": "snooze", "snooze": "someday"}, "snooze"),
                        ({"action": "assign", "assignee": "usr_nobody"}, "assigneeUserId"),
                        ({"action": "resolve", "utc_offset": "x"}, "utc_offset")):
        r = await signed_in.post(f"/inbox/{ann}/state", form)
        assert r.code == 400 and field in r.text, (form, r.code)
        r = await signed_in.post(f"/inbox/{ann}/state", form, headers={"Accept": "application/json"})
        assert r.code == 400 and field in r.text
    assert await _state(services.db, ann) == before
    theirs = other["contact_id"]
    assert (await signed_in.get(f"/inbox/{theirs}/state")).code == 404
    assert (await signed_in.post(f"/inbox/{theirs}/state", {"action": "resolve"})).code == 404
    assert (await signed_in.post("/inbox/bulk", {"contact": [ann, theirs], "action": "resolve"})).code == 404
    assert await _state(services.db, theirs) == {"status": "open", "snoozed_until": None, "assignee_user_id": None}
    assert await _state(services.db, ann) == before


async def test_the_list_ticks_conversations_and_changes_them_in_bulk(signed_in, services, ui_account):
    ann, ben, bob = await _two(services, ui_account)
    page = (await signed_in.get("/inbox?filter=all")).text
    assert f'name="contact" value="{ann}" form="bulk"' in page and 'id="bulk"' in page
    assert f'<option value="assign:{bob}">Assign to bob@acme.example</option>' in page

    r = await signed_in.post("/inbox/bulk", {"contact": [ann, ben], "action": f"assign:{bob}",
                                             "next": "/inbox?filter=unassigned"})
    assert (r.code, r.headers["Location"]) == (303, "/inbox?filter=unassigned")
    assert "2 conversation(s) updated." in (await signed_in.get("/inbox?filter=unassigned")).text
    assert [(await _state(services.db, c))["assignee_user_id"] for c in (ann, ben)] == [bob, bob]
    listed = (await signed_in.get("/inbox/conversations?filter=all")).text
    assert listed.count('class="badge badge-assignee" title="Assignee">bob@acme.example<') == 2
    assert link_ids((await signed_in.get("/inbox/conversations?filter=mine")).text, "ct") == []  # mine: owner's

    await signed_in.post("/inbox/bulk", {"contact": [ann], "action": "resolve"})
    assert link_ids((await signed_in.get("/inbox/conversations?filter=resolved")).text, "ct") == [ann]
    assert 'status-resolved">Resolved' in (await signed_in.get("/inbox/conversations?filter=all")).text

    r = await signed_in.post("/inbox/bulk", {"action": "resolve", "next": "/inbox"})  # nothing ticked
    assert r.code == 303 and "choose at least one conversation" in (await signed_in.get("/inbox")).text
    r = await signed_in.post("/inbox/bulk", {"contact": [ben], "action": "resolve", "next": "https://evil.example/"})
    assert r.headers["Location"] == "/inbox"  # only a path of this site
    counts = re.search(r'data-counts="([^"]*)"', (await signed_in.get("/inbox")).text).group(1)
    assert "&#34;resolved&#34;: 2" in counts
