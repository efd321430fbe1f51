"""The private or undocumented parts of Tornado, aiosqlite, psycopg and phonenumbers that Parley relies on, one test
each: an upgrade within setup.cfg's bounds may remove or rename any of them without notice, and most uses would then
degrade silently (an override never called, a getattr default). Each test fails naming what went and who used it.
docs/dependencies.md says how to upgrade; when one of these fails, change the user named, then this test."""
import asyncio
import inspect
import socket

import aiosqlite
import phonenumbers
import psycopg
import tornado
import tornado.httpserver
import tornado.web
import tornado.websocket
from tornado import httputil
from tornado.iostream import IOStream, SSLIOStream


def require(owner, name, user, library):
    """owner.name, or a failure saying which library's upgrade removed it and which Parley code used it."""
    if not hasattr(owner, name):
        raise AssertionError(f"{library} no longer has {getattr(owner, '__name__', type(owner).__name__)}.{name}, "
                             f"which {user} uses: adapt {user} to the new {library}")
    return getattr(owner, name)


class _Connection:
    """What RequestHandler() needs of a request's connection."""

    def set_close_callback(self, callback):
        pass


def test_tornado_request_handler_fields_that_base_handler_sets():
    """handlers/base.py's clear() sets _headers, _write_buffer, _status_code and _reason itself (Tornado's clear()
    costs ~5 % of a request); handlers/ui/agency.py and handlers/bodies.py read _finished."""
    request = httputil.HTTPServerRequest(connection=_Connection(),
                                         start_line=httputil.RequestStartLine("GET", "/", "HTTP/1.1"),
                                         headers=httputil.HTTPHeaders({"Host": "127.0.0.1"}))
    handler = tornado.web.RequestHandler(tornado.web.Application(), request)
    user = "handlers/base.py BaseHandler.clear()"
    assert isinstance(require(handler, "_headers", user, f"tornado {tornado.version}"), httputil.HTTPHeaders)
    assert require(handler, "_write_buffer", user, f"tornado {tornado.version}") == []
    assert require(handler, "_status_code", user, f"tornado {tornado.version}") == handler.get_status() == 200
    assert require(handler, "_reason", user, f"tornado {tornado.version}") == "OK"
    assert require(handler, "_finished", "handlers/ui/agency.py and handlers/bodies.py",
                   f"tornado {tornado.version}") is False
    assert "self._finished = True" in inspect.getsource(tornado.web.RequestHandler.finish), (
        f"tornado {tornado.version}'s RequestHandler.finish() no longer sets _finished, which handlers/ui/agency.py "
        "and handlers/bodies.py read")


def test_tornado_websocket_frame_writer_that_live_events_use():
    """handlers/live.py writes one deflated frame for every page through WebSocketProtocol13._write_frame
    (fin, opcode, data, flags) with flags=RSV1."""
    protocol = tornado.websocket.WebSocketProtocol13
    write_frame = require(protocol, "_write_frame", "handlers/live.py _Transport.write", f"tornado {tornado.version}")
    assert list(inspect.signature(write_frame).parameters)[:5] == ["self", "fin", "opcode", "data", "flags"], (
        f"tornado {tornado.version} changed WebSocketProtocol13._write_frame's parameters, which handlers/live.py "
        f"passes positionally: {inspect.signature(write_frame)}")
    assert require(protocol, "RSV1", "handlers/live.py _Transport.write", f"tornado {tornado.version}") == 0x40


def test_tornado_ssl_handshake_hook_that_serving_overrides():
    """serving.py's _TLSStream overrides SSLIOStream._do_ssl_handshake to tell the TLS refusal log the client's
    address; a renamed method would leave the override never called."""
    require(SSLIOStream, "_do_ssl_handshake", "serving.py _TLSStream", f"tornado {tornado.version}")
    assert "self._do_ssl_handshake()" in inspect.getsource(SSLIOStream), (
        f"tornado {tornado.version}'s SSLIOStream no longer calls _do_ssl_handshake(): serving.py _TLSStream's "
        "override (the client address in handshake failure logs) would never run")


