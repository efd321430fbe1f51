#!/usr/bin/env python3
"""A webhook receiver for the campaigns scenario, in its own process: answers every POST with 200 (HTTP/1.1,
keep-alive) and counts them; GET /stats → {count, first, last} (time.time() of the first and last POST).

    python bench/receiver.py --port PORT        # prints {"event": "listening", "port": PORT}
"""
import argparse
import asyncio
import json
import signal
import time

import tornado.httpserver
import tornado.web

STATS = {"count": 0, "first": None, "last": None}


class Hook(tornado.web.RequestHandler):
    def check_xsrf_cookie(self):
        pass

    def post(self):
        now = time.time()
        STATS["count"] += 1
        STATS["first"] = STATS["first"] or now
        STATS["last"] = now
        self.finish("ok")


class Stats(tornado.web.RequestHandler):
    def get(self):
        self.finish(json.dumps(STATS))


async def main(port):
    server = tornado.httpserver.HTTPServer(tornado.web.Application([(r"/hook", Hook), (r"/stats", Stats)]))
    server.listen(port, "127.0.0.1")
    print(json.dumps({"event": "listening", "port": port}), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(main(parser.parse_args().port))
