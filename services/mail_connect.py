"""Connections to an account's mail servers (settings `email`, services/email_settings.py): SMTP with aiosmtplib,
IMAP with aioimaplib, each to an address checked by the webhooks' SSRF rules (services/netguard.py: the address
checked is the one connected to; TLS still verifies the host name), each step under --mail-timeout-seconds.

Every failure is a MailError whose text a person can act on ("SMTP login refused: 535 …", "could not connect to
imap.example.com:993: ConnectionRefusedError: Connection refused"): it names the host, never an address the host
resolved to, and carries no traceback. ``retryable`` says whether trying again later may help (a delivery's
retry schedule, services/delivery.py)."""
from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable, Mapping
from email.message import EmailMessage
from typing import Any

import aioimaplib
import aiosmtplib

from services.netguard import LOCAL_TESTING_HINT, BlockedAddress, describe_connection_error, resolve_checked

# A server of the `email` setting (services/email_settings.py): host, port, security, username, folder, ...
Server = Mapping[str, Any]

DEFAULT_PORTS = {"imap": {"tls": 993, "starttls": 143, "none": 143},
                 "smtp": {"tls": 465, "starttls": 587, "none": 25}}


class MailError(Exception):
    """A mail server could not be used; str() is the reason in words."""

    def __init__(self, text: str, retryable: bool = True) -> None:
        super().__init__(text)
        self.retryable = retryable


def port_of(kind: str, server: Server) -> int:
    return server.get("port") or DEFAULT_PORTS[kind][server.get("security") or "tls"]


def _where(kind: str, server: Server) -> str:
    return f"{server['host']}:{port_of(kind, server)}"


def _refuse_plain(kind: str, server: Server, allow_private: bool) -> None:
    if (server.get("security") or "tls") == "none" and not allow_private:
        raise MailError(f"{kind.upper()} security none (no encryption) is for local testing only. "
                        f"{LOCAL_TESTING_HINT}", retryable=False)


async def _checked_socket(kind: str, server: Server, timeout: float, allow_private: bool) -> socket.socket:
    """A connected, non-blocking socket to one of the host's checked addresses; MailError naming host:port."""
    host, port, where = server["host"], port_of(kind, server), _where(kind, server)
    loop = asyncio.get_running_loop()
    try:
        addresses = await asyncio.wait_for(resolve_checked(host, port, allow_private), timeout)
    except BlockedAddress as exc:
        raise MailError(f"could not connect to {where}: {exc}", retryable=False) from None
    except TimeoutError:
        raise MailError(f"could not connect to {where}: the host name did not resolve within {timeout:g} s") from None
    except OSError as exc:
        raise MailError(f"could not connect to {where}: {describe_connection_error(exc)}") from None
    error = None
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, (address, port)), timeout)
            return sock
        except TimeoutError:
            sock.close()
            error = f"no answer within {timeout:g} s"
        except OSError as exc:
            sock.close()
            error = describe_connection_error(exc)
    raise MailError(f"could not connect to {where}: {error}")


_fqdn: str | None = None


async def _local_hostname() -> str:
    """This machine's name for EHLO, looked up once per process (in a thread: it may ask DNS)."""
    global _fqdn
    if _fqdn is None:
        _fqdn = await asyncio.to_thread(socket.getfqdn)
    return _fqdn


def _could_not_connect(where: str, exc: BaseException) -> MailError:
    text = describe_connection_error(exc)
    if "WRONG_VERSION_NUMBER" in text:  # TLS spoken to a server that answers in plain text
        text += " (this port does not start with TLS: try security starttls, or the server's TLS port)"
    return MailError(f"could not connect to {where}: {text}")


def _smtp_words(exc: BaseException, where: str) -> MailError:
    """An aiosmtplib error in words; 5xx answers (a refused login, sender or recipient) are final."""
    if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
        return MailError(f"SMTP login refused: {exc.code} {exc.message}", retryable=exc.code < 500)
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
        first = exc.recipients[0]
        return MailError(f"SMTP server refused the recipient {first.recipient}: {first.code} {first.message}",
                         retryable=first.code < 500)
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        return MailError(f"SMTP server {where} answered {exc.code} {exc.message}", retryable=exc.code < 500)
    if isinstance(exc, aiosmtplib.SMTPTimeoutError):
        return MailError(f"SMTP server {where} did not answer in time")
    if isinstance(exc, aiosmtplib.SMTPNotSupported):
        return MailError(f"SMTP server {where}: {exc.message}", retryable=False)
    if isinstance(exc, ssl.SSLError) or isinstance(getattr(exc, "__cause__", None), ssl.SSLError):
        return _could_not_connect(where, exc.__cause__ or exc)
    if isinstance(exc, aiosmtplib.SMTPException):
        return MailError(f"SMTP server {where}: {exc.message}")
    return _could_not_connect(where, exc)


