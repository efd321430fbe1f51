"""Request bodies (issue 9, "unauthenticated memory amplification"): every refusal (method, key, rate
limit, size) comes before a byte of the body is read; each route has its own limit; the bytes held in
memory across all connections are bounded; the mechanism streams to a file too (for large uploads)."""
import asyncio
import base64
import hashlib
import json
import os

import pytest

from handlers.base import BaseHandler
from handlers.bodies import FileBody
from settings import Settings
from tests.raw_http_helpers import MB, Raw, head

INBOUND = "/v1/incoming_custom_channel_message"


# A small memory budget (two 1.2 MB bodies do not fit at once) and the usual 1 MB JSON limit.
pytestmark = pytest.mark.settings(max_buffered_body_bytes=2 * MB)


@pytest.fixture
def port(http_server, http_server_port):
    return http_server_port[1]


@pytest.mark.parametrize("path,size,shape", [(INBOUND, 21 * MB, "custom"), ("/v1/contacts", 900_000, "envelope"),
                                             ("/v1/subaccounts/credits", 900_000, "envelope")])
async def test_no_key_is_answered_before_any_byte_of_the_body(port, app, path, size, shape):
    """The answer arrives while the body is still unsent, and nothing is reserved for it."""
    raw = await Raw.open(port)
    try:
        await raw.send(head("POST", path, size))
        status, headers, body = await raw.response()
        assert app.body_budget.used == 0
    finally:
        raw.close()
    assert status == 401 and headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert isinstance(error, str) if shape == "custom" else error["code"] == "UNAUTHORIZED"


async def test_a_wrong_method_and_a_rate_limit_are_answered_before_the_body(port, account, app):
    raw = await Raw.open(port)
    try:
        await raw.send(head("PUT", f"/v1/contacts?apiKey={account['api_key']}", 5 * MB))
        status, headers, _ = await raw.response()
        assert status == 405 and headers["allow"] == "GET, POST"
    finally:
        raw.close()


