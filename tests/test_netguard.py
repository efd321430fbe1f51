"""The SSRF guard when webhook URLs are saved: https and public only, checked after DNS, unless
--allow-private-webhooks. (The same guard at delivery time is in test_delivery.py.)"""
import pytest

from services import netguard
from common.errors import Invalid
from settings import Settings

PRIVATE_URLS = [
    "https://127.0.0.1/hook",             # loopback
    "https://127.8.9.10:8443/hook",       # all of 127/8 is loopback
    "https://10.1.2.3/hook",              # RFC 1918
    "https://172.16.5.4/hook",
    "https://192.168.1.20/hook",
    "https://169.254.169.254/latest/meta-data",  # link-local (cloud metadata)
    "https://[::1]/hook",                 # IPv6 loopback
    "https://[fe80::1]/hook",             # IPv6 link-local
    "https://[fd00::1]/hook",             # IPv6 unique local
    "https://[::ffff:127.0.0.1]/hook",    # IPv4-mapped loopback
    "https://0.0.0.0/hook",
    "https://localhost/hook",             # a host name that resolves to 127.0.0.1
    "https://localhost:8443/hook",
]


@pytest.fixture
def settings(tmp_path):
    # This module runs without --allow-private-webhooks, as production does.
    return Settings(data_dir=tmp_path / "data", allow_private_webhooks=False, http_port=0)


@pytest.mark.parametrize("url", PRIVATE_URLS)
async def test_a_private_reply_url_is_refused_when_saved(api, account, url):
    """DESIGN §3: "Webhook URLs must be https and public: private, loopback and link-local targets are
    refused at save"; spec §6: "The URL must be publicly reachable"."""
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": url}, key=account["api_key"])
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR"
    assert "customChannelWebhookUrl" in r.json["error"]["message"]
    r = await api.get("/v1/account", key=account["api_key"])
    assert "customChannelWebhookUrl" not in r.json["settings"]


@pytest.mark.parametrize("url", ["https://10.0.0.1/n", "https://localhost/n", "https://[::1]/n"])
async def test_a_private_notification_url_is_refused_when_saved(api, account, url):
    """DESIGN §3 Notifications use the same rules as replies."""
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"contact.created": url}},
                        key=account["api_key"])
    assert r.code == 400, r.body
    assert "notificationUrls.contact.created" in r.json["error"]["message"]


async def test_plain_http_is_refused_when_saved(api, account):
    """DESIGN §3: webhook URLs must be https (plain http only with --allow-private-webhooks)."""
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "http://1.1.1.1/hook"},
                        key=account["api_key"])
    assert r.code == 400 and "https" in r.json["error"]["message"]


async def test_a_public_https_url_is_accepted(api, account):
    """The guard refuses only what it must: a public address passes (an IP literal: no DNS needed)."""
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "https://1.1.1.1/hook"},
                        key=account["api_key"])
    assert r.code == 200, r.body
    assert r.json["customChannelWebhookUrl"] == "https://1.1.1.1/hook"


async def test_allow_private_lets_local_urls_and_plain_http_through():
    """DESIGN §3: "--allow-private-webhooks, which also allows plain http (local development and tests)"."""
    url = "http://localhost:9999/hook"
    assert await netguard.check_webhook_url(url, allow_private=True, field="f") == url
    with pytest.raises(Invalid):
        await netguard.check_webhook_url(url, allow_private=False, field="f")


@pytest.mark.parametrize("address,public", [
    ("8.8.8.8", True), ("2606:4700:4700::1111", True), ("127.0.0.1", False), ("10.0.0.1", False),
    ("100.64.0.1", False), ("169.254.1.1", False), ("224.0.0.1", False), ("::1", False),
    ("::ffff:10.0.0.1", False), ("::ffff:8.8.8.8", True)])
def test_is_public(address, public):
    assert netguard.is_public(address) is public


async def test_a_host_resolving_to_any_private_address_is_blocked():
    """Every resolved address must be public: localhost resolves to 127.0.0.1 (and maybe ::1)."""
    with pytest.raises(netguard.BlockedAddress):
        await netguard.resolve_checked("localhost", 443, allow_private=False)
    assert "127.0.0.1" in await netguard.resolve_checked("localhost", 443, allow_private=True)