async def smtp_session(server: Server, password: str | None, *, timeout: float,
                       allow_private: bool) -> aiosmtplib.SMTP:
    """A connected SMTP client, logged in when the settings have a password (the caller quits it); MailError."""
    _refuse_plain("smtp", server, allow_private)
    where = _where("smtp", server)
    sock = await _checked_socket("smtp", server, timeout, allow_private)
    security = server.get("security") or "tls"
    client = aiosmtplib.SMTP(hostname=server["host"], sock=sock, timeout=timeout, use_tls=security == "tls",
                             start_tls=True if security == "starttls" else False,
                             local_hostname=await _local_hostname())
    try:
        await client.connect()
        if password is not None:
            await client.login(server.get("username") or "", password)
    except Exception as exc:
        client.close()  # and the socket with its transport (closing it here could free its fd while still polled)
        raise _smtp_words(exc, where) from None
    return client


async def send_smtp(server: Server, password: str | None, message: EmailMessage, *, timeout: float,
                    allow_private: bool) -> None:
    """Send one email.message.EmailMessage; MailError when it was not accepted."""
    client = await smtp_session(server, password, timeout=timeout, allow_private=allow_private)
    try:
        await client.send_message(message)
    except Exception as exc:
        raise _smtp_words(exc, _where("smtp", server)) from None
    finally:
        try:
            await client.quit()
        except Exception:
            client.close()


class _CheckedImap(aioimaplib.IMAP4):
    """aioimaplib's client on a socket connected by _checked_socket (TLS with the host name, as configured)."""

    def __init__(self, sock: socket.socket, host: str, ssl_context: ssl.SSLContext | None, timeout: float) -> None:
        self._sock, self._host, self._ssl = sock, host, ssl_context
        super().__init__(host=host, timeout=timeout)

    def create_client(self, host: str, port: int, loop: asyncio.AbstractEventLoop,
                      conn_lost_cb: Callable[[Exception | None], None] | None = None,
                      ssl_context: ssl.SSLContext | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.protocol = aioimaplib.IMAP4ClientProtocol(loop, conn_lost_cb)
        self._client_task = loop.create_task(loop.create_connection(
            lambda: self.protocol, sock=self._sock, ssl=self._ssl, server_hostname=self._host if self._ssl else None))

    async def starttls(self) -> None:
        """STARTTLS (RFC 3501 6.2.1), which aioimaplib does not have: the command, then TLS on the connection."""
        response = await asyncio.wait_for(self.protocol.execute(aioimaplib.Command(
            "STARTTLS", self.protocol.new_tag(), loop=self.protocol.loop)), self.timeout)
        if response.result != "OK":
            raise MailError(f"IMAP server {self._host} refused STARTTLS: {_text(response)}", retryable=False)
        loop = asyncio.get_running_loop()
        self.protocol.transport = await asyncio.wait_for(loop.start_tls(
            self.protocol.transport, self.protocol, ssl.create_default_context(), server_hostname=self._host),
            self.timeout)


ImapClient = _CheckedImap  # what imap_session gives (aioimaplib.IMAP4's methods, untyped: the library ships no types)


def _text(response: aioimaplib.Response) -> str:
    line = response.lines[0] if response.lines else b""
    return (line.decode(errors="replace") if isinstance(line, bytes) else str(line)).strip() or response.result


async def imap_session(server: Server, password: str | None, *, timeout: float,
                       allow_private: bool) -> ImapClient:
    """A connected IMAP client, logged in, with the folder selected (the caller logs out); MailError."""
    _refuse_plain("imap", server, allow_private)
    where, host = _where("imap", server), server["host"]
    if password is None:
        raise MailError("IMAP needs a password: none is set", retryable=False)
    security = server.get("security") or "tls"
    sock = await _checked_socket("imap", server, timeout, allow_private)
    client = _CheckedImap(sock, host, ssl.create_default_context() if security == "tls" else None, timeout)
    try:
        await client.wait_hello_from_server()
        if security == "starttls":
            await client.starttls()
        login = await client.login(server.get("username") or "", password)
        if login.result != "OK":
            raise MailError(f"IMAP login refused: {_text(login)}", retryable=False)
        folder = server.get("folder") or "INBOX"
        selected = await client.select(folder)
        if selected.result != "OK":
            raise MailError(f"IMAP folder {folder!r} cannot be opened: {_text(selected)}", retryable=False)
        client.selected = selected  # its UIDVALIDITY and UIDNEXT (the email channel's import)
    except MailError:
        await _close_imap(client)
        raise
    except TimeoutError:
        await _close_imap(client)
        raise MailError(f"IMAP server {where} did not answer within {timeout:g} s") from None
    except Exception as exc:
        await _close_imap(client)
        raise _could_not_connect(where, exc) from None
    return client


async def _close_imap(client: ImapClient) -> None:
    """At once: abort() unregisters the socket now; asyncio closes it with its transport. A connection still being
    made is cancelled (asyncio closes its socket); one that failed was closed by asyncio."""
    transport = client.protocol.transport
    if transport is not None:
        transport.abort()
    elif not client._client_task.done():
        client._client_task.cancel()


async def logout_imap(client: ImapClient, timeout: float) -> None:
    try:
        await asyncio.wait_for(client.logout(), timeout)
    except Exception:
        pass
    await _close_imap(client)
