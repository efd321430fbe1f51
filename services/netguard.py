"""SSRF guard for client-owned URLs (webhooks, the bot's AI provider): https only, and only public
addresses (checked after DNS, and the checked address is the one connected to)."""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import socket
import ssl
from typing import Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

import idna
from tornado.netutil import Resolver

from common.errors import Invalid

log = logging.getLogger("parley.netguard")

LOCAL_TESTING_HINT = "For local testing start Parley with --allow-private-webhooks."

# An allow-list of what is public, not a deny-list of what is private: an address must lie in the
# unicast space (IPv4 below 224/4, IPv6 2000::/3, the only global unicast allocation), outside every
# block below, and be is_global. The blocks are the IANA special-purpose registries' entries that are not
# globally reachable, listed here because Python 3.11's is_global calls some of them global:
# fec0::/10, 3fff::/20, 5f00::/16, 192.0.0.0/24 (all of it), 192.88.99.0/24, multicast.
_UNICAST_V4 = ipaddress.ip_network("0.0.0.0/1"), ipaddress.ip_network("128.0.0.0/2"), \
    ipaddress.ip_network("192.0.0.0/3")
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
_NOT_GLOBAL = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24",      # IETF protocol assignments (DS-Lite, PCP and TURN anycast, NAT64 discovery)
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24",  # documentation
    "192.88.99.0/24",    # the deprecated 6to4 relay anycast (RFC 7526)
    "192.168.0.0/16", "198.18.0.0/15",
    "2001::/23",         # IETF protocol assignments: Teredo, benchmarking, ORCHID, anycast services
    "2001:db8::/32", "3fff::/20",  # documentation (RFC 3849, RFC 9637)
))

# IPv6 ranges that carry an IPv4 address inside (RFC 6052, 3056, 4291, 4380, 6145): reaching one of
# them can reach that IPv4 address through a translator or tunnel, so the IPv4 inside must be public.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_TEREDO = ipaddress.ip_network("2001::/32")


class BlockedAddress(Exception):
    """A webhook host resolved to an address we refuse to connect to."""


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
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
        return list(ip.teredo)  # type: ignore[arg-type]  # in _TEREDO: it has one. The Teredo server and the (de-obfuscated) client address
    return []


