"""Campaigns in tests: a list of people, the API calls that make and read a campaign, and the runner and delivery
worker driven until nothing is left (for tests/test_campaigns.py and every test that runs a campaign)."""
from common.ids import now_iso, utcnow
from services import contacts, lists
from storage import campaigns as campaign_store


async def make_list(services, account, people, name="Leads"):
    """A list of this account with a contact per {firstName, lastName, phone, email}; returns (list id, ids)."""
    account_id = account["account_id"]
    lst = await lists.create_list(services.db, account_id, name)
    ids = []
    for person in people:
        contact, _ = await contacts.create_contact(services.db, account_id, **person)
        await lists.add_contact(services.db, account_id, lst["id"], contact["id"])
        ids.append(contact["id"])
    return lst["id"], ids


def people(n, start=0):
    return [{"first_name": f"Ann{i}", "last_name": f"Lee{i}", "phone": f"+1415555{i:04d}",
             "email": f"ann{i}@example.com"} for i in range(start, start + n)]


async def set_webhook(api, account, url):
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": url}, key=account["api_key"])
    assert r.code == 200, r.body


async def create(api, account, list_id, **fields):
    body = {"name": "Spring", "listId": list_id, "body": "Hi {{firstName}} {{ lastName }}!", **fields}
    return await api.post("/v1/campaigns", body, key=account["api_key"])


async def campaign(api, account, campaign_id):
    r = await api.get(f"/v1/campaigns/{campaign_id}", key=account["api_key"])
    assert r.code == 200, r.body
    return r.json


async def run_all(runner, seconds=1000.0):
    """Let the runner's clock pass and run rounds until nothing is left to hand over."""
    for _ in range(1000):
        runner.clock_state["now"] += seconds
        await runner.step()
        active = await campaign_store.due_campaigns(runner.services.db, now_iso())
        if not active:
            return
    raise AssertionError("the runner did not finish")


async def deliver_all(worker, now=None):
    """Delivery rounds until nothing is due (a round starts at most per-account-concurrency attempts)."""
    total = 0
    while n := await worker.run_due(now or utcnow()):
        total += n
    return total


async def recipients(api, account, campaign_id, **query):
    path = f"/v1/campaigns/{campaign_id}/recipients?limit=200" + "".join(f"&{k}={v}" for k, v in query.items())
    r = await api.get(path, key=account["api_key"])
    assert r.code == 200, r.body
    return r.json["data"]


def assert_counts_add_up(c):
    counts = c["counts"]
    assert counts["total"] == sum(v for k, v in counts.items() if k != "total"), counts


def recipient_statuses(cx, campaign_id):
    """The campaign's recipients counted by status (every status, 0 when none)."""
    counts = dict.fromkeys(campaign_store.RECIPIENT_STATUSES, 0)
    for status, n in cx.execute("SELECT status, COUNT(*) FROM campaign_recipients WHERE campaign_id = ?"
                                " GROUP BY status", (campaign_id,)):
        counts[status] = n
    return counts


async def api_campaigns(api, account):
    return (await api.get("/v1/campaigns?limit=200", key=account["api_key"])).json["data"]


def campaign_form(list_id, **fields):
    """The create form as the page sends it (every field, empty when not typed)."""
    return {"name": "Spring sale", "listId": list_id, "body": "Hi {{firstName}}, the sale is on!", "campaignId": "",
            "channel": "", "startAt": "", "startAtUtc": "", "ratePerMinute": "600", "idempotencyKey": "", **fields}