def test_tornado_stream_read_buffer_that_the_431_answer_reads():
    """serving.py's _answer_headers_too_large reads IOStream._read_buffer (the request line decides the answer's
    shape); getattr's default would silently answer every route in the general shape."""
    async def buffered():
        left, right = socket.socketpair()
        stream = IOStream(left)
        right.sendall(b"GET /v1/x HTTP/1.1\r\n")
        await stream.read_bytes(4, partial=True)  # reads what arrived; keeps the rest in the buffer
        try:
            return bytes(require(stream, "_read_buffer", "serving.py _answer_headers_too_large",
                                 f"tornado {tornado.version}"))
        finally:
            stream.close()
            right.close()

    assert asyncio.run(buffered()).startswith(b"/v1/x"), (
        f"tornado {tornado.version}'s IOStream._read_buffer no longer holds the unread bytes: serving.py's 431 "
        "answer reads the request line from it")


def test_tornado_http_server_attributes_that_guarded_server_uses():
    """serving.py's GuardedHTTPServer reads and sets HTTPServer.conn_params (header, body timeouts, header size)
    and TCPServer's ssl_options, max_buffer_size and read_chunk_size (it makes the streams itself)."""
    async def server():
        return tornado.httpserver.HTTPServer(lambda request: None, max_header_size=1234)

    http_server = asyncio.run(server())
    user = "serving.py GuardedHTTPServer"
    params = require(http_server, "conn_params", user, f"tornado {tornado.version}")
    for name in ("header_timeout", "body_timeout", "max_header_size"):
        require(params, name, user, f"tornado {tornado.version} (HTTP1ConnectionParameters)")
    assert params.max_header_size == 1234
    for name in ("ssl_options", "max_buffer_size", "read_chunk_size"):
        require(http_server, name, user, f"tornado {tornado.version} (TCPServer)")


def test_aiosqlite_execute_on_the_connection_thread():
    """storage/sqlite_db.py configures the reader connection on aiosqlite's own thread through
    Connection._execute(fn, Connection._conn)."""
    async def configure():
        async with aiosqlite.connect(":memory:") as db:
            execute = require(db, "_execute", "storage/sqlite_db.py Database.open", f"aiosqlite {aiosqlite.__version__}")
            raw = require(db, "_conn", "storage/sqlite_db.py Database.open", f"aiosqlite {aiosqlite.__version__}")
            return await execute(lambda cx: cx.execute("SELECT 41 + 1").fetchone()[0], raw)

    assert asyncio.run(configure()) == 42


def test_psycopg_cursor_rowcount_field_that_executemany_sets():
    """storage/pg_adapter.py's executemany sends many rows as multi-row INSERTs and sets the cursor's _rowcount
    (what rowcount reports) to the rows written."""
    require(psycopg.Cursor, "rowcount", "storage/pg_adapter.py executemany", f"psycopg {psycopg.__version__}")
    assert "self._rowcount" in inspect.getsource(psycopg.Cursor.rowcount.fget), (
        f"psycopg {psycopg.__version__}'s Cursor.rowcount no longer reads _rowcount: storage/pg_adapter.py "
        "executemany's count would be lost")


def test_psycopg_statement_parameter_cache_limit_that_raw_cursor_threshold_follows():
    """storage/pg_adapter.py sends statements of more than _PARSED_PARAMS parameters through a RawCursor because
    psycopg parses those uncached (psycopg._queries.MAX_CACHED_STATEMENT_PARAMS)."""
    from psycopg import _queries

    from storage.pg_adapter import _PARSED_PARAMS
    limit = require(_queries, "MAX_CACHED_STATEMENT_PARAMS", "storage/pg_adapter.py _PARSED_PARAMS",
                    f"psycopg {psycopg.__version__}")
    assert limit >= _PARSED_PARAMS, (
        f"psycopg {psycopg.__version__} caches the parsing of statements up to {limit} parameters only: lower "
        f"storage/pg_adapter.py's _PARSED_PARAMS ({_PARSED_PARAMS}) to it")


def test_phonenumbers_locale_table_that_country_names_read():
    """services/regions.py runs phonenumbers/geodata/locale.py from its file alone (importing it loads every
    geocoding table, ~100 MB) and reads LOCALE_DATA {region: {language: name}}."""
    from services import regions
    regions._locale_names.cache_clear()
    try:
        names = regions._locale_names("en")
    except (FileNotFoundError, AttributeError) as exc:
        raise AssertionError(f"phonenumbers {phonenumbers.__version__} moved or changed geodata/locale.py's "
                             f"LOCALE_DATA, which services/regions.py _locale_names reads: {exc}") from exc
    assert names.get("DE") == "Germany" and names.get("JP") == "Japan", (
        f"phonenumbers {phonenumbers.__version__}'s LOCALE_DATA no longer maps region -> language -> name")
