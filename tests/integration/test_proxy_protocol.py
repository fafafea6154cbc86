"""The PROXY protocol on a listener (issue 36 item 6): `--listen ADDR:PORT,proxy` takes a
version 1 or 2 header (haproxy doc/proxy-protocol.txt) from a --trusted-proxies peer before the
request, and the address it carries is the client's for the access log. The real haproxy
sends it (send-proxy, send-proxy-v2); raw sockets send the bad ones, which close the connection
without an HTTP answer."""
import os
import socket
import struct
import subprocess

import pytest

from conftest import free_port, read_response, wait_server_read, wait_until

HAPROXY = "/usr/sbin/haproxy"
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def proxy_server(start_server, *extra, trusted="127.0.0.1"):
    """A server whose first listener is plain (the harness's /ping) and whose second takes the
    PROXY header; returns (server, proxy listener's port)."""
    pport = free_port()
    srv = start_server("--listen", "127.0.0.1:0", "--listen", "127.0.0.1:%d,proxy" % pport,
                       "--trusted-proxies", trusted, "--access-log", "--loop-workers", "1",
                       "--compute-workers", "1", *extra)
    return srv, pport


def access_clients(srv, marker):
    return [ln.split(" client=", 1)[1].split(" ", 1)[0] for ln in srv.log().splitlines()
            if " access: " in ln and marker in ln]


def v2_header(src, dst="127.0.0.1", sport=40000, dport=80, cmd=0x21, tlvs=b""):
    addrs = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport)
    body = addrs + tlvs
    return V2_SIG + bytes([cmd, 0x11]) + struct.pack("!H", len(body)) + body


