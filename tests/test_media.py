"""Custom-channel media (docs/api.md#custom-channel "Custom-channel media attachment", §7 rule 4, docs/design.md#api-decisions "Media"):
data URIs decoded, sniffed against mediaContentType, stored content-addressed under data/media/ and
served by signed, expiring URLs; http(s) URLs stored as given and never fetched."""
import base64
import json
import time
from urllib.parse import parse_qs, urlsplit

import pytest
import tornado.httpserver
import tornado.testing
import tornado.web

from services import media
from common.errors import Invalid, PayloadTooLarge
from storage import outbox as outbox_store
from tests.media_files import JPEG, PDF, PNG, data_uri, png_bytes  # noqa: F401 (others import them from here)

INBOUND = "/v1/incoming_custom_channel_message"
_sids = iter(range(1, 1_000_000))


# A small decoded-media cap so the 413 test needs no 16 MB body.
pytestmark = pytest.mark.settings(max_media_bytes=4096)


async def post_media(api, key, media_url, content_type=..., **custom):
    data = {"messageSid": f"m-{next(_sids)}", "fromId": "media-user", "toId": "biz", "body": "see attached",
            "mediaUrl": media_url, **custom}
    if content_type is not ...:
        data["mediaContentType"] = content_type
    return await api.post(INBOUND, {"customData": data}, key=key)


async def fetch_raw(api, path, method="GET", headers=None):
    """Fetch a served file (not JSON) from the in-process server; error answers get .json."""
    response = await api.client.fetch(path, method=method, headers=headers, raise_error=False,
                                      body="{}" if method == "POST" else None)
    response.json = json.loads(response.body) if response.code >= 400 and response.body else None
    return response


async def message_media(api, key, message_id):
    r = await api.get(f"/v1/messages/{message_id}", key=key)
    assert r.code == 200, r.body
    return r.json["media"]


# ---- data URIs -------------------------------------------------------------------------------

async def test_png_data_uri_is_stored_once_and_served_by_a_signed_url(api, account, settings):
    """Spec §2: "Embedded files are decoded and stored by the service"; docs/design.md#api-decisions: "stored content-addressed
    under data/media/, served ... by signed, expiring URLs"."""
    key = account["api_key"]
    r = await post_media(api, key, data_uri("image/png", PNG), "image/png")
    assert r.code == 200, r.body
    again = await post_media(api, key, data_uri("image/png", PNG), "image/png")
    assert again.code == 200
    stored = [p for p in (settings.data_dir / "media").iterdir() if not p.name.startswith(".")]
    assert len(stored) == 1 and stored[0].read_bytes() == PNG  # the same bytes stored once

    shown = await message_media(api, key, r.json["messageId"])
    assert shown["contentType"] == "image/png"
    url = urlsplit(shown["url"])
    assert url.path == f"/v1/media/{stored[0].name}"
    served = await fetch_raw(api, f"{url.path}?{url.query}")  # no API key: the signature is the authorization
    assert served.code == 200
    assert served.body == PNG
    assert served.headers["Content-Type"] == "image/png"
    assert "sandbox" in served.headers["Content-Security-Policy"]


