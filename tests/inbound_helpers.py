"""Messages arriving, for tests of other modules too (issue 40's tests/test_layout.py rule: no test module imports
another): inbound() in-process through the service, post_inbound() and contact_of() against a running server, and
the browser's wait_live() (and ui_helpers' wait_until(), which it uses)."""
import time

from services import messaging
from tests.ui_helpers import wait_until

INBOUND = "/v1/incoming_custom_channel_message"
_sids = iter(range(1, 1_000_000))
_e2e_sids = iter(range(1, 1_000_000))


async def inbound(services, account_id, from_id="+14155552671", body="Hello", **kw):
    message, _ = await messaging.receive_inbound(services, account_id, message_sid=f"inbox-sid-{next(_sids)}",
                                                 from_id=from_id, to_id="shop", body=body, **kw)
    return message


def post_inbound(parley, body, from_id="+14155552671", key=None, **custom):
    """POST an inbound message; returns (messageId, the time of the 200 in ms since the epoch). The time it
    was sent is kept in post_inbound.sent."""
    with parley.client() as api:
        post_inbound.sent = time.time() * 1000
        response = api.post(INBOUND, params={"apiKey": key or parley.first_run["api_key"]},
                            json={"customData": {"messageSid": f"e2e-{next(_e2e_sids)}", "fromId": from_id, "toId": "shop",
                                                 "body": body, "channel": "webchat", **custom}})
        answered = time.time() * 1000
    assert response.status_code == 200, response.text
    return response.json()["messageId"], answered


def contact_of(parley, message_id, key=None):
    with parley.client() as api:
        return api.get(f"/v1/messages/{message_id}", params={"apiKey": key or parley.first_run["api_key"]}
                       ).json()["contactId"]


def wait_live(page):
    wait_until(page, "!!(window.Parley && window.Parley.live && window.Parley.live.state === 'live')")