def closed_unanswered(sock, timeout=5.0):
    """Reads until the server closes sock: True when it closed (EOF or reset) without sending a
    byte, False when it answered anything or stayed open."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(4096)
    except socket.timeout:
        return False
    except ConnectionError:
        return True
    return data == b""


def get_via(port, head, path, timeout=5.0, source="127.0.0.1"):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                  source_address=(source, 0)) as s:
        s.settimeout(timeout)
        s.sendall(head + b"GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % path)
        return read_response(s)


@pytest.mark.timeout(60)
def test_headers_name_the_client_in_the_access_log(start_server):
    srv, pport = proxy_server(start_server)
    cases = [
        (b"PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n", b"/ping?v1", "203.0.113.7"),
        (b"PROXY TCP6 2001:db8::9 ::1 5555 80\r\n", b"/ping?v1six", "2001:db8::9"),
        (b"PROXY UNKNOWN\r\n", b"/ping?unknown", "127.0.0.1"),
        # a TLV (PP2_TYPE_AUTHORITY) is skipped within the length
        (v2_header("198.51.100.4", tlvs=b"\x02\x00\x04host"), b"/ping?v2", "198.51.100.4"),
        # LOCAL: the proxy's own connection, the peer's address
        (V2_SIG + b"\x20\x00\x00\x00", b"/ping?local", "127.0.0.1"),
        (b"PROXY TCP4 203.0.113.8 127.0.0.1 5555 80\r\n", b"/heavy?iterations=10&v1", "203.0.113.8"),
    ]
    for head, path, _ in cases:
        assert get_via(pport, head, path).status == 200, (head, path)
    for _, path, client in cases:
        marker = 'query="%s"' % path.decode().split("?", 1)[1]
        assert wait_until(lambda: access_clients(srv, marker) == [client], 5), \
            (path, srv.log()[-3000:])
    # the plain listener is unchanged
    r = get_via(srv.port, b"", b"/ping?plain")
    assert r.status == 200
    assert wait_until(lambda: access_clients(srv, "plain") == ["127.0.0.1"], 5)


@pytest.mark.timeout(60)
def test_a_header_split_across_reads_is_assembled(start_server):
    srv, pport = proxy_server(start_server)
    for head, client in [(b"PROXY TCP4 192.0.2.33 127.0.0.1 1234 80\r\n", "192.0.2.33"),
                         (v2_header("192.0.2.44"), "192.0.2.44")]:
        with socket.create_connection(("127.0.0.1", pport), timeout=5) as s:
            s.settimeout(5)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            prev = 0
            for cut in (1, 13, len(head) - 1):  # three reads, then the rest with the request
                s.sendall(head[prev:cut])
                assert wait_server_read(pport, s), "the server did not read the part"
                prev = cut
            s.sendall(head[prev:] + b"GET /ping?split=%s HTTP/1.1\r\nHost: t\r\n"
                      b"Connection: close\r\n\r\n" % client.encode())
            assert read_response(s).status == 200
        assert wait_until(lambda: access_clients(srv, "split=" + client) == [client], 5), \
            srv.log()[-2000:]


@pytest.mark.timeout(60)
def test_bad_headers_close_without_an_answer(start_server):
    srv, pport = proxy_server(start_server, "--head-timeout-ms", "1500")
    bad = {
        "plain HTTP": b"GET /ping HTTP/1.1\r\nHost: t\r\n\r\n",
        "v1 malformed": b"PROXY TCP4 203.0.113.7 127.0.0.1 5555\r\nGET / HTTP/1.1\r\n\r\n",
        "v1 oversized": b"PROXY UNKNOWN " + b"x" * 200 + b"\r\n",
        "v2 bad signature": b"\r\n\r\n\x00\r\nQUIX\n\x21\x11\x00\x0c" + b"\x00" * 12,
        "v2 oversized": V2_SIG + b"\x21\x11\x10\x00" + b"\x00" * 64,
        "v2 bad version": V2_SIG + b"\x31\x11\x00\x0c" + b"\x00" * 12,
        "v2 TLV past the length": v2_header("192.0.2.1", tlvs=b"\x02\x00\x09ab"),
    }
    for name, data in bad.items():
        with socket.create_connection(("127.0.0.1", pport), timeout=5) as s:
            s.sendall(data)
            assert closed_unanswered(s), name
    # truncated: the rest never comes; closed at the head timeout, still unanswered
    for data in (b"PROXY TCP4 203.0.113.7 127.0", v2_header("192.0.2.1")[:20]):
        with socket.create_connection(("127.0.0.1", pport), timeout=5) as s:
            s.sendall(data)
            assert closed_unanswered(s, timeout=10), data
    assert "PROXY protocol header not complete within --head-timeout-ms" in srv.log()
    # and the server serves on
    assert get_via(pport, b"PROXY UNKNOWN\r\n", b"/ping").status == 200


@pytest.mark.timeout(60)
def test_an_untrusted_peer_is_closed(start_server):
    srv, pport = proxy_server(start_server, trusted="10.0.0.0/8")
    with socket.create_connection(("127.0.0.1", pport), timeout=5) as s:
        s.sendall(b"PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\nGET /ping HTTP/1.1\r\n"
                  b"Host: t\r\n\r\n")
        assert closed_unanswered(s)
    assert get_via(srv.port, b"", b"/ping").status == 200  # the plain listener serves


@pytest.mark.timeout(30)
def test_proxy_listener_needs_trusted_proxies(tmp_path):
    from conftest import LAGLESS_BIN
    r = subprocess.run([LAGLESS_BIN, "-t", "--listen", "127.0.0.1:0,proxy"], capture_output=True,
                       timeout=20, cwd=tmp_path)
    assert r.returncode == 1 and b"trusted-proxies" in r.stderr, r.stderr
    r = subprocess.run([LAGLESS_BIN, "-t", "--listen", "127.0.0.1:0,proxi",
                        "--trusted-proxies", "127.0.0.1"], capture_output=True, timeout=20,
                       cwd=tmp_path)
    assert r.returncode == 1, r.stderr


def haproxy_cfg(tmp, fronts):
    """haproxy in TCP mode (no X-Forwarded-For: the PROXY header alone names the client), one
    frontend per (port, server line options)."""
    lines = ["global", "    maxconn 200", "defaults", "    mode tcp", "    timeout connect 2s",
             "    timeout client 10s", "    timeout server 10s"]
    for i, (port, target, opts) in enumerate(fronts):
        lines += ["frontend f%d" % i, "    bind 127.0.0.1:%d" % port, "    default_backend b%d" % i,
                  "backend b%d" % i, "    server s 127.0.0.1:%d %s" % (target, opts)]
    path = os.path.join(tmp, "haproxy.cfg")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.exists(HAPROXY), reason="haproxy is not installed")
def test_haproxy_send_proxy_v1_and_v2(start_server, tmp_path):
    srv, pport = proxy_server(start_server)
    f1, f2 = free_port(), free_port()
    cfg = haproxy_cfg(str(tmp_path), [(f1, pport, "send-proxy"), (f2, pport, "send-proxy-v2")])
    log = open(tmp_path / "haproxy.log", "wb")
    proc = subprocess.Popen([HAPROXY, "-db", "-f", cfg], stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        def answers(port):
            try:
                return get_via(port, b"", b"/ping?warmup", timeout=2).status == 200
            except OSError:
                return False
        assert wait_until(lambda: answers(f1) and answers(f2), 10), open(tmp_path / "haproxy.log").read()
        # clients from 127.0.0.2 and 127.0.0.3; haproxy connects to lagless from 127.0.0.1
        assert get_via(f1, b"", b"/ping?via=v1", source="127.0.0.2").status == 200
        assert get_via(f2, b"", b"/heavy?iterations=10&via=v2", source="127.0.0.3").status == 200
        assert wait_until(lambda: access_clients(srv, "via=v1") == ["127.0.0.2"] and
                          access_clients(srv, "via=v2") == ["127.0.0.3"], 5), srv.log()[-3000:]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@pytest.mark.timeout(60)
def test_a_unix_listener_takes_the_header_from_whoever_its_file_lets_in(start_server, tmp_path):
    sock = str(tmp_path / "pp.sock")
    srv = start_server("--listen", "127.0.0.1:0", "--listen", "unix:%s,mode=0600,proxy" % sock,
                       "--access-log", "--loop-workers", "1", "--compute-workers", "1")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(sock)
        s.sendall(b"PROXY TCP4 203.0.113.5 127.0.0.1 5555 80\r\nGET /ping?unixpp HTTP/1.1\r\n"
                  b"Host: t\r\nConnection: close\r\n\r\n")
        assert read_response(s).status == 200
    assert wait_until(lambda: access_clients(srv, "unixpp") == ["203.0.113.5"], 5), \
        srv.log()[-2000:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(sock)
        s.sendall(b"GET /ping HTTP/1.1\r\nHost: t\r\n\r\n")  # no header: closed
        assert closed_unanswered(s)