async def test_signed_url_refuses_tampering_expiry_and_wrong_methods(api, account, services):
    """docs/design.md#api-decisions: media are served by "signed, expiring URLs"."""
    r = await post_media(api, account["api_key"], data_uri("image/png", PNG), "image/png")
    url = urlsplit((await message_media(api, account["api_key"], r.json["messageId"]))["url"])
    path, query = url.path, parse_qs(url.query)
    digest = path.rsplit("/", 1)[1]
    good_sig, exp = query["sig"][0], query["exp"][0]

    assert (await fetch_raw(api, f"{path}?type=image%2Fpng&exp={exp}&sig={good_sig}")).code == 200
    forged = ("A" if good_sig[0] != "A" else "B") + good_sig[1:]
    bad = await fetch_raw(api, f"{path}?type=image%2Fpng&exp={exp}&sig={forged}")
    assert bad.code == 403 and bad.json["error"]["code"] == "FORBIDDEN"
    # The type is signed too: nobody can make us serve the file as text/html.
    assert (await fetch_raw(api, f"{path}?type=text%2Fhtml&exp={exp}&sig={good_sig}")).code == 403
    assert (await fetch_raw(api, f"{path}?type=image%2Fpng&exp={int(exp) + 1}&sig={good_sig}")).code == 403
    assert (await fetch_raw(api, path)).code == 403
    key = media.signing_key(services.box)
    expired = media.signed_path(key, digest, "image/png", ttl_seconds=60, now=time.time() - 3600)
    assert (await fetch_raw(api, expired)).code == 403
    # A valid signature for a file that is not stored.
    missing = media.signed_path(key, "0" * 64, "image/png", ttl_seconds=60)
    assert (await fetch_raw(api, missing)).code == 404
    post = await fetch_raw(api, f"{path}?{url.query}", method="POST")
    assert post.code == 405 and post.headers["Allow"] == "GET, HEAD"


async def test_range_requests_are_served(api, account):
    """Browsers fetch audio and video in ranges; a stored file answers 206 with the requested bytes."""
    r = await post_media(api, account["api_key"], data_uri("image/png", PNG), "image/png")
    url = urlsplit((await message_media(api, account["api_key"], r.json["messageId"]))["url"])
    part = await fetch_raw(api, f"{url.path}?{url.query}", headers={"Range": "bytes=0-7"})
    assert part.code == 206 and part.body == PNG[:8]


async def test_png_bytes_labelled_pdf_are_400(api, account, settings):
    """Spec §2: mediaContentType "must match the real file content"."""
    r = await post_media(api, account["api_key"], data_uri("application/pdf", PNG), "application/pdf")
    assert r.code == 400
    assert r.json["error"].startswith("customData.mediaContentType is application/pdf")
    assert "image/png" in r.json["error"]
    assert not (settings.data_dir / "media").exists() or not any((settings.data_dir / "media").iterdir())


async def test_data_uri_type_must_equal_media_content_type(api, account):
    r = await post_media(api, account["api_key"], data_uri("image/png", PNG), "image/jpeg")
    assert r.code == 400
    assert "data URI of type image/png" in r.json["error"]


async def test_media_url_without_content_type_is_400(api, account):
    """Spec §7 rule 4: "When mediaUrl is given without mediaContentType, the request is wrong"; §2: it is
    "Required whenever mediaUrl is present"."""
    for content_type in (..., None, ""):
        r = await post_media(api, account["api_key"], "https://cdn.example.com/a.png", content_type)
        assert (r.code, r.json) == (400, {"error": "customData.mediaContentType is required when "
                                                   "customData.mediaUrl is present"})


async def test_null_media_url_means_no_media(api, account):
    r = await post_media(api, account["api_key"], None)
    assert r.code == 200, r.body
    assert await message_media(api, account["api_key"], r.json["messageId"]) is None


@pytest.mark.parametrize("bad", ["data:image/png;base64,iVBORw0KGgo$$$", "data:image/png;base64,abc",
                                 "data:image/png,rawtext", "data:;base64,AAAA", "data:image/png;base64,"])
async def test_malformed_data_uris_are_400(api, account, bad):
    r = await post_media(api, account["api_key"], bad, "image/png")
    assert r.code == 400, r.body
    assert r.json["error"].startswith("customData.mediaUrl")


async def test_embedded_file_over_the_cap_is_413(api, account, settings):
    """docs/design.md#api-decisions: "size caps are settings"; §2 of the error table: 413 PAYLOAD_TOO_LARGE, here in the
    custom-channel shape."""
    big = PNG + b"\x00" * (settings.max_media_bytes + 1 - len(PNG))
    r = await post_media(api, account["api_key"], data_uri("image/png", big), "image/png")
    assert r.code == 413
    assert isinstance(r.json["error"], str) and str(settings.max_media_bytes) in r.json["error"]
    exact = PNG + b"\x00" * (settings.max_media_bytes - len(PNG))
    assert (await post_media(api, account["api_key"], data_uri("image/png", exact), "image/png")).code == 200


