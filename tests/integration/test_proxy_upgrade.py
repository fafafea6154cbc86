"""WebSockets and other upgrades on upstream routes (issue 36 item 5): a request with
Connection: upgrade and Upgrade (RFC 9110 7.8, RFC 6455 4.1) goes to the app with both; a 101
from the app makes a tunnel that relays bytes both ways unchanged, with backpressure, an idle
timeout, half-close, its in-flight place held, counted in /metrics and closed by a drain. Any
other answer is an ordinary one; a kind route keeps today's behaviour.

The WebSocket server is the FastAPI app under Debian's uvicorn (fastapi_app.py /ws/echo,
/ws/flood; uvicorn needs python3-wsproto or python3-websockets for WebSockets: skipped
without), the client a raw socket doing the RFC 6455 handshake and masked frames. A raw origin
(a thread below) checks the byte-level rules: half-close, non-101 answers, a 101 naming a
protocol the client did not offer.
"""

import base64
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from appserver import fastapi_app  # noqa: F401 (a fixture)
from conftest import get, metric, read_response, wait_until

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def have_ws_server():
    return subprocess.run([sys.executable, "-c", "import wsproto"], capture_output=True)\
        .returncode == 0 or subprocess.run([sys.executable, "-c", "import websockets"],
                                           capture_output=True).returncode == 0


CONF = """\
[upstream app]
server = {server}
max_conns = {max_conns}
queue = {queue}
{idle}
[route /api/*]
upstream = app
deadline_ms = 5000

"""


def idle_line(ms):
    return "" if ms is None else "tunnel_idle_timeout_ms = %d\n" % ms


@pytest.fixture
def ws_proxy(start_server, fastapi_app, tmp_path):  # noqa: F811
    """Factory: ws_proxy(max_conns=4, queue=8, idle=None, args=()) -> (server, app), the
    FastAPI app behind [route /api/*] (idle: tunnel_idle_timeout_ms, None: the default)."""
    if not have_ws_server():
        pytest.skip("uvicorn has no WebSocket library (python3-wsproto or python3-websockets)")

    def _start(max_conns=4, queue=8, idle=None, args=()):
        app = fastapi_app()
        conf = tmp_path / "ws.conf"
        conf.write_text(CONF.format(server=app.server, max_conns=max_conns, queue=queue,
                                    idle=idle_line(idle)))
        srv = start_server("--loop-workers", "1", "--compute-workers", "1", "-c", str(conf),
                           *args)
        return srv, app
    return _start


