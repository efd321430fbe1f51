#!/usr/bin/env python3
"""The ceiling: a bare Tornado TLS server that parses the benchmark's JSON and answers like Parley,
with no storage, no auth and no validation beyond json.loads. Parley's figures are read against it.

    python bench/ceiling.py --data-dir DIR --port PORT

It serves with Parley's own certificate from DIR/tls (the same key type and TLS settings), prints
{"event": "listening", "port": PORT} once it listens, and stops on SIGTERM.
"""
import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

import tornado.httpserver
import tornado.web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common.ids import new_id, now_iso
from services.tls import CertificateSource


class JsonHandler(tornado.web.RequestHandler):
    def compute_etag(self):
        return None

    def answer(self, obj, status=200):
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(obj, separators=(",", ":")))


class InboundHandler(JsonHandler):
    """POST /v1/incoming_custom_channel_message: {"success": true, "messageId": ...}."""

    def post(self):
        data = json.loads(self.request.body)
        data["customData"]["messageSid"]
        self.answer({"success": True, "messageId": new_id("msg")})


class ContactsHandler(JsonHandler):
    """POST /v1/contacts answers 201 with a contact object; GET ?phoneNumber= answers one."""

    def post(self):
        data = json.loads(self.request.body)
        self.answer({"id": new_id("ct"), "firstName": data.get("firstName"), "lastName": data.get("lastName"),
                     "phone": data.get("phone"), "email": data.get("email"), "createdAt": now_iso()}, 201)

    def get(self):
        phone = self.get_query_argument("phoneNumber")
        self.answer({"id": new_id("ct"), "firstName": "Bench", "lastName": "Contact", "phone": phone,
                     "email": None, "createdAt": now_iso()})


async def main(args):
    certs = CertificateSource(args.data_dir)
    app = tornado.web.Application([
        (r"/v1/incoming_custom_channel_message", InboundHandler),
        (r"/v1/contacts", ContactsHandler),
    ])
    server = tornado.httpserver.HTTPServer(app, ssl_options=certs.load())
    server.listen(args.port, "127.0.0.1")
    print(json.dumps({"event": "listening", "port": args.port}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, type=Path, help="a Parley data dir whose tls/ to use")
    parser.add_argument("--port", required=True, type=int)
    asyncio.run(main(parser.parse_args()))
