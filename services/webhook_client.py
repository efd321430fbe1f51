"""A webhook POST client with HTTP/1.1 keep-alive: connections are pooled per (scheme, host, port) and
reused, where Tornado's simple_httpclient opens a connection (and a TLS handshake) for every request.
Tornado parses: each request is a tornado.http1connection.HTTP1Connection on a pooled IOStream, and
connections are made by a TCPClient with the caller's resolver (the SSRF guard's CheckedResolver), so only
checked addresses are ever connected to. Redirects are never followed."""
from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Mapping
from typing import cast
from urllib.parse import urlsplit

from tornado import httputil
from tornado.http1connection import HTTP1Connection, HTTP1ConnectionParameters
from tornado.iostream import IOStream, StreamClosedError
from tornado.netutil import Resolver
from tornado.tcpclient import TCPClient

from services import tls_profile

IDLE_SECONDS = 30.0        # a pooled connection unused this long is closed rather than reused
MAX_IDLE_PER_ORIGIN = 32
MAX_HEADER_BYTES = 64 * 1024
MAX_ANSWER_BYTES = 10 * 1024 * 1024
Origin = tuple[str, str | None, int]  # (scheme, host, port): what connections are pooled by
OnChunk = Callable[[bytes], None]  # is given the answer's body, a piece at a time


class Answer:
    """The receiver's answer: code, reason, headers (the body went to on_chunk)."""

    def __init__(self, code: int, reason: str, headers: httputil.HTTPHeaders) -> None:
        self.code, self.reason, self.headers = code, reason, headers


class _Reader(httputil.HTTPMessageDelegate):
    def __init__(self, on_chunk: OnChunk) -> None:
        self.on_chunk = on_chunk
        self.start_line: httputil.RequestStartLine | httputil.ResponseStartLine | None = None
        self.headers: httputil.HTTPHeaders | None = None

    def headers_received(self, start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
                         headers: httputil.HTTPHeaders) -> None:
        self.start_line, self.headers = start_line, headers

    def data_received(self, chunk: bytes) -> None:
        self.on_chunk(chunk)

    def finish(self) -> None:
        pass

    def on_connection_close(self) -> None:
        pass


class KeepAliveClient:
    def __init__(self, resolver: Resolver, tls_profile: str = "intermediate") -> None:
        self._tcp = TCPClient(resolver=resolver)
        self._tls_profile = tls_profile
        self._idle: dict[Origin, list[tuple[IOStream, float]]] = {}  # origin -> [(stream, last used)]
        self._tls: ssl.SSLContext | None = None

    def close(self) -> None:
        for streams in self._idle.values():
            for stream, _ in streams:
                stream.close()
        self._idle.clear()
        self._tcp.close()

    async def post(self, url: str, headers: Mapping[str, str], body: bytes, *, timeout: float,
                   on_chunk: OnChunk) -> Answer:
        """POST body to url; returns an Answer. Raises asyncio.TimeoutError after ``timeout`` seconds in all
        (connect and answer), and the connection's error otherwise. A pooled connection that the receiver
        closed meanwhile is replaced once, before anything was read from it."""
        parts = urlsplit(url)
        origin = (parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.netloc.rpartition("@")[2]
        return await asyncio.wait_for(self._post(origin, host, target, headers, body, on_chunk), timeout)

    async def _post(self, origin: Origin, host: str, target: str, headers: Mapping[str, str], body: bytes,
                    on_chunk: OnChunk) -> Answer:
        stream = self._checkout(origin)
        if stream is not None:
            try:
                return await self._exchange(origin, stream, host, target, headers, body, on_chunk)
            except _Unused:
                pass  # the receiver had closed the idle connection: once more on a new one
        stream = await self._connect(origin)
        try:
            return await self._exchange(origin, stream, host, target, headers, body, on_chunk)
        except _Unused as exc:
            raise cast(BaseException, exc.__cause__) from None  # an _Unused is always raised from its cause

    async def _connect(self, origin: Origin) -> IOStream:
        scheme, hostname, port = origin
        if scheme == "https" and self._tls is None:
            self._tls = tls_profile.client_context(self._tls_profile)
        # (a webhook URL names a host: netguard refuses one that does not before it is posted to)
        return await self._tcp.connect(cast(str, hostname), port, ssl_options=self._tls if scheme == "https" else None)

    def _checkout(self, origin: Origin) -> IOStream | None:
        streams = self._idle.get(origin)
        now = time.monotonic()
        while streams:
            stream, used = streams.pop()
            if not stream.closed() and now - used < IDLE_SECONDS:
                return stream
            stream.close()
        return None

    async def _exchange(self, origin: Origin, stream: IOStream, host: str, target: str, headers: Mapping[str, str],
                        body: bytes, on_chunk: OnChunk) -> Answer:
        connection = HTTP1Connection(stream, True, HTTP1ConnectionParameters(
            no_keep_alive=False, max_header_size=MAX_HEADER_BYTES, max_body_size=MAX_ANSWER_BYTES, decompress=False))
        request_headers = httputil.HTTPHeaders(headers)
        request_headers["Host"] = host
        request_headers["Content-Length"] = str(len(body))
        reader = _Reader(on_chunk)
        try:
            connection.write_headers(httputil.RequestStartLine("POST", target, "HTTP/1.1"), request_headers)
            connection.write(body)
            connection.finish()
            complete = await connection.read_response(reader)
        except BaseException as exc:
            stream.close()
            if reader.start_line is None and isinstance(exc, (StreamClosedError, ConnectionError)):
                raise _Unused() from (getattr(exc, "real_error", None) or exc)
            raise
        if reader.start_line is None:
            stream.close()
            raise _Unused() from StreamClosedError()
        # a client's connection reads a response; its headers came with its start line
        start_line = cast(httputil.ResponseStartLine, reader.start_line)
        answer_headers = cast(httputil.HTTPHeaders, reader.headers)
        reusable = (complete and not stream.closed() and start_line.version == "HTTP/1.1"
                    and (answer_headers.get("Connection") or "").lower() != "close")
        idle = self._idle.setdefault(origin, [])
        if reusable and len(idle) < MAX_IDLE_PER_ORIGIN:
            idle.append((stream, time.monotonic()))
        else:
            stream.close()
        return Answer(start_line.code, start_line.reason, answer_headers)


class _Unused(Exception):
    """The connection failed before any answer: the request can be sent again on another connection."""