def read_head(sock):
    """(head bytes, bytes read after it) from sock."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = sock.recv(65536)
        if not b:
            raise AssertionError("closed before a whole head: %r" % buf)
        buf += b
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i], buf[i:]


class WS:
    """A WebSocket client over a raw socket (RFC 6455): the handshake, masked frames out."""

    def __init__(self, port, path, timeout=20.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16))
        self.sock.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Connection: Upgrade\r\nUpgrade: websocket\r\n"
                          b"Sec-WebSocket-Key: " + key + b"\r\n"
                          b"Sec-WebSocket-Version: 13\r\n\r\n")
        head, self.rest = read_head(self.sock)
        self.head = head.decode("latin-1")
        assert self.head.startswith("HTTP/1.1 101 "), self.head
        fields = {ln.split(":", 1)[0].strip().lower(): ln.split(":", 1)[1].strip()
                  for ln in self.head.split("\r\n")[1:] if ":" in ln}
        want = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
        assert fields.get("sec-websocket-accept") == want, self.head
        assert fields.get("upgrade", "").lower() == "websocket", self.head
        assert "upgrade" in fields.get("connection", "").lower(), self.head

    def send(self, data, opcode=2):
        n = len(data)
        hdr = bytes([0x80 | opcode])
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            hdr += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        # XOR by the mask through big integers: fast enough for megabytes
        m = (mask * (n // 4 + 1))[:n]
        masked = (int.from_bytes(data, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big") \
            if n else b""
        self.sock.sendall(hdr + mask + masked)

    def _exact(self, n):
        while len(self.rest) < n:
            b = self.sock.recv(1 << 20)
            if not b:
                raise EOFError("closed")
            self.rest += b
        out, self.rest = self.rest[:n], self.rest[n:]
        return out

    def recv(self):
        """(opcode, payload) of the next data message (fragments joined, pings skipped)."""
        data, op = b"", None
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack("!H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._exact(8))[0]
            payload = self._exact(n)
            opcode = b0 & 0x0f
            if opcode in (9, 10):
                continue
            if opcode == 8:
                raise EOFError("close frame")
            if op is None:
                op = opcode
            data += payload
            if b0 & 0x80:
                return op, data

    def close(self):
        try:
            self.send(struct.pack("!H", 1000), opcode=8)
        except OSError:
            pass
        self.sock.close()


def tunnels(port):
    return metric(port, 'lagless_upstream_tunnels{upstream="app"}')


def loop_rss_kib(srv):
    total = 0
    for pid in srv.children("loop"):
        with open("/proc/%d/status" % pid) as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    total += int(ln.split()[1])
    return total


def test_websocket_echo_and_metrics(ws_proxy):
    srv, _ = ws_proxy()
    ws = WS(srv.port, "/api/ws/echo")
    ws.send(b"hello", opcode=1)
    assert ws.recv() == (1, b"hello")
    ws.send(b"\x00\x01binary\xff")
    assert ws.recv() == (2, b"\x00\x01binary\xff")
    assert tunnels(srv.port) == 1
    st = json.loads(get(srv.port, "/status").body)
    assert [u["tunnels"] for u in st["upstreams"] if u["name"] == "app"] == [1], st
    assert metric(srv.port, 'lagless_upstream_tunnels_opened_total{upstream="app"}') == 1
    assert metric(srv.port, 'lagless_upstream_requests_total{upstream="app",code="1xx"}') == 1
    to_app = metric(srv.port,
                    'lagless_upstream_tunnel_bytes_total{upstream="app",direction="to_app"}')
    to_client = metric(
        srv.port, 'lagless_upstream_tunnel_bytes_total{upstream="app",direction="to_client"}')
    # the frames exactly: masked ones in (2 + 4 + payload), unmasked ones out (2 + payload)
    assert (to_app, to_client) == (6 + 5 + 6 + 9, 2 + 5 + 2 + 9)
    ws.close()
    assert wait_until(lambda: tunnels(srv.port) == 0, 10), "the tunnel never closed"
    # the place came back: a plain request goes through
    assert get(srv.port, "/api/health").status == 200


def test_large_messages_both_ways(ws_proxy):
    srv, _ = ws_proxy()
    ws = WS(srv.port, "/api/ws/echo")
    before = loop_rss_kib(srv)
    for size in (3 << 20, 5 << 20):
        data = os.urandom(size)
        # the echo answers once the whole message came: sent from a thread, read here, so
        # neither side waits for the other's buffers
        t = threading.Thread(target=ws.send, args=(data,))
        t.start()
        op, got = ws.recv()
        t.join(30)
        assert op == 2 and got == data
    grown = loop_rss_kib(srv) - before
    # the tunnel's buffers are fixed (the exchange's 52 KiB): 8 MiB relayed grows nothing
    # near their size
    assert grown < 4096, "the loop grew %d KiB relaying 8 MiB" % grown
    ws.close()


def test_peer_that_never_reads(ws_proxy):
    """The app floods 64 MiB at a client that never reads: lagless reads the app only while
    the client takes bytes (its memory stays flat), and the idle timeout closes both."""
    srv, _ = ws_proxy(idle=1000)
    ws = WS(srv.port, "/api/ws/flood?mb=64")
    ws.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    before = loop_rss_kib(srv)
    assert wait_until(lambda: tunnels(srv.port) == 0, 15), "the idle timeout never closed it"
    sent = metric(srv.port,
                  'lagless_upstream_tunnel_bytes_total{upstream="app",direction="to_client"}')
    assert sent < 32 << 20, "%d bytes went to a client that never read" % sent
    grown = loop_rss_kib(srv) - before
    assert grown < 4096, "the loop grew %d KiB" % grown
    # the client's socket was closed by lagless: after what is queued, EOF or a reset
    ws.sock.settimeout(10)
    try:
        while ws.sock.recv(1 << 20):
            pass
    except ConnectionResetError:
        pass
    assert "tunnel closed: idle timeout" in srv.log()


class RawOrigin:
    """An app on a loopback port answering each connection by script(conn, head)."""

    def __init__(self, script):
        self.script = script
        self.heads = []
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.port = self.ls.getsockname()[1]
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c):
        c.settimeout(20)
        try:
            while True:
                head, rest = read_head(c)
                self.heads.append(head.decode("latin-1").lower())
                if not self.script(c, head, rest):
                    break
        except (OSError, AssertionError):
            pass
        finally:
            c.close()

    def stop(self):
        self.ls.close()


def raw_proxy(start_server, tmp_path, origin, idle=None):
    conf = tmp_path / "raw.conf"
    conf.write_text(CONF.format(server="127.0.0.1:%d" % origin.port, max_conns=4, queue=8,
                                idle=idle_line(idle)))
    return start_server("--loop-workers", "1", "--compute-workers", "1", "-c", str(conf),
                        "--access-log")


UPGRADE_REQ = (b"GET /api/x HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\n"
               b"Upgrade: echo/1\r\n\r\n")


def echo_until_eof(c, head, rest):
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo/1\r\n"
              b"Connection: Upgrade\r\nX-App: yes\r\n\r\n" + rest)
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.sendall(b"bye")
    return False


def test_half_close(start_server, tmp_path):
    origin = RawOrigin(echo_until_eof)
    try:
        srv = raw_proxy(start_server, tmp_path, origin)
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(UPGRADE_REQ)
        head, rest = read_head(s)
        text = head.decode("latin-1")
        assert text.startswith("HTTP/1.1 101 "), text
        assert "\r\nUpgrade: echo/1\r\n" in text and "\r\nX-App: yes\r\n" in text, text
        assert "connection: upgrade" in text.lower(), text
        # what reached the app: Upgrade and Connection: upgrade, no keep-alive option
        app_head = origin.heads[0]
        assert "\r\nupgrade: echo/1\r\n" in app_head and "\r\nconnection: upgrade\r\n" in \
            app_head, app_head
        s.sendall(b"abc")
        got = rest
        while len(got) < 3:
            got += s.recv(100)
        s.sendall(b"def")
        s.shutdown(socket.SHUT_WR)  # our EOF reaches the app, whose answer still comes
        while True:
            b = s.recv(100)
            if not b:
                break
            got += b
        assert got == b"abcdefbye"
        s.close()
        assert wait_until(lambda: tunnels(srv.port) == 0, 10)
        # the request's access line, written when the tunnel opened
        lines = [ln for ln in srv.log().splitlines() if "/api/x" in ln and "status=101" in ln]
        assert len(lines) == 1 and "upstream=127.0.0.1:%d upstream_status=101 " % origin.port \
            in lines[0], srv.log()[-2000:]
    finally:
        origin.stop()


def test_non_101_answer_is_ordinary(start_server, tmp_path):
    def answer(c, head, rest):
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno")
        return True
    origin = RawOrigin(answer)
    try:
        srv = raw_proxy(start_server, tmp_path, origin)
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(UPGRADE_REQ)
        r = read_response(s)
        assert r.status == 200 and r.body == b"no"
        assert "\r\nupgrade: echo/1\r\n" in origin.heads[0]
        s.sendall(b"GET /api/y HTTP/1.1\r\nHost: h\r\n\r\n")  # the connection goes on
        assert read_response(s).status == 200
        s.close()
        assert tunnels(srv.port) == 0
    finally:
        origin.stop()


def test_101_for_another_protocol_is_502(start_server, tmp_path):
    def answer(c, head, rest):
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\n"
                  b"Connection: Upgrade\r\n\r\n")
        return False
    origin = RawOrigin(answer)
    try:
        srv = raw_proxy(start_server, tmp_path, origin)
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(UPGRADE_REQ)
        assert read_response(s).status == 502
        s.close()
        # and a 101 to a request that asked for nothing is a 502 as before
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(b"GET /api/z HTTP/1.1\r\nHost: h\r\n\r\n")
        assert read_response(s).status == 502
        s.close()
    finally:
        origin.stop()


def test_tunnel_holds_its_place(ws_proxy):
    srv, _ = ws_proxy(max_conns=1, queue=0)
    ws = WS(srv.port, "/api/ws/echo")
    ws.send(b"x")
    assert ws.recv() == (2, b"x")
    r = get(srv.port, "/api/health")
    assert r.status == 503, r.status  # the tunnel holds the only place
    ws.close()
    assert wait_until(lambda: tunnels(srv.port) == 0, 10)
    assert wait_until(lambda: get(srv.port, "/api/health").status == 200, 10)


def test_drain_closes_tunnels(ws_proxy):
    srv, _ = ws_proxy(args=("--drain-timeout-ms", "4000"))
    ws = WS(srv.port, "/api/ws/echo")
    ws.send(b"x")
    assert ws.recv() == (2, b"x")
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    ws.sock.settimeout(10)
    try:
        while ws.sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    took = time.monotonic() - t0
    # closed by the loop at 90% of the drain timeout (3.6 s), before the master's kill
    assert took < 4.0, "the tunnel closed after %.1f s" % took
    assert srv.proc.wait(10) == 0
    assert "tunnel closed: the loop drains" in srv.log()


def test_upgrade_on_a_kind_route_unchanged(start_server):
    srv = start_server("--loop-workers", "1", "--compute-workers", "1")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /ping HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
              b"Upgrade: websocket\r\n\r\n")
    r = read_response(s)
    assert r.status == 200
    s.sendall(b"GET /ping HTTP/1.1\r\nHost: h\r\n\r\n")
    assert read_response(s).status == 200
    s.close()
