"""Fixtures of the UI tests, for every test module (registered in tests/conftest.py's pytest_plugins): an account
whose owner can sign in, an in-process form client signed in or not, the real headless Chromium and a page, the
real server of a module's end-to-end tests and a receiver of its webhooks."""
import pytest

from services import accounts
from tests.inbound_helpers import inbound
from tests.live_helpers import ui_user
from tests.parley_process import ParleyProcess, first_run_receiver
from tests.ui_helpers import CHROMIUM, CHROMIUM_ARGS, PASSWORD, FormClient, open_page, signed_in_client


@pytest.fixture
def ui_account(io_loop, services):
    """An account with an owner user who can sign in."""
    return io_loop.run_sync(lambda: accounts.create_account(
        services.db, services.box, services.keys, name="Acme <script>alert(1)</script>",
        email="owner@acme.example", password=PASSWORD))


@pytest.fixture
def browser(http_server_client):
    return FormClient(http_server_client)


@pytest.fixture
def signed_in(io_loop, browser, ui_account):
    response = io_loop.run_sync(lambda: browser.login(ui_account["email"]))
    assert response.code == 303, response.text
    return browser



@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright  # the test extra; Chromium is Debian's (.ci/run)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()



@pytest.fixture(scope="module")
def parley(request, tmp_path_factory):
    """The real server.py over HTTPS for a module's end-to-end tests (its data directory named after the module),
    started with --allow-private-webhooks so that its accounts may post to a receiver on this machine. A module
    whose server needs other options defines a `parley` of its own, which pytest then gives its tests."""
    name = request.module.__name__.rpartition(".")[2]
    with ParleyProcess(tmp_path_factory.mktemp(name) / "data", "--allow-private-webhooks") as process:
        yield process


@pytest.fixture(scope="module")
def e2e_receiver(parley):
    """A local receiver, the Custom Channel Webhook of the module's server's first-run account."""
    with first_run_receiver(parley) as receiver:
        yield receiver


@pytest.fixture
def page(chromium):
    context, page = open_page(chromium)
    yield page
    context.close()


@pytest.fixture
def other(io_loop, services):
    """A second account with a user and a conversation: its ids must be 404 to the first one's session."""
    async def make():
        account = await accounts.create_account(services.db, services.box, services.keys, name="Other",
                                                email="owner@other.example", password=PASSWORD)
        message = await inbound(services, account["account_id"], from_id="+14155550000", body="theirs")
        return {**account, "contact_id": message["contact_id"], "message_id": message["id"]}
    return io_loop.run_sync(make)


@pytest.fixture
def signed_in_as(io_loop, services, http_server_client):
    """signed_in_as(email) -> (a new account whose owner has that email, a FormClient signed in as them)."""
    async def make(email):
        account = await ui_user(services, email)
        client = FormClient(http_server_client)
        response = await client.login(email)
        assert response.code == 303, response.text
        return account, client
    return make


@pytest.fixture
def ui_agency(io_loop, services):
    """An agency account whose owner can sign in."""
    return io_loop.run_sync(lambda: accounts.create_account(
        services.db, services.box, services.keys, name="Agency", email="boss@agency.example",
        account_type="agency", password=PASSWORD))


@pytest.fixture
def agency_browser(io_loop, http_server_client, ui_agency):
    """A form client signed in as the agency's owner."""
    return signed_in_client(io_loop, http_server_client, ui_agency["email"])


@pytest.fixture
def theirs(make_account):
    """A sub-account of another agency."""
    return make_account(agency_email=make_account("agency")["email"])
