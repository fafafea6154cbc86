"""Regression (issue 18, section 3): the waiters of a failed coalesced job on the loop worker
that ran it got the kind's own message, those parked on another loop worker a generic text
("Internal Server Error"). Every waiter now gets the same status and body, on every loop: the
message reaches the other loops through the cache, and without room there (no cache at all)
their waiters ask again rather than answer something else."""
import pytest

from conftest import connect, read_response


def sockets_on_both_loops(port, each=4):
    """Keep-alive connections told apart by the loop worker that answers /health on them."""
    by_loop = {}
    for _ in range(400):
        s = connect(port, timeout=30)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        pid = read_response(s).json()["pid"]
        if len(by_loop.get(pid, [])) >= each:
            s.close()
        else:
            by_loop.setdefault(pid, []).append(s)
        if len(by_loop) == 2 and min(len(v) for v in by_loop.values()) >= each:
            return by_loop
    pytest.fail("connections all landed on one loop worker")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("cache", ["64M", "0"])
def test_every_waiter_of_a_failed_flight_gets_the_kinds_message(start_server, cache):
    srv = start_server("--loop-workers", "2", "--compute-workers", "1", "--enable-test-jobs",
                       "1", "--cache-bytes", cache, "--coalesce", "/test/sleep")
    by_loop = sockets_on_both_loops(srv.port)
    req = b"GET /test/sleep?ms=1500&fail=1 HTTP/1.1\r\nHost: x\r\n\r\n"
    for socks in by_loop.values():
        for s in socks:
            s.sendall(req)
    got = {pid: [read_response(s) for s in socks] for pid, socks in by_loop.items()}
    for socks in by_loop.values():
        for s in socks:
            s.close()
    for pid, rs in got.items():
        for r in rs:
            assert r.status == 500 and r.body == b"failed as asked\n", (pid, r)
            assert r.header("Content-Type") == "text/plain", (pid, r)
            assert r.header("X-Cache") in ("miss", "coalesced"), (pid, r)
    labels = sorted(r.header("X-Cache") for rs in got.values() for r in rs)
    # one job for all eight; without a cache, one more for the other loop's waiters
    assert labels.count("miss") == (1 if cache != "0" else 2), labels
