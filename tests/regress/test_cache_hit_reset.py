"""Regression (issue 18, 1): a client that sent a request answered from the TTL cache and reset
the connection at once (SO_LINGER 0) killed loop workers with SIGSEGV. The answer's write failed,
which closed the connection inside the respond call and gave its block back to the loop's pool;
the dispatcher then read the freed block (the route statistics) and crashed. Twenty such deaths
in a few seconds made the master give up and exit 1: every route down.

Resets are also sent while waiting on a coalesced job and on a miss (the connection owns the
flight), the other two ways a cached route's answer meets a vanished client.
"""
import re
import socket
import struct
import threading

import pytest

from conftest import connect, get, heavy_iterations_for, metric, wait_jobs, wait_until

RESETS = 300


def reset_after(port, payload):
    """Sends payload and resets the connection at once (SO_LINGER 0: close sends RST)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.sendall(payload)
    s.close()


def hammer(port, payload, count, errors):
    for _ in range(count):
        try:
            reset_after(port, payload)
        except OSError as e:  # a refused connect would mean the server is gone
            errors.append(repr(e))


def resets_from_threads(port, payload, total, threads=4):
    errors = []
    ts = [threading.Thread(target=hammer, args=(port, payload, total // threads, errors))
          for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts)
    return errors


def same_loops(srv, loops):
    """The loop workers alive now are the ones of the start: none died and was replaced."""
    now = srv.children("loop")
    assert now == loops, "loop workers replaced: %r -> %r\n%s" % (loops, now, srv.log()[-3000:])


@pytest.mark.timeout(120)
def test_reset_on_cache_hit_kills_no_loop(start_server):
    srv = start_server("--loop-workers", "2", "--compute-workers", "1", "--coalesce",
                       "/heavy ttl=600000 query=iterations")
    loops = srv.wait_children("loop", 2)
    path = "/heavy?iterations=1000"
    assert get(srv.port, path).header("X-Cache") == "miss"
    assert get(srv.port, path).header("X-Cache") == "hit"
    req = ("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode()
    errors = resets_from_threads(srv.port, req, RESETS)
    assert errors == [], errors[:5]
    # every loop still answers, from the cache, and none was replaced
    for _ in range(8):
        r = get(srv.port, path)
        assert r.status == 200 and r.header("X-Cache") == "hit", r
    same_loops(srv, loops)
    assert not re.search(r"loop\[\d+\] pid=\d+ killed by signal", srv.log()), srv.log()[-3000:]
    assert srv.running()


def park_then_reset(port, payload, count, before, timeout=30.0):
    """Opens count connections that each send payload (a request for a key in flight), waits
    until the server counts them all as coalesced waiters (lagless_coalesced_waiters_total at
    least before + count), then resets every one at once (SO_LINGER 0). Waiting for the parks
    makes each reset meet a parked waiter: a reset sent right after the request can arrive
    before a busy loop has read it, and is then only a reset of an idle connection."""
    socks = []
    try:
        for _ in range(count):
            s = connect(port, timeout=timeout)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.sendall(payload)
            socks.append(s)
        parked = wait_until(lambda: metric(port, "lagless_coalesced_waiters_total")
                            >= before + count, timeout=timeout)
    finally:
        for s in socks:
            s.close()
    return parked


@pytest.mark.timeout(180)
def test_reset_on_coalesced_wait_and_miss_kills_no_loop(start_server):
    srv = start_server("--loop-workers", "2", "--compute-workers", "1", "--coalesce",
                       "/heavy ttl=600000 query=iterations")
    loops = srv.wait_children("loop", 2)
    # long enough that every waiter of a round parks while it runs, on a loaded machine too;
    # the round does not wait for it: the last waiter's leaving cancels it
    n = heavy_iterations_for(srv.port, 5.0)
    # A job in flight that waiters join and leave by a reset (coalesced waits); then the last
    # waiter leaves. A distinct key per round keeps the first request a miss.
    for i in range(4):
        path = "/heavy?iterations=%d" % (n + i)
        req = ("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode()
        assert wait_jobs(srv.port, running=0, queued=0, timeout=30)
        holder = connect(srv.port, timeout=60)
        holder.sendall(req)
        assert wait_jobs(srv.port, running=1, timeout=30)
        joined = metric(srv.port, "lagless_coalesced_waiters_total")
        assert park_then_reset(srv.port, req, 20, joined), srv.log()[-3000:]
        # resets right after the request too: each meets a parked waiter or a request not
        # yet read, whichever the loop's timing gives
        errors = resets_from_threads(srv.port, req, 20, threads=2)
        assert errors == [], errors[:5]
        holder.close()  # the last waiter leaves: the running job's answer has no taker
        # and misses that are reset: each owns its key's flight and leaves it
        assert wait_jobs(srv.port, running=0, queued=0, timeout=30)
        errors = resets_from_threads(srv.port, ("GET /heavy?iterations=%d HTTP/1.1\r\n"
                                                "Host: x\r\n\r\n" % (n + 100 + i)).encode(),
                                     4, threads=2)
        assert errors == [], errors[:5]
    assert wait_jobs(srv.port, running=0, queued=0, timeout=60)
    r = get(srv.port, "/heavy?iterations=1000")
    assert r.status == 200, r
    same_loops(srv, loops)
    assert not re.search(r"loop\[\d+\] pid=\d+ killed by signal", srv.log()), srv.log()[-3000:]
