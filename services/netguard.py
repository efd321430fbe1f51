"""SSRF guard for client-owned URLs (webhooks, the bot's AI provider): https only, and only public
addresses (checked after DNS, and the checked address is the one connected to)."""
import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit, urlunsplit

import idna

from tornado.netutil import Resolver

from common.errors import Invalid

# IPv6 ranges that carry an IPv4 address inside (RFC 6052, 3056, 4291, 4380, 6145): reaching one of
# them can reach that IPv4 address through a translator or tunnel, so the IPv4 inside must be public.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: local use only, never public
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_TEREDO = ipaddress.ip_network("2001::/32")


class BlockedAddress(Exception):
    """A webhook host resolved to an address we refuse to connect to."""


def embedded_ipv4(ip):
    """The IPv4 addresses an IPv6 address carries (mapped, translated, compatible, NAT64, 6to4, Teredo);
    empty for anything else."""
    if ip.ipv4_mapped:
        return [ip.ipv4_mapped]
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _NAT64 or ip in _IPV4_TRANSLATED or ip in _IPV4_COMPATIBLE:
        return [low32]
    if ip.sixtofour:
        return [ip.sixtofour]
    if ip in _TEREDO:
        return list(ip.teredo)  # the Teredo server and the (de-obfuscated) client address
    return []


def _public_ip(ip):
    return ip.is_global and not ip.is_multicast


def is_public(address):
    """True for an address webhooks may reach: globally routable, not multicast, and an IPv6 form that
    embeds an IPv4 address only when every IPv4 inside is public too."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _NAT64_LOCAL:
            return False
        inside = embedded_ipv4(ip)
        if inside:  # ::/96 holds :: and ::1 too: their "IPv4" 0.0.0.0 / 0.0.0.1 is refused
            return all(_public_ip(v4) for v4 in inside)
    return _public_ip(ip)


def ascii_host(host):
    """The host as DNS sees it: IP literals unchanged, names as IDNA 2008 A-labels. Raises ValueError
    (idna.IDNAError is one) for a name IDNA refuses: an empty or 64-character label, a lone surrogate."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    return idna.encode(host, uts46=True).decode("ascii")


async def resolve_checked(host, port, allow_private):
    """Resolve host and return its addresses; raise BlockedAddress when any is not public.
    Every address must be public so that a DNS answer mixing one public and one private address
    cannot be used to reach the private one."""
    try:
        name = ascii_host(host)
    except ValueError as exc:
        raise BlockedAddress(f"{host!r} is not a valid host name ({exc})") from None
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    addresses = sorted({info[4][0] for info in infos})
    if not allow_private:
        blocked = [a for a in addresses if not is_public(a)]
        if blocked:
            raise BlockedAddress(f"{host} resolves to a non-public address ({blocked[0]})")
    return addresses


def scheme_allowed(parts, allow_private):
    """A client-owned URL (urlsplit parts) must be https with a host; plain http only with allow_private."""
    return parts.scheme in (("https", "http") if allow_private else ("https",)) and bool(parts.hostname)


def _refuse_raw_characters(url, field):
    """Whitespace and control characters would reach the request line raw (urlsplit even drops some
    silently); anything but ASCII must arrive percent-encoded (or, in the host, as an IDN)."""
    for char in url:
        if char.isspace() or ord(char) < 0x20 or ord(char) == 0x7F:
            raise Invalid(f"{field} must not contain spaces or control characters (U+{ord(char):04X})")


async def check_webhook_url(url, *, allow_private, field):
    """Validate a URL a client saves for webhooks. Returns the URL to store (an internationalized host
    in its ASCII form) or raises Invalid naming the field."""
    if not isinstance(url, str) or not url.strip():
        raise Invalid(f"{field} must be a URL")
    _refuse_raw_characters(url, field)
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. "https://[::1/" or "https://[zz]/": a bracketed host that is no IPv6
        raise Invalid(f"{field} is not a valid URL ({exc})") from None
    if not scheme_allowed(parts, allow_private):
        raise Invalid(f"{field} must be an https:// URL with a host name")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise Invalid(f"{field} has an invalid port") from None
    if parts.port == 0:
        raise Invalid(f"{field} has an invalid port (0)")
    try:
        host = ascii_host(parts.hostname)
    except ValueError as exc:
        raise Invalid(f"{field}: {parts.hostname!r} is not a valid host name ({exc})") from None
    if host != parts.hostname:
        netloc = parts.netloc.rpartition("@")
        hostport = host + (f":{parts.port}" if parts.port else "")
        url = urlunsplit(parts._replace(netloc=netloc[0] + netloc[1] + hostport))
    if not url.isascii():
        raise Invalid(f"{field}: characters outside ASCII must be percent-encoded")
    try:
        await resolve_checked(host, port, allow_private)
    except BlockedAddress as exc:
        raise Invalid(f"{field} must be publicly reachable: {exc}") from None
    except OSError:
        raise Invalid(f"{field}: host {parts.hostname} cannot be resolved") from None
    return url


class CheckedResolver(Resolver):
    """Resolves through resolve_checked, so the client connects only to addresses that were
    checked (no second lookup an attacker's DNS could answer differently). TLS SNI and the Host
    header still use the URL's host name."""

    def initialize(self, allow_private=False):
        self.allow_private = allow_private

    async def resolve(self, host, port, family=socket.AF_UNSPEC):
        addresses = await resolve_checked(host, port, self.allow_private)
        result = []
        for address in addresses:
            if ipaddress.ip_address(address).version == 6:
                if family in (socket.AF_UNSPEC, socket.AF_INET6):
                    result.append((socket.AF_INET6, (address, port, 0, 0)))
            elif family in (socket.AF_UNSPEC, socket.AF_INET):
                result.append((socket.AF_INET, (address, port)))
        if not result:
            raise OSError(f"{host} has no address of the requested family")
        return result
