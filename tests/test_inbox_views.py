"""An inbox that campaigns don't bury (issue 25 §4): the default view is "Needs reply" (the contact wrote last,
or a handoff waits), newest first; a campaign's send alone puts nothing there, only in "All" and in that
campaign's filter, until the contact answers. Each view's count is on its tab (and in every refreshed list)."""
import json
import re

from tests.test_campaigns import create, make_list, people, run_all, runner, set_webhook  # noqa: F401
from tests.test_delivery import receiver  # noqa: F401 (fixture)
from tests.test_inbox import inbound, link_ids


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
    assert counts(page) == {"all": 3, "needs_reply": 1, "unread": 1, "failed": 0, "paused": 0,
                            "mine": 0, "unassigned": 3, "resolved": 0, "snoozed": 0}  # issue 21's views
    assert set(link_ids((await signed_in.get("/inbox?filter=all")).text, "ct")) == {walk_in["contact_id"], ann, bea}
    of_campaign = (await signed_in.get(f"/inbox/conversations?filter=all&campaign={campaign_id}")).text
    assert set(link_ids(of_campaign, "ct")) == {ann, bea} and counts(of_campaign)["all"] == 2

    answer = await inbound(services, account_id, "+14155550001", "Yes please!")  # Bea (people(2)[1]) answers
    listed = (await signed_in.get("/inbox/conversations")).text
    assert link_ids(listed, "ct") == [answer["contact_id"], walk_in["contact_id"]]  # newest customer message first
    assert counts(listed)["needs_reply"] == 2
    assert (await signed_in.get("/inbox/conversations?campaign=cmp_of_nobody&filter=all")).code == 200
    assert link_ids((await signed_in.get("/inbox/conversations?campaign=cmp_of_nobody&filter=all")).text, "ct") == []