async def test_large_body_is_parsed_off_the_loop_and_accepted(api, account):
    """Bodies above 256 KB take the executor path of the handler; the cap that applies is the decoded size."""
    from handlers.custom_channel import _PARSE_INLINE_BYTES
    big = PNG + b"\x00" * 300_000
    # This module's settings cap media at 4 KB; the file is over it, so the executor path answers 413.
    r = await post_media(api, account["api_key"], data_uri("image/png", big), "image/png")
    assert len(data_uri("image/png", big)) > _PARSE_INLINE_BYTES
    assert r.code == 413 and isinstance(r.json["error"], str)
    r = await post_media(api, account["api_key"], None, body="x" * 60_000, padding="p" * _PARSE_INLINE_BYTES)
    assert r.code == 200, r.body  # unknown fields are ignored, also on the executor path


async def test_text_types_need_text(api, account):
    key = account["api_key"]
    ok = await post_media(api, key, data_uri("text/plain", "héllo wörld\n".encode()), "text/plain; charset=utf-8")
    assert ok.code == 200, ok.body
    assert (await post_media(api, key, data_uri("application/json", b"[1, 2]"), "application/json")).code == 200
    r = await post_media(api, key, data_uri("text/plain", PNG), "text/plain")
    assert r.code == 400 and "not text" in r.json["error"]


# ---- hosted URLs -----------------------------------------------------------------------------

async def test_http_media_url_is_stored_as_given_and_never_fetched(api, account):
    """Spec §2: mediaUrl may be "a publicly reachable URL"; DESIGN: stored as given (never fetched here)."""
    hits = []

    class Recorder(tornado.web.RequestHandler):
        def get(self):
            hits.append(self.request.uri)
            self.write(PNG)

    sock, port = tornado.testing.bind_unused_port()
    server = tornado.httpserver.HTTPServer(tornado.web.Application([(r"/.*", Recorder)]))
    server.add_sockets([sock])
    try:
        url = f"http://127.0.0.1:{port}/files/photo.png?v=1"
        r = await post_media(api, account["api_key"], url, "image/png")
        assert r.code == 200, r.body
        assert await message_media(api, account["api_key"], r.json["messageId"]) == \
            {"url": url, "contentType": "image/png"}
    finally:
        server.stop()
    assert hits == []


@pytest.mark.parametrize("bad", ["file:///etc/passwd", "ftp://example.com/a.png", "javascript:alert(1)",
                                 "//example.com/a.png", "https://", "not a url"])
async def test_other_schemes_are_400(api, account, bad):
    r = await post_media(api, account["api_key"], bad, "image/png")
    assert r.code == 400
    assert r.json["error"] == ("customData.mediaUrl must be an http(s) URL or a data:<type>;base64,<data> URI")


async def test_content_type_must_be_a_mime_type(api, account):
    r = await post_media(api, account["api_key"], "https://cdn.example.com/a.png", "png")
    assert r.code == 400 and r.json["error"].startswith("customData.mediaContentType must be a MIME type")


# ---- outbound with media ---------------------------------------------------------------------

async def test_outbound_media_goes_to_the_webhook_as_a_signed_url(api, account, services):
    """docs/design.md#api-decisions: the reply payload carries the media URL when present; stored files by signed URL."""
    key = account["api_key"]
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "http://127.0.0.1:9/r"}, key=key)
    assert r.code == 200
    r = await api.post("/v1/send_custom_channel_message", {"customData": {
        "fromId": "u-5", "customChannel": "webchat", "body": "here", "mediaUrl": data_uri("image/jpeg", JPEG),
        "mediaContentType": "image/jpeg"}}, key=key)
    assert r.code == 200, r.body
    [row] = await outbox_store.list_outbox(services.db, account["account_id"], kind="reply")
    payload = json.loads(row["payload"])
    assert payload["mediaContentType"] == "image/jpeg"
    fetched = await fetch_raw(api, urlsplit(payload["mediaUrl"]).path + "?" + urlsplit(payload["mediaUrl"]).query)
    assert fetched.code == 200 and fetched.body == JPEG


