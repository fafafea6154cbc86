"""HTTP/1.1 behaviour beyond single requests: pipelining order across inline and offloaded
routes, backpressure on a client that never reads, 100-continue both ways, slowloris and slow
bodies (many at once, while /ping keeps answering), head/body/write/keep-alive timeouts, and
EMFILE recovery under a low descriptor limit. Timing bounds are loose on purpose (shared 2-core
machine): they separate "answered at once" from "waited for a timeout", nothing finer."""

import http.client
import os
import resource
import socket
import subprocess
import threading
import time

import pytest

from conftest import (Call, connect, get, peer_closed, proc_cpu_ticks, read_response,
                      server_rx_queue, wait_until)

PING = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"


def health(port):
    return get(port, "/health", timeout=10).json()


# ------------------------------------------------------------------------------ pipelining


@pytest.mark.timeout(60)
def test_pipelined_order_mixes_offloaded_and_inline(start_server):
    srv = start_server("--compute-workers", "1", "--loop-workers", "1")
    reqs = []
    expect = []
    for i in range(12):
        if i % 3 == 0:
            n = 2_000_000 + i
            reqs.append(b"GET /heavy?iterations=%d HTTP/1.1\r\nHost: x\r\n\r\n" % n)
            expect.append(("heavy", n))
        elif i % 3 == 1:
            reqs.append(PING)
            expect.append(("ping", None))
        else:
            body = b"payload-%d" % i
            reqs.append(b"POST /compress HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(body), body))
            expect.append(("compress", body))
    with connect(srv.port, timeout=30) as s:
        s.sendall(b"".join(reqs))  # one write
        for kind, arg in expect:
            r = read_response(s)
            assert r.status == 200, (kind, r)
            if kind == "heavy":
                assert r.json()["iterations"] == arg, r
            elif kind == "ping":
                assert r.body == b"ok", r
            else:
                out = subprocess.run(["zstd", "-dc"], input=r.body, capture_output=True,
                                     check=True).stdout
                assert out == arg, (out, arg)


@pytest.mark.timeout(60)
def test_pipelined_batches_answered_in_order_and_fast(start_server):
    """16 requests per write, 100 times, the way a pipelining client (wrk with a pipeline script,
    a proxy's connection pool) sends them: every answer in order, HEAD without a body, and no
    batch waits for a delayed ACK. Written one by one without TCP_NODELAY, each batch stalled
    ~40 ms (4 s for 100); batched and without Nagle it takes milliseconds. The bound is loose."""
    srv = start_server("--loop-workers", "1", "--compute-workers", "1")
    # The server answers /ping before the master has seen every loop's heartbeat and marked it
    # ready; until then /ready is a 503 (seen on a loaded machine).
    assert wait_until(lambda: get(srv.port, "/ready").status == 200, 20)
    kinds = [("GET", "/ping", 200, b"ok"), ("HEAD", "/ping", 200, b""),
             ("GET", "/nothing", 404, b"Not Found\n"), ("GET", "/ready", 200, b"ready\n")]
    batch = [kinds[i % len(kinds)] for i in range(16)]
    data = b"".join(b"%s %s HTTP/1.1\r\nHost: x\r\n\r\n" % (m.encode(), p.encode())
                    for m, p, _, _ in batch)
    with connect(srv.port, timeout=30) as s:
        t0 = time.monotonic()
        for _ in range(100):
            s.sendall(data)
            buf = b""
            for m, p, status, body in batch:
                while b"\r\n\r\n" not in buf:
                    chunk = s.recv(65536)
                    assert chunk, "closed mid-batch"
                    buf += chunk
                head, _, buf = buf.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 %d " % status), (m, p, head)
                n = len(body)
                assert b"content-length: %d" % (n if m == "GET" else 2) in head.lower(), head
                while len(buf) < n:
                    buf += s.recv(65536)
                assert buf[:n] == body, (m, p, buf[:n])
                buf = buf[n:]
            assert buf == b"", buf
        took = time.monotonic() - t0
    assert took < 2.5, "100 pipelined batches took %.2f s" % took


# ------------------------------------------------------------------------------ backpressure


@pytest.mark.timeout(120)
def test_backpressure_client_never_reads(start_server):
    """A client pipelines far more than it reads: once its unread answers fill the socket
    buffers the server stops reading (its receive queue holds still), stays small, serves
    others, and answers everything in order once the client reads."""
    srv = start_server("--loop-workers", "1", "--compute-workers", "1")
    loop_pid = srv.children("loop")[0]
    total = 20000  # ~0.7 MB of requests, ~6.5 MB of answers: more than the socket buffers
    req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    data = req * total
    s = connect(srv.port, timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.setblocking(False)
    sent = 0
    deadline = time.monotonic() + 5
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += s.send(data[sent:sent + 65536])
        except BlockingIOError:
            time.sleep(0.01)
    port = s.getsockname()[1]
    seen = []

    def holds_still():
        # bytes left unread that stay unread for a second; how soon the server gets there
        # (answering until the buffers fill) depends on the machine's load, so it is polled
        q1 = server_rx_queue(srv.port, port)
        time.sleep(1.0)
        q2 = server_rx_queue(srv.port, port)
        seen.append((q1, q2))
        return q1 and q1 == q2
    assert wait_until(holds_still, 20), "server kept reading (unread then): %r" % seen[-5:]
    assert get(srv.port, "/ping", timeout=5).status == 200  # others are served meanwhile
    with open("/proc/%d/status" % loop_pid) as f:
        rss_kb = int([l for l in f if l.startswith("VmRSS")][0].split()[1])
    assert rss_kb < 200 * 1024, rss_kb
    # now read everything: all answers arrive in order while the rest of the requests go in
    s.setblocking(True)
    s.settimeout(30)
    rest = threading.Thread(target=s.sendall, args=(data[sent:],), daemon=True)
    rest.start()
    for i in range(total):
        r = read_response(s)
        assert r.status == 200 and r.json()["status"] == "ok", (i, r)
    rest.join(30)
    s.close()


# ------------------------------------------------------------------------------ 100-continue


def send_expect_head(port, path, length, extra=b""):
    s = connect(port, timeout=10)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n%s\r\n"
              % (path.encode(), length, extra))
    return s


@pytest.mark.timeout(60)
def test_100_continue_then_body(start_server):
    srv = start_server("--compute-workers", "1")
    body = b"x" * 5000
    with send_expect_head(srv.port, "/compress", len(body)) as s:
        interim = read_response(s, read_body=False)
        assert interim.status == 100, interim
        s.sendall(body)
        r = read_response(s)
        assert r.status == 200, r
        out = subprocess.run(["zstd", "-dc"], input=r.body, capture_output=True, check=True).stdout
        assert out == body


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path,length,status", [
    ("/compress", 1 << 40, 413),   # over --max-body: no 100, final status at once
    ("/nope", 10, 404),            # will not be served: no 100
    ("/ping", 10, 405),
])
def test_100_continue_refused_at_once(start_server, path, length, status):
    srv = start_server("--compute-workers", "1", "--max-body", "1M")
    with send_expect_head(srv.port, path, length) as s:
        t0 = time.monotonic()
        r = read_response(s)
        assert r.status == status, r
        assert time.monotonic() - t0 < 5
        assert r.header("connection") == "close"
        assert peer_closed(s), "connection left open with an unread body"


