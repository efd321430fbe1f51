"""A sub-account sees its credits (issue 25 §5): the balance in the navigation of every page, a Credits page
with its history, and a banner at 0 ("the bot is not answering: no credits") or below the auto-recharge
threshold. Other accounts have no Credits page. In-process with a cookie-keeping client."""
from services import accounts, credits, subaccounts
from tests.ui_helpers import PASSWORD, FormClient


async def test_a_sub_account_sees_its_balance_history_and_banners(services, http_server_client, ui_agency):
    sub = await accounts.create_account(services.db, services.box, services.keys, name="Rossi Ltd",
                                        email="rossi@client.example", agency_email=ui_agency["email"],
                                        password=PASSWORD)
    client = FormClient(http_server_client)
    assert (await client.login(sub["email"])).code == 303
    page = (await client.get("/settings")).text
    assert 'id="nav-credits"' in page and "Credits:\n        0</a>" in page
    assert "The bot is not answering: no credits." in page
    await credits.grant_credits(services.db, ui_agency["account_id"], "agency", email=sub["email"], amount=5,
                                description="welcome")
    page = (await client.get("/inbox")).text
    assert "Credits:\n        5</a>" in page and 'id="credits-banner"' not in page
    await subaccounts.set_auto_recharge(services.db, ui_agency["account_id"], "agency", sub["account_id"],
                                        {"threshold": 10, "amount": 20})
    page = (await client.get("/credits")).text
    assert "Credits are low:</strong> 5 left, below the auto-recharge threshold of\n    10." in page
    assert "welcome" in page and "Below 10: ask for 20" in page


async def test_only_sub_accounts_have_a_credits_page(signed_in, agency_browser):
    for browser_ in (signed_in, agency_browser):
        assert (await browser_.get("/credits")).code == 404
        assert 'id="nav-credits"' not in (await browser_.get("/settings")).text


async def test_the_agency_views_a_sub_account_without_its_password(services, http_server_client, agency_browser,
                                                                   ui_agency):
    """Every page says "Viewing as …: back to the agency" and is the sub-account's; the agency's own session is
    not changed (back, it is the agency again); another agency's sub-account cannot be viewed."""
    sub = await accounts.create_account(services.db, services.box, services.keys, name="Rossi Ltd",
                                        email="rossi@client.example", agency_email=ui_agency["email"],
                                        password=PASSWORD)
    other_agency = await accounts.create_account(services.db, services.box, services.keys, name="Other",
                                                 email="boss@other.example", account_type="agency", password=PASSWORD)
    theirs = await accounts.create_account(services.db, services.box, services.keys, name="Theirs",
                                           email="theirs@client.example", agency_email=other_agency["email"],
                                           password=PASSWORD)
    assert (await agency_browser.post(f"/agency/subaccounts/{theirs['account_id']}/view-as")).code == 404
    r = await agency_browser.post(f"/agency/subaccounts/{sub['account_id']}/view-as")
    assert (r.code, r.headers["Location"]) == (303, "/inbox")
    page = (await agency_browser.get("/settings")).text
    assert "Viewing as <strong>Rossi Ltd</strong>" in page and "back to the agency" in page
    assert "rossi@client.example" in page and sub["account_id"] in page and 'id="nav-credits"' in page
    assert (await agency_browser.get("/agency")).code == 404  # the sub-account's UI, not the agency's
    r = await agency_browser.post("/view-as/end")
    assert (r.code, r.headers["Location"]) == (303, f"/agency/subaccounts/{sub['account_id']}")
    page = (await agency_browser.get("/settings")).text
    assert "Viewing as" not in page and ui_agency["account_id"] in page
    # The view-as cookie alone (no agency session beside it) opens nothing.
    r = await agency_browser.post(f"/agency/subaccounts/{sub['account_id']}/view-as")
    stolen = FormClient(http_server_client)
    stolen.cookies = {"parley_view_as": agency_browser.cookies["parley_view_as"]}
    assert (await stolen.get("/settings")).code == 302
