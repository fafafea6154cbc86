"""--drain-delay-ms: after SIGTERM /ready answers 503 at once, but the listener keeps accepting
for the delay (while a load balancer drops the instance from its endpoints), then closes and
the graceful drain proceeds as without it."""
import os
import signal
import socket
import threading
import time

import pytest

from conftest import get, wait_until

DELAY_MS = 2000


def attempt(port):
    """One new connection and GET /ping; returns 200, or the error's name."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else "empty"
    except OSError as e:
        return type(e).__name__


class Opener(threading.Thread):
    """Opens a new connection every 10 ms (at most 2000 of them, for at most 60 s) and records
    (start, end, outcome) of each, until told to stop."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.results, self.halt = port, [], threading.Event()

    def run(self):
        end = time.monotonic() + 60
        for _ in range(2000):
            if self.halt.is_set() or time.monotonic() > end:
                return
            t0 = time.monotonic()
            r = attempt(self.port)
            self.results.append((t0, time.monotonic(), r))
            time.sleep(0.01)


@pytest.mark.timeout(90)
def test_no_connection_refused_during_the_drain_delay(start_server):
    srv = start_server("--loop-workers", "2", "--compute-workers", "1",
                       "--drain-delay-ms", str(DELAY_MS), "--drain-timeout-ms", "5000")
    assert wait_until(lambda: get(srv.port, "/ready").status == 200, 10), "never ready"
    opener = Opener(srv.port)
    opener.start()
    try:
        assert wait_until(lambda: len(opener.results) >= 10, 10), opener.results
        t_sig = time.monotonic()
        os.kill(srv.pid, signal.SIGTERM)
        # /ready says 503 from the signal on, while the delay runs
        assert wait_until(lambda: get(srv.port, "/ready", timeout=5).status == 503, 1.5), \
            "/ready still 200 after SIGTERM"
        assert time.monotonic() - t_sig < DELAY_MS / 1000.0, "too slow to observe the delay"
        # then the listener closes: new connections are refused, and the server exits 0
        assert srv.proc.wait(DELAY_MS / 1000.0 + 30) == 0, srv.log()
        assert wait_until(lambda: any(r != 200 and s > t_sig for s, _, r in opener.results), 10)
    finally:
        opener.halt.set()
        opener.join(15)
    during = [(s - t_sig, e - t_sig, r) for s, e, r in opener.results
              if s >= t_sig and e < t_sig + DELAY_MS / 1000.0]
    failed = [x for x in during if x[2] != 200]
    assert len(during) >= 20, "too few connections in the delay to judge: %r" % during
    assert not failed, "connections not served during the drain delay: %r" % failed[:10]
    text = srv.log()
    assert "graceful stop in %d ms" % DELAY_MS in text, text
    assert text.index("graceful stop in") < text.index("draining"), text


@pytest.mark.timeout(60)
def test_second_sigterm_skips_the_delay(start_server):
    srv = start_server("--loop-workers", "1", "--compute-workers", "1",
                       "--drain-delay-ms", "60000")
    os.kill(srv.pid, signal.SIGTERM)
    assert wait_until(lambda: "graceful stop in 60000 ms" in srv.log(), 10), srv.log()
    assert get(srv.port, "/ping").status == 200  # still serving
    os.kill(srv.pid, signal.SIGTERM)
    assert srv.proc.wait(20) == 0, srv.log()