def _public_ip(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """ip (IPv4 or IPv6, taken as it is) is global unicast: in the unicast space, in no block of _NOT_GLOBAL."""
    space = _UNICAST_V4 if ip.version == 4 else (_GLOBAL_UNICAST_V6,)
    return (any(ip in net for net in space) and ip.is_global
            and not any(ip in net for net in _NOT_GLOBAL if net.version == ip.version))


def is_public(address: str) -> bool:
    """True for an address webhooks may reach: global unicast, and an IPv6 form that embeds an IPv4
    address only when every IPv4 inside is public too. Outside 2000::/3 only those forms (mapped, NAT64's
    64:ff9b::/96, IPv4-compatible and -translated) can be public, through the IPv4 address inside."""
    ip = ipaddress.ip_address(address)
    if ip.version == 4:
        return _public_ip(ip)
    inside = embedded_ipv4(ip)  # ::/96 holds :: and ::1 too: their "IPv4" 0.0.0.0 / 0.0.0.1 is refused
    if ip in _GLOBAL_UNICAST_V6:
        return _public_ip(ip) and all(_public_ip(v4) for v4 in inside)
    return bool(inside) and all(_public_ip(v4) for v4 in inside)


def ascii_host(host: str) -> str:
    """The host as DNS sees it: IP literals unchanged, names as IDNA 2008 A-labels. Raises ValueError
    (idna.IDNAError is one) for a name IDNA refuses: an empty or 64-character label, a lone surrogate."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    return idna.encode(host, uts46=True).decode("ascii")


async def resolve_checked(host: str, port: int | None, allow_private: bool) -> list[str]:
    """Resolve host and return its addresses; raise BlockedAddress when any is not public.
    Every address must be public so that a DNS answer mixing one public and one private address
    cannot be used to reach the private one. The error names the host, never an address it resolved to
    (that would let an account map the server's internal DNS); the log has the address."""
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
            log.info("refused a client-owned URL: %s resolves to %s, not a public address", host, blocked[0])
            raise BlockedAddress(f"{host} is not a public address. {LOCAL_TESTING_HINT}")
    return addresses


def scheme_refusal(parts: SplitResult, allow_private: bool) -> str | None:
    """Why a client-owned URL (urlsplit parts) is refused before any lookup ("must be …"), or None: it
    must be https with a host; plain http only with allow_private."""
    if parts.scheme in (("https", "http") if allow_private else ("https",)) and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname:
        return f"must be an https:// URL: plain http:// is for local testing only. {LOCAL_TESTING_HINT}"
    return "must be an https:// URL with a host name"


def describe_connection_error(exc: BaseException) -> str:
    """A connection failure as the client may read it: its kind, never the address connected to (an
    OSError's text often carries it, as in "Connect call failed ('10.1.2.3', 443)")."""
    if getattr(exc, "real_error", None) is not None:  # Tornado's StreamClosedError wraps the cause
        exc = exc.real_error  # type: ignore[attr-defined]
    if isinstance(exc, BlockedAddress):
        return str(exc)
    if isinstance(exc, socket.gaierror):
        return "the host name does not resolve"
    if isinstance(exc, ssl.SSLError):
        detail = getattr(exc, "verify_message", None) or getattr(exc, "reason", None)
        return f"TLS: {detail or exc.__class__.__name__}"
    if isinstance(exc, OSError) and exc.errno:
        return f"{exc.__class__.__name__}: {os.strerror(exc.errno)}"
    return f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__


def _refuse_raw_characters(url: str, field: str) -> None:
    """Whitespace and control characters would reach the request line raw (urlsplit even drops some
    silently); anything but ASCII must arrive percent-encoded (or, in the host, as an IDN)."""
    for char in url:
        if char.isspace() or ord(char) < 0x20 or ord(char) == 0x7F:
            raise Invalid(f"{field} must not contain spaces or control characters (U+{ord(char):04X})")


async def check_webhook_url(url: str, *, allow_private: bool, field: str) -> tuple[str, str | None]:
    """Validate a URL a client saves for webhooks. Returns (the URL to store (an internationalized host
    in its ASCII form), a warning or None) or raises Invalid naming the field. A host that does not
    resolve now is stored with a warning: every delivery resolves and checks it again."""
    if not isinstance(url, str) or not url.strip():
        raise Invalid(f"{field} must be a URL")
    _refuse_raw_characters(url, field)
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. "https://[::1/" or "https://[zz]/": a bracketed host that is no IPv6
        raise Invalid(f"{field} is not a valid URL ({exc})") from None
    refusal = scheme_refusal(parts, allow_private)
    if refusal:
        raise Invalid(f"{field} {refusal}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise Invalid(f"{field} has an invalid port") from None
    if parts.port == 0:
        raise Invalid(f"{field} has an invalid port (0)")
    try:
        host = ascii_host(parts.hostname)  # type: ignore[arg-type]  # scheme_refusal: it has one
    except ValueError as exc:
        raise Invalid(f"{field}: {parts.hostname!r} is not a valid host name ({exc})") from None
    if host != parts.hostname:
        netloc = parts.netloc.rpartition("@")
        hostport = host + (f":{parts.port}" if parts.port else "")
        url = urlunsplit(parts._replace(netloc=netloc[0] + netloc[1] + hostport))
    if not url.isascii():
        raise Invalid(f"{field}: characters outside ASCII must be percent-encoded")
    return url, await _resolution_warning(host, port, allow_private, field)


async def _resolution_warning(host: str, port: int | None, allow_private: bool, field: str) -> str | None:
    """Invalid naming the field when the host resolves to an address that is not public (unless allow_private);
    a warning when it does not resolve now (every connection resolves and checks it again); else None."""
    try:
        await resolve_checked(host, port, allow_private)
    except BlockedAddress as exc:
        raise Invalid(f"{field} must be publicly reachable: {exc}") from None
    except OSError:
        return f"{field}: {host} does not resolve now; it will be checked again at delivery"
    return None


async def check_host(host: str, *, allow_private: bool, field: str, port: int | None = None) -> tuple[str, str | None]:
    """Validate a host name a client saves for a server Parley connects to (a mail server): the same rules as a
    webhook URL's host. Returns (the host in its ASCII form, a warning or None) or raises Invalid naming the field."""
    if not isinstance(host, str) or not host.strip():
        raise Invalid(f"{field} must be a host name")
    _refuse_raw_characters(host, field)
    try:
        ascii_name = ascii_host(host.strip().rstrip(".").lower())
    except ValueError as exc:
        raise Invalid(f"{field}: {host!r} is not a valid host name ({exc})") from None
    return ascii_name, await _resolution_warning(ascii_name, port, allow_private, field)


class CheckedResolver(Resolver):
    """Resolves through resolve_checked, so the client connects only to addresses that were
    checked (no second lookup an attacker's DNS could answer differently). TLS SNI and the Host
    header still use the URL's host name."""

    def initialize(self, allow_private: bool = False) -> None:
        self.allow_private = allow_private

    async def resolve(self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC) -> list[tuple[int, Any]]:
        addresses = await resolve_checked(host, port, self.allow_private)
        result: list[tuple[int, Any]] = []
        for address in addresses:
            if ipaddress.ip_address(address).version == 6:
                if family in (socket.AF_UNSPEC, socket.AF_INET6):
                    result.append((socket.AF_INET6, (address, port, 0, 0)))
            elif family in (socket.AF_UNSPEC, socket.AF_INET):
                result.append((socket.AF_INET, (address, port)))
        if not result:
            raise OSError(f"{host} has no address of the requested family")
        return result
