"""Regression (issue 18, 1): every SIGHUP lost a few requests on a route with a TTL cache. A
draining loop answers with Connection: close and closes at once; on a cache hit that close
happened inside the respond call and the dispatcher then read the freed connection, so the
draining loop died of SIGSEGV and took the other requests it held with it (no answer at all).
"""
import os
import re
import signal
import socket
import threading

import pytest

from conftest import get, read_response, wait_until

PATH = "/heavy?iterations=1000"
REQ = ("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % PATH).encode()


class Client(threading.Thread):
    """Requests for one key until stopped: on one keep-alive connection (a new one after each
    Connection: close) or on a fresh connection per request. Any request without an answer is
    an error."""

    def __init__(self, port, keep_alive):
        super().__init__(daemon=True)
        self.port, self.keep_alive = port, keep_alive
        self.stop, self.ok, self.errors = threading.Event(), 0, []

    def run(self):
        s = None
        while not self.stop.is_set():
            try:
                if s is None:
                    s = socket.create_connection(("127.0.0.1", self.port), timeout=20)
                s.sendall(REQ)
                r = read_response(s)
                # (each generation has its own cache: its first answers are misses)
                if r.status == 200:
                    self.ok += 1
                else:
                    self.errors.append((r.status, r.header("X-Cache")))
                if not self.keep_alive or (r.header("connection") or "").lower() == "close":
                    s.close()
                    s = None
            except (OSError, EOFError) as e:
                self.errors.append(repr(e))
                if s is not None:
                    s.close()
                s = None
        if s is not None:
            s.close()


@pytest.mark.timeout(120)
def test_sighup_on_ttl_route_loses_no_request(start_server):
    srv = start_server("--loop-workers", "2", "--compute-workers", "1", "--coalesce",
                       "/heavy ttl=600000 query=iterations")
    assert get(srv.port, PATH).header("X-Cache") == "miss"
    clients = [Client(srv.port, keep_alive=i % 2 == 0) for i in range(6)]
    for c in clients:
        c.start()
    try:
        for gen in range(2, 6):
            before = sum(c.ok for c in clients)
            os.kill(srv.pid, signal.SIGHUP)
            assert wait_until(lambda: "ready: generation %d" % gen in srv.log(), 30), srv.log()
            # the older generation has drained and gone: its loops answered to the end
            assert wait_until(lambda: len(srv.children("loop")) == 2, 30), srv.log()[-3000:]
            assert wait_until(lambda: sum(c.ok for c in clients) > before + 50, 30)
    finally:
        for c in clients:
            c.stop.set()
        for c in clients:
            c.join(30)
    errors = [e for c in clients for e in c.errors]
    assert errors == [], (len(errors), errors[:10])
    assert not re.search(r"loop\[\d+\] pid=\d+ killed by signal", srv.log()), srv.log()[-3000:]
    assert not re.search(r"loop\[\d+\] pid=\d+ exited with status [1-9]", srv.log())
