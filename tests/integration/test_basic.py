"""Routes: /ping, /health, 404/405, /heavy (results checked independently), /compress round
trips through the zstd CLI, 400 for bad parameters, 413 from Content-Length alone."""

import re
import glob
import http.client
import os
import subprocess

import pytest

from conftest import (Response, connect, get, heavy_result, heavy_result_loop, read_response,
                      request)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One default server for the read-only route tests of this module."""
    from conftest import LAGLESS_BIN, Server
    if LAGLESS_BIN is None:
        pytest.skip("lagless binary missing")
    srv = Server(["--compute-workers", "2"], workdir=str(tmp_path_factory.mktemp("basic")))
    yield srv
    srv.kill_all()
    crashes = srv.crash_reports()
    assert not crashes, "server log shows a crash or sanitizer report: %r" % crashes[:10]


# ------------------------------------------------------------------------------------ inline


@pytest.mark.timeout(30)
def test_ping_and_health_keepalive(shared_server):
    conn = http.client.HTTPConnection("127.0.0.1", shared_server.port, timeout=5)
    try:
        local = None
        for i in range(6):
            path = "/ping" if i % 2 == 0 else "/health"
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
            assert r.status == 200, (path, r.status, body)
            if path == "/ping":
                assert body == b"ok", body
            else:
                import json
                doc = json.loads(body.decode())
                assert isinstance(doc, dict), doc
                assert doc.get("status") == "ok", doc
            assert (r.getheader("Connection") or "").lower() != "close", r.getheaders()
            # http.client silently reconnects when the server closed: the socket must be the
            # same one for every request
            assert conn.sock is not None, "server closed the keep-alive connection after %s" % path
            name = conn.sock.getsockname()
            if local is None:
                local = name
            assert name == local, "a new connection was opened (keep-alive not honoured)"
    finally:
        conn.close()


@pytest.mark.timeout(30)
def test_pipelined_requests_on_one_connection(shared_server):
    with connect(shared_server.port) as s:
        s.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        r1 = read_response(s)
        r2 = read_response(s)
    assert r1.status == 200 and r1.body == b"ok", r1
    assert r2.status == 200 and b"ok" in r2.body, r2


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", ["/nope", "/pingx", "/heavyx", "/", "/ping/extra"])
def test_unknown_path_404(shared_server, path):
    r = get(shared_server.port, path, timeout=5)
    assert r.status == 404, r


@pytest.mark.timeout(30)
@pytest.mark.parametrize("method,path", [
    ("POST", "/ping"),
    ("DELETE", "/ping"),
    ("PUT", "/health"),
    ("GET", "/compress"),
    ("DELETE", "/heavy?iterations=1"),
])
def test_wrong_method_405(shared_server, method, path):
    r = request(shared_server.port, method, path, body=b"" if method in ("POST", "PUT") else None,
                timeout=5)
    assert r.status == 405, r


# ------------------------------------------------------------------------------------ /heavy


def test_reference_closed_form_matches_loop():
    # the closed form used below is itself checked against the literal loop
    for n in (0, 1, 2, 3, 1000, 123457, 300000):
        assert heavy_result(n) == heavy_result_loop(n), n


def check_heavy_doc(doc, n):
    for key in ("iterations", "result", "queue_ms", "run_ms"):
        assert key in doc, (key, doc)
    assert doc["iterations"] == n, doc
    assert isinstance(doc["result"], int) and not isinstance(doc["result"], bool), doc
    assert doc["result"] == heavy_result(n), (n, doc, heavy_result(n))
    for key in ("queue_ms", "run_ms"):
        assert isinstance(doc[key], (int, float)) and not isinstance(doc[key], bool), doc
        assert doc[key] >= 0, doc


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n", [0, 1, 2, 1000, 123457, 5_000_000])
def test_heavy_result(shared_server, n):
    r = get(shared_server.port, "/heavy?iterations=%d" % n, timeout=30)
    assert r.status == 200, r
    assert "json" in (r.header("content-type") or ""), r.headers
    check_heavy_doc(r.json(), n)


@pytest.mark.timeout(60)
def test_heavy_5m_matches_python_loop(shared_server):
    n = 5_000_000
    r = get(shared_server.port, "/heavy?iterations=%d" % n, timeout=30)
    assert r.status == 200, r
    assert r.json()["result"] == heavy_result_loop(n)


@pytest.mark.timeout(60)
def test_heavy_default_iterations(shared_server):
    r = get(shared_server.port, "/heavy", timeout=30)
    assert r.status == 200, r
    check_heavy_doc(r.json(), 60_000_000)


@pytest.mark.timeout(60)
def test_heavy_keepalive_then_ping(shared_server):
    # an offloaded answer must leave the keep-alive connection usable
    conn = http.client.HTTPConnection("127.0.0.1", shared_server.port, timeout=20)
    try:
        conn.request("GET", "/heavy?iterations=1000")
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200, body
        name = conn.sock.getsockname() if conn.sock else None
        conn.request("GET", "/ping")
        r = conn.getresponse()
        assert r.status == 200 and r.read() == b"ok"
        assert conn.sock is not None and conn.sock.getsockname() == name
    finally:
        conn.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("query", [
    "iterations=-1",
    "iterations=abc",
    "iterations=1e3",
    "iterations=",
    "iterations=99999999999999999999",
    "iterations=1000000000001",
    "iterations=12abc",
    "iterations=0x10",
])
def test_heavy_bad_iterations_400(shared_server, query):
    r = get(shared_server.port, "/heavy?" + query, timeout=10)
    assert r.status == 400, (query, r)


@pytest.mark.timeout(30)
def test_heavy_percent_encoded_iterations_are_decoded(shared_server):
    # "%31%30" is "10" (RFC 3986 section 6.2.2.2); a broken escape is still 400
    r = get(shared_server.port, "/heavy?iterations=%31%30", timeout=10)
    assert r.status == 200, r
    check_heavy_doc(r.json(), 10)
    assert get(shared_server.port, "/heavy?iterations=%3", timeout=10).status == 400
    assert get(shared_server.port, "/heavy?iterations=1%2", timeout=10).status == 400


# ------------------------------------------------------------------------------------ /compress


def make_text(path, min_bytes):
    """Concatenates real text files (licenses, copyright files) until min_bytes are reached."""
    files = sorted(glob.glob("/usr/share/common-licenses/*")) + \
        sorted(glob.glob("/usr/share/doc/*/copyright"))
    files = [f for f in files if os.path.isfile(f)]
    assert files, "no text files to build a corpus from"
    out = bytearray()
    while len(out) < min_bytes:
        for f in files:
            try:
                with open(f, "rb") as fh:
                    out += fh.read()
            except OSError:
                continue
            if len(out) >= min_bytes:
                break
    with open(path, "wb") as fh:
        fh.write(out)
    return bytes(out)


def zstd_decompress(tmp_path, data, name):
    src = tmp_path / (name + ".zst")
    src.write_bytes(data)
    p = subprocess.run(["zstd", "-d", "-q", "-c", str(src)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, "zstd -d failed: %r" % p.stderr
    return p.stdout


def compress(port, body, level=None, timeout=60):
    path = "/compress" if level is None else "/compress?level=%s" % level
    return request(port, "POST", path, body=body,
                   headers={"Content-Type": "application/octet-stream",
                            "Content-Length": str(len(body))},
                   timeout=timeout)


@pytest.mark.timeout(120)
def test_compress_large_round_trip(shared_server, tmp_path):
    data = make_text(str(tmp_path / "corpus.txt"), 4 * 1024 * 1024 + 12345)
    assert len(data) >= 4 * 1024 * 1024
    r = compress(shared_server.port, data)
    assert r.status == 200, r
    assert (r.header("content-type") or "").split(";")[0].strip() == "application/zstd", r.headers
    assert r.body[:4] == b"\x28\xb5\x2f\xfd", "not a zstd frame: %r" % r.body[:8]
    assert len(r.body) < len(data) // 2, "text should compress well (%d -> %d)" % (len(data), len(r.body))
    assert zstd_decompress(tmp_path, r.body, "large") == data


@pytest.mark.timeout(120)
def test_compress_levels_1_and_19(shared_server, tmp_path):
    data = make_text(str(tmp_path / "small.txt"), 300 * 1024)
    sizes = {}
    for level in (1, 19):
        r = compress(shared_server.port, data, level=level)
        assert r.status == 200, (level, r)
        assert zstd_decompress(tmp_path, r.body, "l%d" % level) == data, level
        sizes[level] = len(r.body)
    # the level must reach the compressor: 19 compresses real text better than 1
    assert sizes[19] < sizes[1], sizes


@pytest.mark.timeout(60)
def test_compress_empty_body(shared_server, tmp_path):
    r = compress(shared_server.port, b"")
    assert r.status == 200, r
    assert r.body[:4] == b"\x28\xb5\x2f\xfd", r.body
    assert zstd_decompress(tmp_path, r.body, "empty") == b""


@pytest.mark.timeout(60)
def test_compress_binary_bytes(shared_server, tmp_path):
    data = bytes(range(256)) * 64 + os.urandom(4096) + b"\x00" * 1000 + b"\r\n\r\n"
    r = compress(shared_server.port, data, level=5)
    assert r.status == 200, r
    assert zstd_decompress(tmp_path, r.body, "bin") == data


@pytest.mark.timeout(30)
@pytest.mark.parametrize("level", ["0", "20", "-1", "abc", "", "3x", "1.5", "99999999999999999999"])
def test_compress_bad_level_400(shared_server, level):
    r = compress(shared_server.port, b"hello world", level=level, timeout=10)
    assert r.status == 400, (level, r)


# ------------------------------------------------------------------------------------ 413


@pytest.mark.timeout(60)
def test_413_from_content_length_without_body(start_server):
    srv = start_server("--max-body", "1M")
    with connect(srv.port, timeout=5) as s:
        # headers only: the body is never sent, so a 413 can only come from Content-Length
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n"
                  b"Content-Type: application/octet-stream\r\n\r\n")
        r = read_response(s)
    assert r.status == 413, r


@pytest.mark.timeout(60)
def test_413_just_above_limit_and_ok_below(start_server, tmp_path):
    srv = start_server("--max-body", "1M")
    # 1M is 1048576 or 1000000 depending on the suffix's base; 1048577 exceeds both
    with connect(srv.port, timeout=5) as s:
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n")
        r = read_response(s)
    assert r.status == 413, r
    # ... and 1000000 is within both, so it is compressed
    data = make_text(str(tmp_path / "c.txt"), 1_000_000)[:1_000_000]
    r = compress(srv.port, data)
    assert r.status == 200, r
    assert zstd_decompress(tmp_path, r.body, "below") == data
    # the server is still healthy
    assert get(srv.port, "/ping", timeout=5).status == 200


@pytest.mark.timeout(60)
def test_ipv6_listen_and_timing_headers(tmp_path):
    import http.client as hc
    import socket as so
    import subprocess
    from conftest import LAGLESS_BIN, wait_until
    try:
        probe = so.socket(so.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError as e:
        pytest.skip("no IPv6 loopback here: %s" % e)
    log = tmp_path / "stderr.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([LAGLESS_BIN, "--listen", "[::1]:0", "--loop-workers", "1",
                                 "--compute-workers", "1"], stderr=err,
                                stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        # the log line can be pasted back into --listen
        m = wait_until(lambda: re.search(r"listening on \[::1\]:(\d+)\b", log.read_text()), 10)
        assert m, log.read_text()
        port = int(m.group(1))
        c = hc.HTTPConnection("::1", port, timeout=10)
        assert wait_until(lambda: _ping6(c), 10)
        c.request("GET", "/heavy?iterations=1000")
        r = c.getresponse()
        r.read()
        assert r.status == 200
        # every offloaded answer has its queue wait and run time as headers, HEAD too
        for name in ("X-Queue-Ms", "X-Run-Ms"):
            assert float(r.getheader(name)) >= 0
        c.request("HEAD", "/heavy?iterations=1000")
        r = c.getresponse()
        assert r.read() == b"" and r.status == 200 and r.getheader("X-Run-Ms") is not None
    finally:
        proc.terminate()
        assert proc.wait(timeout=15) == 0


def _ping6(conn):
    try:
        conn.request("GET", "/ping")
        r = conn.getresponse()
        return r.read() == b"ok"
    except OSError:
        conn.close()
        return False