# ---- the content check itself ----------------------------------------------------------------

@pytest.mark.parametrize("declared, data", [
    ("image/png", PNG), ("image/jpeg", JPEG), ("image/jpg", JPEG), ("application/pdf", PDF),
    ("image/gif", b"GIF89a" + b"\x00" * 32),
    ("audio/mpeg", b"ID3\x03\x00\x00\x00\x00\x00\x00" + b"\x00" * 64),  # an ID3-tagged MP3
    ("audio/wav", b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 32),
    ("audio/mp4", b"\x00\x00\x00\x20ftypM4A " + b"\x00" * 32), ("video/mp4", b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 32),
    ("audio/ogg", b"OggS\x00\x02" + b"\x00" * 64),
    ("application/octet-stream", PNG),
    ("application/x-unknown-format", b"\x01\x02\x03 no magic here"),
])
def test_matching_content_is_accepted(declared, data):
    media.check_content(declared, None, data)


@pytest.mark.parametrize("declared, data", [
    ("application/pdf", PNG), ("image/jpeg", PNG), ("image/png", PDF), ("image/webp", b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 32),
    ("image/png", b"just some text"), ("text/plain", PNG), ("application/json", b"\x00\x01\x02"),
])
def test_mismatching_content_is_refused(declared, data):
    with pytest.raises(Invalid):
        media.check_content(declared, None, data)


@pytest.mark.parametrize("step", [4, 5, 8, 1 << 20])
def test_stepwise_base64_decoding_is_strict_across_step_boundaries(monkeypatch, step):
    """Strict base64 however the steps fall: MIME line breaks are fine, data after padding is not."""
    monkeypatch.setattr(media, "_DECODE_STEP", step)
    data = bytes(range(256)) * 3 + b"xy"
    encoded = base64.encodebytes(data).decode()  # 76-character lines
    assert media._b64decode_stepwise(encoded, 10_000, "f") == data
    assert media._b64decode_stepwise(base64.b64encode(b"A").decode() + "\n\n", 10, "f") == b"A"
    for bad in ("QQ==QUJD", "QQ=" + "=QUJD", "QUJ", "QUJD$", "QUJDé"):
        with pytest.raises(Invalid):
            media._b64decode_stepwise(bad, 10_000, "f")
    with pytest.raises(PayloadTooLarge):
        media._b64decode_stepwise(encoded, len(data) - 1, "f")


def test_end_to_end_over_https_a_2_mb_embedded_file_is_accepted_and_served(tmp_path):
    """Spec §4.4 over the real server (HTTPS, §5 rule 4): an embedded file larger than the 1 MB JSON
    limit fits the custom-channel body cap, is stored, and its signed URL serves the same bytes; the
    function-style alias answers the same way."""
    from tests.parley_process import ParleyProcess
    big = PNG + bytes(range(256)) * (2 * 1024 * 1024 // 256)
    with ParleyProcess(tmp_path / "data", http=False) as parley, parley.client() as client:
        key = parley.first_run["api_key"]
        body = {"customData": {"messageSid": "e2e-1", "fromId": "+14155552671", "toId": "biz", "body": "photo",
                               "mediaUrl": data_uri("image/png", big), "mediaContentType": "image/png"}}
        r = client.post("/v1/incoming_custom_channel_message", params={"apiKey": key}, json=body)
        assert r.status_code == 200, r.text
        again = client.post("/incomingCustomChannelMessage", params={"apiKey": key}, json=body)
        assert again.json() == r.json()
        shown = client.get(f"/v1/messages/{r.json()['messageId']}", params={"apiKey": key}).json()["media"]
        url = urlsplit(shown["url"])
        served = client.get(f"{url.path}?{url.query}")
        assert served.status_code == 200 and served.content == big
        assert client.get("/v1/incoming_custom_channel_message", params={"apiKey": key}).status_code == 405
