#!/usr/bin/env python3
"""A tiny slow origin for the coalescing benchmark (bench/bench_coalesce.py): every request
waits --delay-ms, then answers. It counts the requests it served per path, so a benchmark can
tell how many origin calls a cache in front made.

  GET /slow?k=KEY[&ttl=S]   200, a body naming the key; Cache-Control: max-age=S (default 60)
  GET /fail?k=KEY           500 after the same wait (Cache-Control: no-store)
  GET /ping                 200 at once (not counted)
  GET /count                JSON {path with query: calls} (not counted)
  POST /reset               forgets the counts

usage: origin.py --port N [--delay-ms 200]; listens on 127.0.0.1 only, prints "ready PORT".
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

counts = {}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    delay = 0.2

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "text/plain")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        if self.path == "/reset":
            with lock:
                counts.clear()
            self.answer(200, b"reset\n")
        else:
            self.answer(404, b"no\n")

    def do_GET(self):
        u = urlparse(self.path)
        if u.path == "/ping":
            return self.answer(200, b"ok")
        if u.path == "/count":
            with lock:
                body = json.dumps(counts).encode()
            return self.answer(200, body)
        if u.path not in ("/slow", "/fail"):
            return self.answer(404, b"no\n")
        with lock:
            counts[self.path] = counts.get(self.path, 0) + 1
        time.sleep(self.delay)
        q = parse_qs(u.query)
        key = q.get("k", [""])[0]
        if u.path == "/fail":
            return self.answer(500, b"failed\n", [("Cache-Control", "no-store")])
        ttl = q.get("ttl", ["60"])[0]
        self.answer(200, ("value of %s\n" % key).encode(),
                    [("Cache-Control", "max-age=%s" % ttl)])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--delay-ms", type=int, default=200)
    a = p.parse_args()
    Handler.delay = a.delay_ms / 1000.0
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 1024
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print("ready %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
