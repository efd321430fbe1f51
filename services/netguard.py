"""SSRF guard for client-owned URLs (webhooks, the bot's AI provider): https only, and only public
addresses (checked after DNS, and the checked address is the one connected to)."""
import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from tornado.netutil import Resolver

from common.errors import Invalid


class BlockedAddress(Exception):
    """A webhook host resolved to an address we refuse to connect to."""


def is_public(address):
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def resolve_checked(host, port, allow_private):
    """Resolve host and return its addresses; raise BlockedAddress when any is not public.
    Every address must be public so that a DNS answer mixing one public and one private address
    cannot be used to reach the private one."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = sorted({info[4][0] for info in infos})
    if not allow_private:
        blocked = [a for a in addresses if not is_public(a)]
        if blocked:
            raise BlockedAddress(f"{host} resolves to a non-public address ({blocked[0]})")
    return addresses


def scheme_allowed(parts, allow_private):
    """A client-owned URL (urlsplit parts) must be https with a host; plain http only with allow_private."""
    return parts.scheme in (("https", "http") if allow_private else ("https",)) and bool(parts.hostname)


async def check_webhook_url(url, *, allow_private, field):
    """Validate a URL a client saves for webhooks. Returns it unchanged or raises Invalid naming the field."""
    if not isinstance(url, str) or not url.strip():
        raise Invalid(f"{field} must be a URL")
    parts = urlsplit(url)
    if not scheme_allowed(parts, allow_private):
        raise Invalid(f"{field} must be an https:// URL with a host name")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise Invalid(f"{field} has an invalid port") from None
    try:
        await resolve_checked(parts.hostname, port, allow_private)
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