async def test_a_refused_request_without_a_body_keeps_its_connection(port, account):
    """Streamed handling answers before the body and then closes; a request that announces no body is
    handled unstreamed, so a 401 or 404 on a keep-alive connection leaves it open for the next request."""
    raw = await Raw.open(port)
    try:
        for path, expected in (("/v1/account", 401), ("/v1/nowhere", 404), ("/v1/contacts", 405),
                               (f"/v1/account?apiKey={account['api_key']}", 200)):
            method = "DELETE" if expected == 405 else "GET"
            await raw.send(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            status, headers, _ = await raw.response()
            assert status == expected and headers.get("connection", "").lower() != "close"
    finally:
        raw.close()


async def test_expect_100_continue_without_a_key_gets_the_401_and_no_continue(port):
    raw = await Raw.open(port)
    try:
        await raw.send(head("POST", INBOUND, 20 * MB, extra=["Expect: 100-continue"]))
        status, _, _ = await raw.response()
        assert status == 401  # not "100 Continue": the client never sends the body
    finally:
        raw.close()


@pytest.mark.parametrize("path,limit,shape", [
    ("/v1/contacts", "1048576", "envelope"),
    (INBOUND, None, "custom"),        # the media request limit (~22 MB)
    ("/login", "65536", "html"),
])
async def test_a_declared_length_over_the_routes_limit_is_413_in_its_shape_before_the_body(port, account, path,
                                                                                         limit, shape):
    size = {"envelope": 2 * MB, "custom": 40 * MB, "html": 100_000}[shape]
    raw = await Raw.open(port)
    try:
        sep = "&" if "?" in path else "?"
        await raw.send(head("POST", f"{path}{sep}apiKey={account['api_key']}", size))
        status, headers, body = await raw.response()
    finally:
        raw.close()
    assert status == 413
    if shape == "custom":
        assert json.loads(body) == {"error": f"request body is larger than {Settings().max_media_request_bytes} bytes"}
    elif shape == "envelope":
        assert json.loads(body)["error"] == {"code": "PAYLOAD_TOO_LARGE",
                                             "message": f"request body is larger than {limit} bytes"}
    else:
        assert headers["content-type"].startswith("text/html") and f"larger than {limit} bytes" in body.decode()


def inbound_with_media(sid, size):
    """A custom-channel message whose JSON body is about `size` bytes: an embedded PNG."""
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * (size * 3 // 4)
    return {"customData": {"messageSid": sid, "fromId": "u", "toId": "t", "body": "a picture",
                           "mediaUrl": "data:image/png;base64," + base64.b64encode(png).decode(),
                           "mediaContentType": "image/png"}}


async def test_limits_are_per_route_too_large_for_json_but_fine_for_the_custom_channel(api, account):
    r = await api.post("/v1/contacts", {"firstName": "Ada", "phone": "+14155552671", "pad": "x" * (3 * MB // 2)},
                       key=account["api_key"])
    assert r.code == 413
    r = await api.post(INBOUND, inbound_with_media("big", 3 * MB // 2), key=account["api_key"])
    assert r.code == 200, r.body


async def test_a_chunked_body_over_the_limit_is_413_in_the_routes_shape(port, account, app):
    raw = await Raw.open(port)
    try:
        await raw.send(head("POST", f"/v1/contacts?apiKey={account['api_key']}", chunked=True))
        chunk = b"x" * 65536
        for _ in range(20):  # 1.25 MB, over the 1 MB JSON limit
            await raw.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await raw.send(b"0\r\n\r\n")
        status, _, body = await raw.response()
    finally:
        raw.close()
    assert status == 413 and json.loads(body)["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert app.body_budget.used == 0


async def test_a_chunked_body_within_the_limit_works(port, account):
    raw = await Raw.open(port)
    try:
        await raw.send(head("POST", f"/v1/contacts?apiKey={account['api_key']}", chunked=True))
        body = json.dumps({"firstName": "Chunk", "phone": "+14155552671"}).encode()
        for piece in (body[:10], body[10:]):
            await raw.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        await raw.send(b"0\r\n\r\n")
        status, _, answer = await raw.response()
    finally:
        raw.close()
    assert status == 201 and json.loads(answer)["firstName"] == "Chunk"


async def test_bodies_held_in_memory_are_bounded_across_connections(port, account, app, api):
    """With a 2 MB budget, a 1.2 MB body being received holds its reservation; a second one is 503 with
    Retry-After (in the custom channel's shape there), and once the first is done the next fits."""
    key = account["api_key"]
    body = json.dumps(inbound_with_media("a", 1_200_000)).encode()
    first = await Raw.open(port)
    try:
        await first.send(head("POST", f"{INBOUND}?apiKey={key}", len(body)) + body[:1000])
        await asyncio.sleep(0.2)
        assert app.body_budget.used == len(body)
        second = await Raw.open(port)
        try:
            await second.send(head("POST", f"{INBOUND}?apiKey={key}", len(body)))
            status, headers, answer = await second.response()
        finally:
            second.close()
        assert status == 503 and headers["retry-after"] == "1"
        assert json.loads(answer) == {"error": "the server is receiving too many request bodies at once; retry in 1 s"}
        await first.send(body[1000:])
        status, _, answer = await first.response()
        assert status == 200, answer
    finally:
        first.close()
    await asyncio.sleep(0.05)
    assert app.body_budget.used == 0
    r = await api.post(INBOUND, inbound_with_media("b", 1_200_000), key=key)
    assert r.code == 200


async def test_a_client_that_goes_away_mid_body_gives_its_reservation_back(port, account, app):
    raw = await Raw.open(port)
    await raw.send(head("POST", f"{INBOUND}?apiKey={account['api_key']}", 500_000))
    await raw.send(b"{" * 1000)
    await asyncio.sleep(0.1)
    assert app.body_budget.used == 500_000
    raw.close()
    for _ in range(50):
        await asyncio.sleep(0.02)
        if app.body_budget.used == 0:
            break
    assert app.body_budget.used == 0


async def test_ui_forms_still_work_with_streamed_bodies(port, app):
    """The XSRF token is a form field: it is checked once the (streamed) body is complete."""
    raw = await Raw.open(port)
    try:
        await raw.send(head("POST", "/login", 20, extra=["Cookie: _xsrf=2|aa|bb|cc"]).replace(
            b"application/json", b"application/x-www-form-urlencoded") + b"email=a&password=bbb")
        status, _, body = await raw.response()
    finally:
        raw.close()
    assert status == 403 and b"did not come from this site" in body


# ---- the same mechanism streaming to a file (what a bulk import builds on) ----------------------

class UploadHandler(BaseHandler):
    """What a bulk-import endpoint would look like: BaseHandler with a file sink and its own limit."""

    def initialize(self, directory):
        super().initialize()
        self.directory = directory

    def max_body_bytes(self):
        return 8 * MB

    def make_body_sink(self, limit):
        return FileBody(limit, self.directory)

    def post(self):
        with open(self.body, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        self.respond({"sha256": digest, "size": os.path.getsize(self.body)})


async def test_a_large_upload_streams_to_a_file_and_the_file_goes_away_after(tmp_path, app, http_server_client):
    upload_dir = tmp_path / "uploads"
    upload_dir.mkdir()
    app.add_handlers(r".*", [(r"/upload", UploadHandler, {"directory": str(upload_dir)})])
    data = os.urandom(5 * MB)  # five times the memory budget of this module's settings
    r = await http_server_client.fetch("/upload", method="POST", body=data)
    assert json.loads(r.body) == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert list(upload_dir.iterdir()) == []
    r = await http_server_client.fetch("/upload", method="POST", body=os.urandom(9 * MB), raise_error=False)
    assert r.code == 413 and json.loads(r.body)["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert list(upload_dir.iterdir()) == []
    assert app.body_budget.used == 0
