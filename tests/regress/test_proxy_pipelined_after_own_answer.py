"""Regression (hostile trial of the proxy): a 502 or 504 that lagless writes itself for an
upstream's fault, while the client had pipelined another request behind it, was queued for a
batch that nothing flushed: the client got no byte and the connection hung, while the access
log said 502. The upstream room now resumes the connection after such an answer, as the job
room does after a job's (lg_conn_resume), so the answer goes out and the next request is
served."""
import re
import socket
import sys
import os
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from origin import Origin  # noqa: E402


@pytest.fixture
def origin(tmp_path):
    o = Origin(unix_path=str(tmp_path / "app.sock")).start()
    yield o
    o.stop()


def answers(port, data, want, timeout):
    """Sends data at once, returns the statuses of the first `want` answers (fewer if the
    server closes or timeout seconds pass)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        buf, end = b"", time.monotonic() + timeout
        while time.monotonic() < end:
            got = re.findall(rb"HTTP/1\.1 (\d{3}) [^\r]*\r\n(?:[^\r]+\r\n)*?Content-Length: (\d+)"
                             rb"\r\n(?:[^\r]+\r\n)*\r\n", buf)
            if len(got) >= want and buf.endswith(b"ok\n"):
                break
            s.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            buf += chunk
    return [int(x) for x in re.findall(rb"(?:^|\n)HTTP/1\.1 (\d{3}) ", buf)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("first, status", [("cl-and-te", 502), ("hold", 504)])
def test_own_answer_before_a_pipelined_request_is_sent(start_server, tmp_path, origin, first,
                                                       status):
    conf = tmp_path / "p.conf"
    conf.write_text("[upstream app]\nserver = %s\nmax_conns = 4\nqueue = 4\n\n"
                    "[route /api/*]\nupstream = app\ndeadline_ms = 1000\n" % origin.unix_server)
    srv = start_server("--loop-workers", "1", "--compute-workers", "1", "-c", str(conf))
    two = (b"GET /api/%s HTTP/1.1\r\nHost: a\r\n\r\nGET /api/ok HTTP/1.1\r\nHost: a\r\n\r\n"
           % first.encode())
    got = answers(srv.port, two, 2, timeout=10)
    origin.release_all()
    assert got == [status, 200], (got, srv.log()[-2000:])
