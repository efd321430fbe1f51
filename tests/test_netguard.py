"""The SSRF guard when webhook URLs are saved: https and public only, checked after DNS, unless
--allow-private-webhooks. (The same guard at delivery time is in test_delivery.py.)"""
import ipaddress
import socket

import pytest

from services import netguard
from common.errors import Invalid

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


# This module runs without --allow-private-webhooks, as production does.
pytestmark = pytest.mark.settings(allow_private_webhooks=False)


@pytest.mark.parametrize("url", PRIVATE_URLS)
async def test_a_private_reply_url_is_refused_when_saved(api, account, url):
    """docs/design.md#api-decisions: "Webhook URLs must be https and public: private, loopback and link-local targets are
    refused at save"; docs/api.md#webhook-delivery: "The URL must be publicly reachable"."""
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": url}, key=account["api_key"])
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR"
    assert "customChannelWebhookUrl" in r.json["error"]["message"]
    r = await api.get("/v1/account", key=account["api_key"])
    assert "customChannelWebhookUrl" not in r.json["settings"]


@pytest.mark.parametrize("url", ["https://10.0.0.1/n", "https://localhost/n", "https://[::1]/n"])
async def test_a_private_notification_url_is_refused_when_saved(api, account, url):
    """docs/design.md#api-decisions Notifications use the same rules as replies."""
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"contact.created": url}},
                        key=account["api_key"])
    assert r.code == 400, r.body
    assert "notificationUrls.contact.created" in r.json["error"]["message"]


async def test_plain_http_is_refused_when_saved(api, account):
    """docs/design.md#api-decisions: webhook URLs must be https (plain http only with --allow-private-webhooks)."""
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
    """docs/design.md#api-decisions: "--allow-private-webhooks, which also allows plain http (local development and tests)"."""
    url = "http://localhost:9999/hook"
    assert await netguard.check_webhook_url(url, allow_private=True, field="f") == (url, None)
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


# ---- IPv6 forms that carry an IPv4 address (issue 9: "SSRF address forms") ---------------------

# (address, public, what it is). An IPv6 address that embeds an IPv4 one reaches it through a
# translator or a tunnel, so it is public only when the IPv4 inside is.
EMBEDDED_FORMS = [
    ("::ffff:7f00:1", False, "IPv4-mapped loopback"),
    ("::ffff:808:808", True, "IPv4-mapped public"),
    ("64:ff9b::7f00:1", False, "NAT64 well-known prefix, loopback inside"),
    ("64:ff9b::a00:1", False, "NAT64, 10.0.0.1 inside"),
    ("64:ff9b::a9fe:a9fe", False, "NAT64, link-local 169.254.169.254 inside"),
    ("64:ff9b::808:808", True, "NAT64, public 8.8.8.8 inside"),
    ("64:ff9b:1::7f00:1", False, "NAT64 local-use prefix (RFC 8215), loopback inside"),
    ("64:ff9b:1::808:808", False, "NAT64 local-use prefix: local by definition, refused whatever is inside"),
    ("2002:7f00:1::1", False, "6to4, loopback inside"),
    ("2002:c0a8:101::1", False, "6to4, 192.168.1.1 inside"),
    ("2002:a9fe:a9fe::1", False, "6to4, link-local inside"),
    ("2002:808:808::1", True, "6to4, public inside"),
    ("::7f00:1", False, "IPv4-compatible loopback"),
    ("::a00:1", False, "IPv4-compatible 10.0.0.1"),
    ("::808:808", True, "IPv4-compatible public"),
    ("::ffff:0:7f00:1", False, "IPv4-translated (SIIT) loopback"),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", False, "Teredo, client 10.0.0.1"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", False, "Teredo, client 127.0.0.1"),
    ("2001:0:a00:1:8000:63bf:f7f7:f7f7", False, "Teredo, server 10.0.0.1"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False, "Teredo, client 192.0.2.45 (documentation range)"),
    ("::", False, "unspecified"),
    ("::1", False, "loopback"),
]


@pytest.mark.parametrize("address,public,what", EMBEDDED_FORMS, ids=[row[2] for row in EMBEDDED_FORMS])
def test_is_public_unwraps_every_ipv6_form_that_embeds_ipv4(address, public, what):
    assert netguard.is_public(address) is public, what


@pytest.mark.parametrize("address,public,what", EMBEDDED_FORMS, ids=[row[2] for row in EMBEDDED_FORMS])
async def test_embedded_ipv4_forms_are_checked_when_saved(api, account, address, public, what):
    """docs/design.md#api-decisions: private targets "are refused at save and at connect time"."""
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": f"https://[{address}]/hook"},
                        key=account["api_key"])
    assert r.code == (200 if public else 400), (what, r.body)
    if not public:
        assert "customChannelWebhookUrl must be publicly reachable" in r.json["error"]["message"]


