"""Regression: the master's once-a-second hole punch refused requests below capacity.

It punched every FREE slot that had used >= 1 MiB, including one freed a millisecond earlier
and about to be claimed again; while the pages went the slot was RECLAIMING, which a claim
skips, so a client sending back-to-back large jobs, with no more jobs in flight than there
are slots, got 503 (found by `make bench`, benchmark 4: 1 to 6 of 20 jobs refused). Now a slot
is punched only after it stayed FREE and unclaimed for a whole trim period, and its pages
still come back once it is idle.

The jobs go out with `Expect: 100-continue`, so a refusal is seen as a 503 rather than as a
reset while the body is being sent."""

import os
import re
import threading
import time

import pytest

from conftest import connect, wait_until

BODY = (b"lagless trim regression " * 45000)[:1 << 20] * 8  # 8 MiB: well past the 1 MiB mark
RUN_S = 5.0  # five trim periods
CLIENTS = 6  # = C + Q: every slot in use, none over capacity


def one_job(port):
    """One POST /compress; returns its status (the interim 100 is skipped)."""
    with connect(port, timeout=30) as s:
        s.sendall(b"POST /compress?level=1 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                  b"Expect: 100-continue\r\n\r\n" % len(BODY))
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            assert chunk, "closed before an answer: %r" % buf
            buf += chunk
        if buf.startswith(b"HTTP/1.1 100"):
            buf = buf.partition(b"\r\n\r\n")[2]
            s.sendall(BODY)
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(65536)
                assert chunk, "closed before the final answer"
                buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        m = re.search(rb"(?i)content-length: *(\d+)", head)
        need = int(m.group(1)) - len(rest) if m else 0
        while need > 0:
            chunk = s.recv(1 << 20)
            assert chunk, "closed mid-body"
            need -= len(chunk)
        return status


def arena_bytes(pid):
    """Resident bytes of the master's memfd (st_blocks), or None."""
    for fd in os.listdir("/proc/%d/fd" % pid):
        path = "/proc/%d/fd/%s" % (pid, fd)
        try:
            if os.readlink(path).startswith("/memfd:"):
                return os.stat(path).st_blocks * 512
        except OSError:
            continue
    return None


@pytest.mark.timeout(90)
def test_back_to_back_large_jobs_within_capacity_are_not_refused(start_server):
    # One loop worker: it frees a slot in the same callback that writes the last byte of the
    # answer, before it can read the client's next request, so the only way to a 503 here is
    # a slot that is FREE but being punched. (With two loop workers, the other one can see the
    # next request before the slot of the previous answer is freed; that is a separate race.)
    srv = start_server("--compute-workers", "1", "--queue", str(CLIENTS - 1),
                       "--loop-workers", "1")
    statuses, errors = [], []
    end = time.monotonic() + RUN_S

    def client():
        try:
            while time.monotonic() < end:
                statuses.append(one_job(srv.port))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(statuses) >= 6, statuses
    refused = statuses.count(503)
    assert refused == 0, "%d of %d jobs refused with at most C+Q in flight" % (refused,
                                                                              len(statuses))
    assert set(statuses) == {200}, statuses
    # The pages still come back once the slots are idle (1 to 2 trim periods).
    assert wait_until(lambda: (arena_bytes(srv.pid) or 0) < (1 << 20), 10), arena_bytes(srv.pid)