@pytest.mark.timeout(60)
def test_405_with_a_body_over_max_discard_keeps_allow_chunked_or_not(start_server):
    """A method the path does not serve, with a body longer than --max-discard, is a 405 with
    Allow and a close whether the body has a Content-Length (refused at the head) or is
    chunked (refused once --max-discard bytes have arrived); it used to be a chunked 413."""
    srv = start_server("--compute-workers", "1", "--max-discard", "1K")
    heads = (b"Content-Length: 4096\r\n", b"Transfer-Encoding: chunked\r\n")
    for path, status in (("/ping", 405), ("/nope", 404)):
        for head in heads:
            with connect(srv.port, timeout=10) as s:
                s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path.encode(), head))
                chunk = b"x" * 2048
                s.sendall(chunk if head.startswith(b"Content") else b"800\r\n" + chunk + b"\r\n")
                r = read_response(s)
                assert r.status == status, (path, head, r)
                assert r.header("connection") == "close", r
                if status == 405:
                    allow = sorted(m.strip() for m in r.header("allow", "").split(","))
                    assert allow == ["GET", "HEAD"], (head, r)


@pytest.mark.timeout(60)
def test_100_continue_pool_full_is_503_without_100(start_server):
    srv = start_server("--compute-workers", "1", "--queue", "0")
    from conftest import heavy_iterations_for
    n = heavy_iterations_for(srv.port, 3.0)
    busy = Call(get, srv.port, "/heavy?iterations=%d" % n, timeout=60)
    busy.start()
    assert wait_until(lambda: health(srv.port)["slots"]["free"] == 0, 10)
    with send_expect_head(srv.port, "/compress", 100) as s:
        r = read_response(s)
        assert r.status == 503 and r.header("retry-after"), r
        assert peer_closed(s)
    assert busy.get(60).status == 200