@pytest.mark.parametrize("address,public,what", EMBEDDED_FORMS, ids=[row[2] for row in EMBEDDED_FORMS])
async def test_embedded_ipv4_forms_are_checked_when_connecting(address, public, what):
    """The delivery worker's resolver: what it returns is what the HTTP client connects to."""
    from services.netguard import CheckedResolver

    resolver = CheckedResolver(allow_private=False)
    if public:
        [(family, (host, port, _, _))] = await resolver.resolve(address, 443)
        assert (family, ipaddress.ip_address(host), port) == (socket.AF_INET6, ipaddress.ip_address(address), 443)
    else:
        with pytest.raises(netguard.BlockedAddress):
            await resolver.resolve(address, 443)


# ---- URLs that would have been stored raw or answered 500 (issue 9) ---------------------------

@pytest.mark.parametrize("url,fragment", [
    ("https://a..b/hook", "is not a valid host name"),                     # IDNA: empty label
    ("https://" + "x" * 64 + ".example.com/hook", "is not a valid host name"),  # IDNA: label too long
    ("https://\udcff.example.com/hook", "lone surrogate"),  # refused with any JSON body (parse_json)
    ("https://1.1.1.1/a\r\nX-Injected: 1", "must not contain spaces or control characters"),
    ("https://1.1.1.1/a b", "must not contain spaces or control characters"),
    ("https://1.1.1.1/a\tb", "must not contain spaces or control characters"),
    ("https://1.1.1.1/\x00", "must not contain control characters (U+0000)"),  # any JSON body (parse_json)
    ("https://1.1.1.1:0/hook", "invalid port"),
    ("https://1.1.1.1:99999/hook", "invalid port"),
    ("https://1.1.1.1/caf\u00e9", "must be percent-encoded"),
])
async def test_malformed_webhook_urls_are_400_naming_the_field(api, account, url, fragment):
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"contact.created": url}},
                        key=account["api_key"])
    assert r.code == 400, r.body
    assert r.json["error"]["code"] == "VALIDATION_ERROR"
    message = r.json["error"]["message"]
    assert message.startswith("notificationUrls.contact.created") and fragment in message, message
    assert "notificationUrls" not in (await api.get("/v1/account", key=account["api_key"])).json["settings"]


def test_hosts_are_checked_and_converted_with_idna_2008():
    """The idna library (IDNA 2008, UTS 46), so the stored URL is the one DNS, TLS and Host use."""
    assert netguard.ascii_host("b\u00fccher.example") == "xn--bcher-kva.example"
    assert netguard.ascii_host("2001:db8::1") == "2001:db8::1"
    for bad in ("a..b", "x" * 64 + ".example", "\udcff.example"):
        with pytest.raises(ValueError):
            netguard.ascii_host(bad)


async def test_a_host_idna_refuses_is_refused_at_connect_time_too():
    """A URL stored before these checks existed still never reaches getaddrinfo's UnicodeError."""
    with pytest.raises(netguard.BlockedAddress):
        await netguard.resolve_checked("a..b", 443, allow_private=True)


# ---- reserved ranges Python 3.11 calls global (issue 18 item 9): an allow-list of what is public ----

NOT_GLOBAL_UNICAST = [
    ("fec0::1", "IPv6 site-local (deprecated, RFC 3879)"),
    ("192.0.0.9", "192.0.0.0/24: PCP anycast"),
    ("192.0.0.10", "192.0.0.0/24: TURN anycast"),
    ("192.0.0.200", "192.0.0.0/24: IETF protocol assignments"),
    ("3fff::1", "IPv6 documentation (RFC 9637)"),
    ("5f00::1", "SRv6 SIDs (RFC 9602)"),
    ("192.88.99.1", "6to4 relay anycast (deprecated, RFC 7526)"),
    ("224.0.0.1", "IPv4 multicast"),
    ("233.252.0.1", "IPv4 multicast (MCAST-TEST-NET)"),
    ("ff0e::1", "IPv6 global-scope multicast"),
    ("2001:1::1", "2001::/23: PCP anycast"),
    ("2001:20::1", "2001::/23: ORCHIDv2"),
    ("4000::1", "IPv6 outside 2000::/3: unallocated"),
    ("::ffff:192.88.99.1", "IPv4-mapped 6to4 relay anycast"),
    ("64:ff9b::c000:9", "NAT64 of 192.0.0.9"),
]


