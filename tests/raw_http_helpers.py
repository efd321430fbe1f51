"""HTTP/1.1 by hand to the in-process server (tests/test_bodies.py, tests/test_contact_import_limits.py): a
request's head written out, and a socket that sends it and the body when the test says."""
import asyncio

from tornado.tcpclient import TCPClient

MB = 1 << 20


class Raw:
    """HTTP/1.1 over a plain socket to the in-process server: the test decides what is sent and when."""

    def __init__(self, stream):
        self.stream = stream

    @classmethod
    async def open(cls, port):
        return cls(await TCPClient().connect("127.0.0.1", port))

    async def send(self, data):
        await self.stream.write(data)

    async def response(self, timeout=10):
        head = await asyncio.wait_for(self.stream.read_until(b"\r\n\r\n", max_bytes=65536), timeout)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        body = await asyncio.wait_for(self.stream.read_bytes(int(headers.get("content-length", 0))), timeout)
        return status, headers, body

    def close(self):
        self.stream.close()


def head(method, path, length=None, extra=(), chunked=False):
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *extra]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()