# ------------------------------------------------------------------------------ slow clients


@pytest.mark.timeout(90)
def test_slowloris_many_clients_get_408_while_ping_answers(start_server):
    srv = start_server("--loop-workers", "1", "--head-timeout-ms", "1500",
                       "--keepalive-timeout-ms", "60000")
    socks = []
    for i in range(50):
        s = connect(srv.port, timeout=10)
        s.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    t0 = time.monotonic()
    # drip a header line now and then: a total head deadline, not an idle one, stops them
    lat = []
    while time.monotonic() - t0 < 1.2:
        for s in socks:
            s.sendall(b"X: y\r\n")
        a = time.monotonic()
        assert get(srv.port, "/ping", timeout=5).status == 200
        lat.append(time.monotonic() - a)
        time.sleep(0.2)
    assert max(lat) < 2.0, lat
    for s in socks:
        r = read_response(s)
        assert r.status == 408, r
        assert r.header("connection") == "close"
        assert peer_closed(s, timeout=5)
        s.close()
    assert time.monotonic() - t0 < 15


@pytest.mark.timeout(60)
def test_idle_connection_closed_silently(start_server):
    srv = start_server("--head-timeout-ms", "800")
    with connect(srv.port) as s:
        t0 = time.monotonic()
        s.settimeout(10)
        assert s.recv(100) == b""  # no 408 for a connection that never sent anything
        assert 0.5 < time.monotonic() - t0 < 8


@pytest.mark.timeout(60)
def test_keepalive_timeout_closes_idle_connection(start_server):
    srv = start_server("--keepalive-timeout-ms", "700", "--head-timeout-ms", "30000")
    with connect(srv.port) as s:
        s.sendall(PING)
        assert read_response(s).status == 200
        t0 = time.monotonic()
        s.settimeout(10)
        assert s.recv(100) == b""
        assert 0.4 < time.monotonic() - t0 < 8


@pytest.mark.timeout(90)
def test_slow_body_releases_slot_and_others_proceed(start_server):
    """Uploads that trickle past the body timeout get 408 and give their transit buffers back
    (they never held a job slot); meanwhile /ping answers, and afterwards every buffer is free
    again."""
    srv = start_server("--compute-workers", "1", "--queue", "3", "--body-timeout-ms", "800",
                       "--body-deadline-ms", "2000", "--transit-buffers", "4")
    total = health(srv.port)["transit_buffers"]["total"]
    assert total == 4
    socks = []
    for i in range(total):
        s = connect(srv.port, timeout=10)
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
        socks.append(s)
    assert wait_until(lambda: health(srv.port)["transit_buffers"]["free"] == 0, 5)
    assert health(srv.port)["slots"]["free"] == 4  # no job slot is held by an upload
    # one more upload is refused at once: the buffers are held by the tricklers
    with connect(srv.port) as s:
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        assert read_response(s).status == 503
    t0 = time.monotonic()
    # trickle faster than the silence limit: the total body deadline still ends them
    while time.monotonic() - t0 < 1.5:
        for s in socks:
            s.sendall(b"x")
        assert get(srv.port, "/ping", timeout=5).status == 200
        time.sleep(0.3)
    for s in socks:
        r = read_response(s)
        assert r.status == 408, r
        s.close()
    assert wait_until(lambda: health(srv.port)["transit_buffers"]["free"] == total, 5)
    r = request_compress(srv.port, b"after")
    assert r.status == 200


def request_compress(port, body):
    from conftest import request
    return request(port, "POST", "/compress", body=body)


