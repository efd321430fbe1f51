"""SSRF guard for client-owned URLs: https only, and only public addresses (checked after DNS)."""
import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

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


async def check_webhook_url(url, *, allow_private, field):
    """Validate a URL a client saves for webhooks. Returns it unchanged or raises Invalid naming the field."""
    if not isinstance(url, str) or not url.strip():
        raise Invalid(f"{field} must be a URL")
    parts = urlsplit(url)
    schemes = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in schemes or not parts.hostname:
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
