"""The per-client defences key on the real client behind a trusted proxy (issue 39 section 1).
Through HAProxy every request came from HAProxy's address: with the default
--transit-share-pct 50, 18 slow uploads over 3 replicas made every heavy request a 503
client_share while half the transit buffers were free; with --transit-share-pct 100, cutting
one slow upload locked HAProxy's address, so every client, out for 5 s. The client is now the
one a trusted peer names: its rightmost untrusted X-Forwarded-For entry, or the address of the
PROXY protocol header on a ",proxy" listener. Here the "proxy" is a raw client on the trusted
127.0.0.1 forwarding twelve tricklers and one good client."""
import os
import re
import socket
import threading
import time

import pytest

from conftest import free_port, get, read_response, wait_until
from haproxy_rig import HAPROXY, HAProxy, Replica


def sample(text, series):
    m = re.search(r"^%s (\S+)$" % re.escape(series), text, re.M)
    return float(m.group(1)) if m else None


def uploading(port):
    text = get(port, "/metrics", timeout=5).body.decode()
    return sample(text, 'lagless_transit_buffers_in_use{state="uploading"}') or 0


def forwarded(mode, client):
    """What the proxy puts before the request line (PROXY header) and among the fields
    (X-Forwarded-For) for client; nothing when client is None (a real proxy adds them)."""
    if client is None:
        return b"", b""
    if mode == "proxy":
        return b"PROXY TCP4 %s 127.0.0.1 40000 80\r\n" % client.encode(), b""
    return b"", b"X-Forwarded-For: %s\r\n" % client.encode()


def trickler(port, mode, client, stop, source="127.0.0.1"):
    """POST /compress announcing 10 MB, 120 bytes every 0.1 s (above --min-upload-rate), sent
    for client; reconnects at once whenever answered (503, or 408 when cut) or closed."""
    pre, field = forwarded(mode, client)
    head = pre + b"POST /compress HTTP/1.1\r\nHost: t\r\n" + field + \
        b"Content-Length: 10000000\r\n\r\n"
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5,
                                         source_address=(source, 0))
        except OSError:
            stop.wait(0.05)
            continue
        try:
            s.sendall(head)
            s.setblocking(False)
            while not stop.wait(0.1):
                try:
                    s.recv(4096)
                    break  # answered or closed: reconnect
                except BlockingIOError:
                    pass
                s.sendall(b"x" * 120)
        except OSError:
            pass
        finally:
            s.close()


def heavy_for(port, mode, client, source="127.0.0.1"):
    pre, field = forwarded(mode, client)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10,
                                      source_address=(source, 0)) as s:
            s.settimeout(10)
            s.sendall(pre + b"GET /heavy?iterations=1000 HTTP/1.1\r\nHost: t\r\n" + field +
                      b"Connection: close\r\n\r\n")
            return read_response(s).status
    except (OSError, EOFError):
        return 0


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["xff", "proxy"])
@pytest.mark.parametrize("share", ["50", "100"])
def test_forwarded_clients_have_shares_and_lock_outs_of_their_own(start_server, mode, share):
    pport = free_port()
    srv = start_server("--listen", "127.0.0.1:0", "--listen", "127.0.0.1:%d,proxy" % pport,
                       "--trusted-proxies", "127.0.0.1", "--transit-share-pct", share,
                       "--compute-workers", "1", "--queue", "2", "--transit-buffers", "12",
                       "--loop-workers", "2")
    port = pport if mode == "proxy" else srv.port
    stop = threading.Event()
    ts = [threading.Thread(target=trickler, args=(port, mode, "10.0.0.%d" % (10 + i), stop),
                           daemon=True) for i in range(12)]
    for t in ts:
        t.start()
    try:
        # twelve clients, each under its share: all twelve hold a buffer (before: six, the
        # proxy's share, at 50 %)
        assert wait_until(lambda: uploading(srv.port) == 12, 15), srv.log()[-2000:]
        # another client through the same proxy: its request finds every buffer held, gets
        # 503 and has the slowest upload cut; the lock-out is that trickler's, so the good
        # client's retry after Retry-After gets the buffer (before: the proxy's address was
        # locked out, every client with it, for 5 s)
        t0, results = time.monotonic(), []
        while time.monotonic() - t0 < 7:
            st = heavy_for(port, mode, "10.9.9.9")
            results.append((round(time.monotonic() - t0, 2), st))
            time.sleep(1.0 if st == 503 else 0.2)  # Retry-After: 1
        ok = [t for t, st in results if st == 200]
        assert ok and ok[0] < 3.5, results
        longest, since = 0.0, None
        for t, st in results:
            if st == 200 and since is not None:
                longest = max(longest, t - since)
            since = None if st == 200 else since if since is not None else t
        assert longest < 3.5 and (since is None or results[-1][0] - since < 3.5), results
        assert set(st for _, st in results) <= {200, 503}, results
    finally:
        stop.set()
        for t in ts:
            t.join(5)
    assert "per-client rules" not in srv.log()  # no warning: the proxy is trusted


@pytest.mark.timeout(60)
def test_an_untrusted_forwarding_peer_is_warned_about_once(start_server):
    srv = start_server("--compute-workers", "1", "--loop-workers", "1")  # once per loop
    for i in range(3):
        r = heavy_for(srv.port, "xff", "10.0.0.%d" % i)
        assert r == 200, r
    assert wait_until(lambda: "per-client rules" in srv.log(), 5), srv.log()[-2000:]
    assert srv.log().count("per-client rules") == 1, srv.log()[-2000:]


@pytest.mark.timeout(120)
@pytest.mark.skipif(not os.access(HAPROXY, os.X_OK), reason="no haproxy")
def test_through_the_reference_haproxy(tmp_path):
    """The issue's setting: the real haproxy with the reference configuration (its option
    forwardfor) in front of a replica run as the reference says (--trusted-proxies: haproxy's
    address). Twelve tricklers from twelve addresses hold all twelve transit buffers at the
    default --transit-share-pct 50 (before: six, haproxy's share, the others refused), and a
    client from another address is served after at most a Retry-After or two."""
    rep = Replica(str(tmp_path / "r1"), compute=1, queue=2,
                  extra=["--transit-buffers", "12"]).start()
    hp, stop, ts = None, threading.Event(), []
    try:
        hp = HAProxy(str(tmp_path), [rep])
        assert wait_until(lambda: hp.all_up(1), 30), hp.stats()
        ts = [threading.Thread(target=trickler, args=(hp.port, "xff", None, stop),
                               kwargs={"source": "127.0.0.%d" % (10 + i)}, daemon=True)
              for i in range(12)]
        for t in ts:
            t.start()
        assert wait_until(lambda: uploading(rep.port) == 12, 20), rep.srv.log()[-2000:]
        t0, results = time.monotonic(), []
        while time.monotonic() - t0 < 7:
            st = heavy_for(hp.port, "xff", None, source="127.0.0.2")
            results.append((round(time.monotonic() - t0, 2), st))
            if st == 200:
                break
            time.sleep(1.0)  # Retry-After: 1
        assert results[-1][1] == 200 and results[-1][0] < 4, results
    finally:
        stop.set()
        for t in ts:
            t.join(5)
        if hp is not None:
            hp.stop()
        rep.stop()
