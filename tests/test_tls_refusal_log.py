"""A browser refusing the self-signed certificate (issue 26 item 4): Tornado's "SSL Error" line, once per
connection, becomes one INFO line per client address per hour with the fix (serving.TlsRefusalLog)."""
import asyncio
import logging
import socket
import ssl

import tornado.netutil
import tornado.web

from connection_guard import ConnectionGuard
from serving import GuardedHTTPServer, TlsRefusalLog
from services.tls import CertificateSource


def refuse(port):
    """A client that does not trust the certificate (as a browser): it sends an alert and closes."""
    with socket.create_connection(("127.0.0.1", port)) as raw:
        try:
            ssl.create_default_context().wrap_socket(raw, server_hostname="localhost")
        except ssl.SSLError:
            pass


async def refused_handshakes(port, times):
    for _ in range(times):
        await asyncio.to_thread(refuse, port)
    await asyncio.sleep(0.3)  # the server's side of the last handshake ends


async def test_refused_certificates_are_logged_once_per_address_per_hour_with_the_hint(tmp_path, caplog):
    source = CertificateSource(tmp_path)
    source.ensure()
    server = GuardedHTTPServer(tornado.web.Application(), ssl_options=source.load(), guard=ConnectionGuard(cap=10))
    sock, = tornado.netutil.bind_sockets(0, "127.0.0.1")
    server.add_sockets([sock])
    now = [0.0]
    refusals = TlsRefusalLog(clock=lambda: now[0])
    logger = logging.getLogger("tornado.general")
    logger.addFilter(refusals)
    try:
        with caplog.at_level(logging.INFO, logger="tornado.general"):
            await refused_handshakes(sock.getsockname()[1], 5)
            now[0] = 3601.0  # an hour later: logged again
            await refused_handshakes(sock.getsockname()[1], 2)
    finally:
        logger.removeFilter(refusals)
        server.stop()
    lines = [r for r in caplog.records if r.name == "tornado.general"]
    assert len(lines) == 2, [r.getMessage() for r in lines]
    assert all(r.levelno == logging.INFO for r in lines)
    message = lines[0].getMessage()
    assert "127.0.0.1" in message and "data/tls/cert.pem" in message and "--tls-cert" in message


def test_other_records_pass_untouched():
    record = logging.makeLogRecord({"msg": "Uncaught exception %s", "args": ("x",), "levelno": logging.ERROR})
    assert TlsRefusalLog().filter(record) and record.getMessage() == "Uncaught exception x"
