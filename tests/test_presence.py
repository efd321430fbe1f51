"""Presence (issue 21): a thread page says over its live socket which conversation it shows; the account's
other pages on it are told who is there, and told again when someone leaves or closes. Never across accounts.
In-process over real WebSockets."""
import json

from services.presence import viewing_message
from tests.team_users import add_user
from tests.live_helpers import Socket
from tests.ui_helpers import FormClient

THREAD = "ct_0000000000000000000000000a"


async def _viewing(socket, contact_id):
    await socket.connection.write_message(json.dumps({"type": "viewing", "contactId": contact_id}))


async def _presence(socket):
    return await socket.until(lambda frame: frame["type"] == "presence")


async def test_two_people_on_one_thread_see_each_other_and_see_the_other_go(services, http_server_client, signed_in_as):
    acme, alice_client = await signed_in_as("alice@acme.example")
    await add_user(services, acme["account_id"], "bob@acme.example")
    bob_client = FormClient(http_server_client)
    assert (await bob_client.login("bob@acme.example")).code == 303
    _, eve_client = await signed_in_as("eve@other.example")
    alice, bob, eve = [await Socket.open(http_server_client, c.cookies, 0) for c in (alice_client, bob_client, eve_client)]
    for socket in (alice, bob, eve):
        assert await socket.next() == {"type": "ready"}

    await alice.connection.write_message("not json")  # ignored, as any other message
    await _viewing(alice, THREAD)
    assert await _presence(alice) == {"type": "presence", "contactId": THREAD, "viewers": []}
    await _viewing(bob, THREAD)
    assert (await _presence(bob))["viewers"] == ["alice@acme.example"]
    assert (await _presence(alice))["viewers"] == ["bob@acme.example"]

    # Another account's page naming the same id is alone there, and nobody of Acme hears of it.
    await _viewing(eve, THREAD)
    assert (await _presence(eve))["viewers"] == []

    await _viewing(bob, None)  # bob opened another page: alice is told he left
    assert (await _presence(alice))["viewers"] == []
    await _viewing(bob, THREAD)
    assert (await _presence(alice))["viewers"] == ["bob@acme.example"]
    bob.close()  # his tab closed
    assert (await _presence(alice))["viewers"] == []
    assert all("eve@" not in json.dumps(frame) for frame in alice.frames + bob.frames)
    assert [f for f in eve.frames if f["type"] == "presence"] == [
        {"type": "presence", "contactId": THREAD, "viewers": []}]
    alice.close()
    eve.close()


def test_a_page_may_say_only_which_contact_it_shows():
    assert viewing_message('{"type":"viewing","contactId":"ct_01abc"}') == "ct_01abc"
    assert viewing_message('{"type":"viewing","contactId":null}') is None
    for bad in ('{"type":"viewing","contactId":"../x"}', '{"type":"other"}', "[]", "x" * 300,
                '{"type":"viewing","contactId":7}'):
        try:
            viewing_message(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


async def test_presence_names_the_viewers_by_name(services, http_server_client, signed_in_as):
    """Issue 43 §3: a viewer who gave a name is shown by it, one who did not by their email."""
    acme, olive_client = await signed_in_as("olive@acme.example")
    assert (await olive_client.post("/settings/profile", {"name": "Olive Baker", "email": "olive@acme.example",
                                                          "current_password": ""})).code == 303
    await add_user(services, acme["account_id"], "sam@acme.example")  # no name: shown by email
    sam_client = FormClient(http_server_client)
    assert (await sam_client.login("sam@acme.example")).code == 303
    olive, sam = [await Socket.open(http_server_client, c.cookies, 0) for c in (olive_client, sam_client)]
    for socket in (olive, sam):
        assert await socket.next() == {"type": "ready"}
    for socket in (olive, sam):
        await socket.connection.write_message(json.dumps({"type": "viewing", "contactId": THREAD}))
    assert (await sam.until(lambda f: f["type"] == "presence" and f["viewers"]))["viewers"] == ["Olive Baker"]
    assert (await olive.until(lambda f: f["type"] == "presence" and f["viewers"]))["viewers"] == ["sam@acme.example"]
    olive.close()
    sam.close()
