"""An inbox that campaigns don't bury (issue 25 §4): the default view is "Needs reply" (the contact wrote last,
or a handoff waits), newest first; a campaign's send alone puts nothing there, only in "All" and in that
campaign's filter, until the contact answers. Each view's count is on its tab (and in every refreshed list)."""
import json
import re

from tests.campaign_helpers import create, make_list, people, run_all, set_webhook
from tests.bot_helpers import configure, say
from tests.inbound_helpers import inbound
from tests.ui_helpers import link_ids


def counts(html):
    return json.loads(re.search(r'id="view-counts" data-counts="([^"]*)"', html).group(1).replace("&#34;", '"'))


async def test_campaign_sends_stay_out_of_needs_reply_until_the_contact_answers(api, services, signed_in, ui_account,
                                                                                receiver, runner):
    account_id = ui_account["account_id"]
    await set_webhook(api, ui_account, receiver.url)
    list_id, (ann, bea) = await make_list(services, ui_account, people(2))
    walk_in = await inbound(services, account_id, "+14155559999", "Do you open on Sunday?")
    created = await create(api, ui_account, list_id)
    assert created.code == 201, created.body
    campaign_id = created.json["id"]
    await run_all(runner)

    page = (await signed_in.get("/inbox")).text  # the default view
    assert 'data-view="needs_reply" aria-current="page"' in page
    assert link_ids(page, "ct") == [walk_in["contact_id"]]
    assert counts(page) == {"all": 3, "needs_reply": 1, "unread": 1, "failed": 0, "paused": 0, "handed_off": 0,
                            "mine": 0, "unassigned": 1, "resolved": 0, "snoozed": 0, "due_soon": 0}  # issue 21's views
    # Unassigned waits for the contact to write (issue 43 §8: after a campaign it read every recipient).
    assert link_ids((await signed_in.get("/inbox?filter=unassigned")).text, "ct") == [walk_in["contact_id"]]
    assert set(link_ids((await signed_in.get("/inbox?filter=all")).text, "ct")) == {walk_in["contact_id"], ann, bea}
    of_campaign = (await signed_in.get(f"/inbox/conversations?filter=all&campaign={campaign_id}")).text
    assert set(link_ids(of_campaign, "ct")) == {ann, bea} and counts(of_campaign)["all"] == 2

    answer = await inbound(services, account_id, "+14155550001", "Yes please!")  # Bea (people(2)[1]) answers
    listed = (await signed_in.get("/inbox/conversations")).text
    assert link_ids(listed, "ct") == [answer["contact_id"], walk_in["contact_id"]]  # newest customer message first
    assert counts(listed)["needs_reply"] == 2 and counts(listed)["unassigned"] == 2
    assert (await signed_in.get("/inbox/conversations?campaign=cmp_of_nobody&filter=all")).code == 200
    assert link_ids((await signed_in.get("/inbox/conversations?campaign=cmp_of_nobody&filter=all")).text, "ct") == []


async def test_keyword_replies_stay_out_and_a_handoff_is_marked_and_has_its_tab(api, services, signed_in, ui_account,
                                                                               receiver, runner):
    """Issue 43 §8: STOP and START answers to a campaign opt the contact out and in, and ask nobody for a reply
    (neither Needs reply nor Unassigned); a handoff, which ends with the bot's own message, is marked "Handed
    off" (list and thread) and has its tab, which the navigation's "Needs a person" opens."""
    account_id, key = ui_account["account_id"], ui_account["api_key"]
    await set_webhook(api, ui_account, receiver.url)
    list_id, (ann, bea) = await make_list(services, ui_account, people(2))
    assert (await create(api, ui_account, list_id)).code == 201
    await run_all(runner)
    await inbound(services, account_id, "+14155550000", " stop ")  # Ann (people(2)[0])
    await inbound(services, account_id, "+14155550001", "STOP")
    await inbound(services, account_id, "+14155550001", "Start")
    page = (await signed_in.get("/inbox")).text
    assert (counts(page)["needs_reply"], counts(page)["unassigned"], counts(page)["all"]) == (0, 0, 2)
    assert link_ids(page, "ct") == []
    assert "opt-out or opt-in keyword replies" in page

    await configure(api, key, {"active": True, "handoffKeywords": ["human"]}, webhook=receiver.url)
    handoff = await say(api, services, key, "a human please", fromId="+14155550001")  # Bea again
    assert handoff["bot"] is not None, handoff
    assert handoff["bot"]["outcome"] == "handoff" and handoff["contactId"] == bea
    page = (await signed_in.get("/inbox?filter=handed_off")).text
    assert 'data-view="handed_off" aria-current="page"' in page and link_ids(page, "ct") == [bea]
    row = page[page.index(f'data-contact="{bea}"'):]
    row = row[:row.index("</li>")]
    assert "Handed off" in row and "Bot: </span>Thanks! A person will answer here soon." in row
    assert (counts(page)["handed_off"], counts(page)["needs_reply"], counts(page)["unassigned"]) == (1, 1, 1)
    assert 'id="needs-person" class="badge" href="/inbox?filter=handed_off"' in page
    thread = (await signed_in.get(f"/inbox/{bea}")).text
    assert 'id="handed-off"' in thread and "Handed off: waiting for a person" in thread
    # A person's reply ends the handoff: the marker and the tab's entry go.
    r = await signed_in.post(f"/inbox/{bea}/reply", {"body": "A person here."})
    assert r.code in (200, 204, 303), r.body
    page = (await signed_in.get("/inbox?filter=handed_off")).text
    assert counts(page)["handed_off"] == 0 and link_ids(page, "ct") == []
    assert 'id="handed-off"' not in (await signed_in.get(f"/inbox/{bea}")).text


async def test_the_live_pages_fetches_are_not_logged_at_info_per_event(api, services, signed_in, ui_account, caplog):
    """Issue 37: what a live page fetches when an event arrives (the list, a thread's new messages, its state)
    is logged at DEBUG; pages and actions stay at INFO, refusals at WARNING."""
    import logging
    message = await inbound(services, ui_account["account_id"], body="a live message")
    contact_id = message["contact_id"]
    fragments = ["/inbox/conversations?filter=all", f"/inbox/{contact_id}/messages?after=",
                 f"/inbox/{contact_id}/messages/{message['id']}", f"/inbox/{contact_id}/state",
                 f"/inbox/{contact_id}/bot"]
    with caplog.at_level(logging.DEBUG, logger="parley.access"):
        for path in fragments + ["/settings", "/inbox/conversations?before=bad%20cursor"]:
            await signed_in.get(path)
    levels = {record.getMessage().split(" ")[2].split("?")[0]: record.levelname for record in caplog.records
              if record.name == "parley.access"}
    assert {path.split("?")[0]: levels.get(path.split("?")[0]) for path in fragments} == {
        path.split("?")[0]: "DEBUG" for path in fragments}, levels
    assert levels["/settings"] == "INFO"
