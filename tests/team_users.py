"""A second UI user in an account, made the way an account makes one: invited with the role asked for
(services.users.invite, what POST /v1/users runs), then the invite link redeemed with a password (what the
/invite/<token> page runs). In-process (add_user) and against a running server over HTTPS (add_user_to_server).
The role is the caller's to say: a user written straight into the table used to get the column's default,
admin, whatever the test meant."""
from services import accounts, one_time_links, users
from tests.parley_process import use_link
from tests.ui_helpers import FormClient

PASSWORD = "correct horse battery staple"


async def add_user(services, account_id, email, password=PASSWORD, *, role="agent"):
    """The new user's id, signed-in-able with password."""
    invited = await users.invite(services.db, services.box, services.settings.base_url, account_id, email=email,
                                 role=role, by=None, actor_role=users.API_KEY_ROLE)
    token = invited["signInUrl"].rsplit("/", 1)[1]
    await one_time_links.redeem(services.db, token, "invite", password, accounts.MIN_PASSWORD, accounts.MAX_PASSWORD)
    return invited["id"]


def add_user_to_server(parley, api_key, email, password, *, role="agent"):
    """parley: a running tests.parley_process.ParleyProcess; through POST /v1/users and the invite link."""
    with parley.client() as client:
        r = client.post("/v1/users", params={"apiKey": api_key}, json={"email": email, "role": role})
        assert r.status_code == 201, r.text
        response = use_link(client, r.json()["signInUrl"], password)
        assert response.status_code in (200, 303), response.text
        return r.json()["id"]


NEW_PASSWORD = "a long enough password"


async def invite(api, key, email, role="agent", name=None):
    """POST /v1/users: the invitation as the API answers it."""
    body = {"email": email, "role": role, **({"name": name} if name else {})}
    r = await api.post("/v1/users", body, key=key)
    assert r.code == 201, r.body
    return r.json


async def accept(client, url, password=NEW_PASSWORD):
    """The invitee opens the link and chooses a password: signed in."""
    browser = FormClient(client)
    path = url[url.index("/invite/"):]
    assert (await browser.get(path)).code == 200
    r = await browser.post(path, {"password": password, "password_again": password})
    assert r.code == 303, r.text
    return browser