@pytest.mark.timeout(60)
def test_write_timeout_closes_a_client_that_stops_reading(start_server):
    srv = start_server("--loop-workers", "1", "--write-timeout-ms", "800", "--max-body", "16M")
    body = os.urandom(8 << 20)  # incompressible: an 8 MiB answer
    s = connect(srv.port, timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    s.sendall(b"POST /compress?level=1 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
              % len(body) + body)
    assert wait_until(lambda: health(srv.port)["connections"] <= 1, 20, interval=0.2)
    # the stalled connection is gone; reading now ends early (EOF or reset)
    s.settimeout(10)
    got = 0
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
    except ConnectionError:
        pass
    assert got < len(body)
    s.close()
    assert get(srv.port, "/ping").status == 200
    assert srv.running()


@pytest.mark.timeout(60)
def test_client_reset_mid_response_kills_nothing(start_server):
    srv = start_server("--loop-workers", "1", "--max-body", "16M")
    loops = srv.children("loop")
    body = os.urandom(4 << 20)
    for _ in range(5):
        s = connect(srv.port, timeout=30)
        s.sendall(b"POST /compress?level=1 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                  % len(body) + body)
        s.recv(1000)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()  # RST
    assert get(srv.port, "/ping").status == 200
    assert srv.children("loop") == loops


# ------------------------------------------------------------------------------ EMFILE


@pytest.mark.timeout(90)
def test_emfile_does_not_spin_and_recovers(start_server, tmp_path):
    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    from conftest import Server
    srv = Server(["--loop-workers", "1", "--compute-workers", "1"], workdir=str(tmp_path),
                 preexec_fn=low_nofile)
    try:
        loop = srv.children("loop")[0]
        held = []
        for _ in range(120):  # more than the loop worker can hold open
            s = connect(srv.port, timeout=10)
            held.append(s)
        assert wait_until(lambda: "pausing accept" in srv.log(), 10)
        t0, c0 = time.monotonic(), proc_cpu_ticks(loop)
        time.sleep(2.0)
        ticks = proc_cpu_ticks(loop) - c0
        hz = os.sysconf("SC_CLK_TCK")
        assert ticks / hz / (time.monotonic() - t0) < 0.5, "loop worker spins at EMFILE"
        for s in held:
            s.close()
        # descriptors free up: the server recovers by itself
        assert wait_until(lambda: ping_ok(srv.port), 15)
        assert srv.children("loop") == [loop]
    finally:
        srv.kill_all()


def ping_ok(port):
    try:
        return get(port, "/ping", timeout=2).status == 200
    except (OSError, http.client.HTTPException):
        return False


# ------------------------------------------------------------------------------ interop


@pytest.mark.timeout(60)
def test_http_client_keepalive_and_chunked_upload(start_server):
    srv = start_server("--compute-workers", "1")
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request("GET", "/ping")
        r = conn.getresponse()
        assert r.read() == b"ok"
        local = conn.sock.getsockname()
        # a chunked upload (encode_chunked with an iterable body)
        parts = [b"hello ", b"chunked ", b"world"]
        conn.request("POST", "/compress", body=iter(parts), encode_chunked=True,
                     headers={"Transfer-Encoding": "chunked"})
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200
        out = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True).stdout
        assert out == b"".join(parts)
        conn.request("HEAD", "/ping")
        r = conn.getresponse()
        assert r.status == 200 and r.read() == b"" and r.getheader("Content-Length") == "2"
        assert conn.sock.getsockname() == local, "keep-alive not kept"
    finally:
        conn.close()


@pytest.mark.timeout(60)
def test_curl_keepalive_and_expect(start_server, tmp_path):
    srv = start_server("--compute-workers", "1")
    url = srv.url("/ping")
    out = subprocess.run(["curl", "-sS", "-v", url, url, url], capture_output=True, timeout=30)
    assert out.returncode == 0 and out.stdout == b"okokok", out
    assert out.stderr.count(b"Re-using existing connection") + \
        out.stderr.count(b"Reusing existing connection") >= 2, out.stderr
    big = tmp_path / "big"
    big.write_bytes(os.urandom(3 << 20))  # curl sends Expect: 100-continue above 1 MiB
    out = subprocess.run(["curl", "-sS", "-v", "--data-binary", "@%s" % big, srv.url("/compress")],
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert b"HTTP/1.1 100 Continue" in out.stderr, out.stderr
    dec = subprocess.run(["zstd", "-dc"], input=out.stdout, capture_output=True, check=True).stdout
    assert dec == big.read_bytes()


@pytest.mark.timeout(120)
def test_wrk_keepalive(start_server):
    wrk = "/usr/bin/wrk"
    if not os.access(wrk, os.X_OK):
        pytest.skip("wrk not installed (Debian package wrk, in DEB_PKGS)")
    srv = start_server()
    out = subprocess.run([wrk, "-t2", "-c20", "-d2s", srv.url("/ping")], capture_output=True,
                         timeout=60, text=True)
    assert out.returncode == 0, out.stderr
    assert "Socket errors" not in out.stdout, out.stdout
    assert "Non-2xx" not in out.stdout, out.stdout
    reqs = [l for l in out.stdout.splitlines() if "requests in" in l]
    assert reqs and int(reqs[0].split()[0]) > 1000, out.stdout
    # 20 connections carried every request: keep-alive (wrk's closes reach the loops a moment
    # after it exits, so the count is waited for, not read once)
    assert wait_until(lambda: health(srv.port)["connections"] <= 2, 10), health(srv.port)