@pytest.mark.parametrize("address,what", NOT_GLOBAL_UNICAST, ids=[row[1] for row in NOT_GLOBAL_UNICAST])
def test_addresses_that_are_not_global_unicast_are_not_public(address, what):
    assert netguard.is_public(address) is False, what


@pytest.mark.parametrize("address", ["1.1.1.1", "8.8.4.4", "223.255.255.1", "2a00:1450:4001:80b::200e",
                                     "2620:4f:8000::1", "2002:808:808::1", "64:ff9b::808:808"])
def test_global_unicast_addresses_stay_public(address):
    assert netguard.is_public(address) is True


@pytest.mark.parametrize("url", ["https://[fec0::1]/hook", "https://192.0.0.9/hook", "https://[3fff::1]/hook",
                                 "https://[5f00::1]/hook", "https://192.88.99.1/hook"])
async def test_reserved_ranges_are_refused_when_saved(api, account, url):
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": url}, key=account["api_key"])
    assert r.code == 400, r.body
    assert "customChannelWebhookUrl must be publicly reachable" in r.json["error"]["message"]


# ---- the refusal says why and what to do, and never names a resolved address (issue 26 §3) ------

async def test_a_private_host_is_refused_with_the_reason_and_the_way_out(api, account):
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "https://localhost:8443/hook"},
                        key=account["api_key"])
    assert r.code == 400, r.body
    message = r.json["error"]["message"]
    assert message == ("customChannelWebhookUrl must be publicly reachable: localhost is not a public address. "
                       "For local testing start Parley with --allow-private-webhooks.")


async def test_the_refusal_never_names_the_address_a_host_resolved_to(api, account, caplog):
    """A sub-account could otherwise map the server's internal DNS; the server's log has the address."""
    caplog.set_level("INFO", logger="parley.netguard")
    r = await api.patch("/v1/account/settings", {"notificationUrls": {"contact.created": "https://localhost/n"}},
                        key=account["api_key"])
    assert r.code == 400
    assert "127.0.0.1" not in r.body.decode() and "::1" not in r.body.decode()
    assert "localhost resolves to" in caplog.text


async def test_plain_http_is_refused_with_the_way_out(api, account):
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "http://1.1.1.1/hook"},
                        key=account["api_key"])
    assert r.code == 400
    assert r.json["error"]["message"] == (
        "customChannelWebhookUrl must be an https:// URL: plain http:// is for local testing only. "
        "For local testing start Parley with --allow-private-webhooks.")


def test_connection_errors_are_described_without_the_address():
    error = ConnectionRefusedError(111, "Connect call failed ('10.9.8.7', 443)")
    assert netguard.describe_connection_error(error) == "ConnectionRefusedError: Connection refused"
    assert netguard.describe_connection_error(socket.gaierror(-2, "Name or service not known")) == \
        "the host name does not resolve"


# ---- a host that does not resolve now is saved, with a warning (issue 26 §3) --------------------

async def test_a_host_that_does_not_resolve_now_is_saved_with_a_warning(api, account):
    url = "https://hooks.parley-test.invalid/parley"  # .invalid never resolves (RFC 6761)
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": url}, key=account["api_key"])
    assert r.code == 200, r.body
    assert r.json["customChannelWebhookUrl"] == url
    assert r.json["warnings"] == ["customChannelWebhookUrl: hooks.parley-test.invalid does not resolve now; "
                                  "it will be checked again at delivery"]
    assert (await api.get("/v1/account", key=account["api_key"])).json["settings"]["customChannelWebhookUrl"] == url


async def test_the_readmes_example_url_is_saved_as_written(api, account):
    url = "https://hooks.example.com/parley"
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": url}, key=account["api_key"])
    assert r.code == 200, r.body
    assert r.json["customChannelWebhookUrl"] == url


async def test_a_url_that_resolves_has_no_warnings(api, account):
    r = await api.patch("/v1/account/settings", {"customChannelWebhookUrl": "https://1.1.1.1/hook"},
                        key=account["api_key"])
    assert r.code == 200 and "warnings" not in r.json


async def test_a_private_provider_url_is_refused_with_the_way_out_too(api, account):
    r = await api.patch("/v1/account/settings", {"bot": {"provider": {"baseUrl": "https://localhost/v1",
                                                                      "model": "m"}}}, key=account["api_key"])
    assert r.code == 400, r.body
    assert r.json["error"]["message"] == (
        "bot.provider.baseUrl must be publicly reachable: localhost is not a public address. "
        "For local testing start Parley with --allow-private-webhooks.")
