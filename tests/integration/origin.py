"""A small HTTP/1.1 origin that can misbehave, for the tests of upstream routes (issue 35).

Python stdlib only. It listens on 127.0.0.1 (an ephemeral port) and on a unix socket at once,
serves each connection in a thread of its own (keep-alive: several requests per connection),
and records what it received. Its behaviour is chosen per request by the LAST segment of the
path, so ``/ok`` and ``/api/ok`` are the same behaviour (a route prefix needs no rewrite)::

    ok                 200, body b"ok\\n" (Content-Length), with X-Origin: ok
    echo               200, JSON of what was received: method, target, version, headers
                       (list of [name, value]), head (the raw head, latin-1), body (latin-1),
                       body_len
    sleep?ms=N         200 after N ms
    hold               waits for a release_all() made after it arrived (or stop()), then
                       200 b"released\\n"
    big?bytes=N&mode=chunked|length   N bytes of a known pattern (pattern(N)), streamed in
                       64 KiB pieces; mode length (default) or chunked
    cl-and-te          200 with both Content-Length and Transfer-Encoding: chunked
    two-cl             200 with two different Content-Length fields
    bad-chunk          200 chunked whose first chunk-size line is not hex, in the same write
                       as the head; ?mid=1: one good chunk first, then the bad one
    short              Content-Length: 100, 10 bytes sent, then the connection closed
    reset              after reading the whole request: part of an answer (?at=0: nothing),
                       then a reset (SO_LINGER 0)
    garbage            bytes that are not HTTP, then the close
    huge-head          a 10 MiB header section (?bytes=N to choose), then a 2-byte body
    close-idle         200 (keep-alive, no Connection: close), then the connection closed
    no-read            the body is never read and nothing answered until release_all()
                       (?answer=1: a 200 with Connection: close at once, body still unread)
    status?code=N      an answer with status N (no body for 1xx, 204, 304)
    interim            a 100 Continue, then 200
    chunked-trailers   200 chunked with a trailer section (X-Sum)
    anything else      404

Control API (thread-safe)::

    o = Origin(unix_path=...)   # unix_path None: one in a fresh temporary directory
    o.start()                   # binds both, returns self
    o.tcp_server / o.unix_server  # "127.0.0.1:PORT" / "unix:PATH", for `server =`
    o.seen                      # list of Seen (method, target, path, headers, head, body...)
    o.connections               # connections accepted
    o.in_flight, o.max_in_flight  # requests whose head is in and answer not finished
    o.open_connections          # connections accepted and not yet closed
    o.release_all()             # every /hold and /no-read that arrived before goes on
    o.wait(pred, timeout)       # waits (bounded, on a condition) until pred(o) is true
    o.stop()                    # closes everything; every thread ends (joined, bounded)

Nothing waits for a guess: the only timed waits are /sleep's own and the bounded joins.
"""

import json
import os
import selectors
import socket
import struct
import tempfile
import threading
import time
from urllib.parse import parse_qs, urlsplit

MAX_HEAD = 1 << 20  # request head bytes the origin reads before it gives up on a connection


def pattern(n):
    """The body /big sends for n bytes: a repeated 64-byte line, so a test can check it."""
    line = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-\n"
    return (line * (n // len(line) + 1))[:n]


class Seen:
    """One request as received: method, target, path, query (dict of lists), version,
    headers (list of (name, value) as sent), head (raw bytes, request line to the empty line
    included), body (the payload: chunked framing removed), raw_body (bytes as they came after
    the head), conn (the connection's number, from 1), t (time.monotonic() at its head),
    complete (the whole body was read)."""

    def __init__(self, conn, head, method, target, version, headers):
        self.conn = conn
        self.head = head
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        u = urlsplit(target)
        self.path = u.path
        self.query = parse_qs(u.query)
        self.body = b""
        self.raw_body = b""
        self.complete = False
        self.t = time.monotonic()
        self.gen = 0
        self.counted = False

    def values(self, name):
        """Every value of field name (case-insensitive), in order."""
        return [v for n, v in self.headers if n.lower() == name.lower()]

    def header(self, name, default=None):
        v = self.values(name)
        return v[0] if v else default

    def has(self, name):
        return bool(self.values(name))

    @property
    def behaviour(self):
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def __repr__(self):
        return "Seen(%s %s, conn %d, %d fields, body %d)" % (
            self.method, self.target, self.conn, len(self.headers), len(self.body))


class _Closed(Exception):
    """The peer closed, or the origin is stopping."""


class _Conn:
    """One accepted connection: a socket and a read buffer."""

    def __init__(self, origin, sock, number):
        self.o = origin
        self.sock = sock
        self.n = number
        self.buf = b""
        self.current = None  # the Seen being answered

    def fill(self):
        try:
            data = self.sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            raise _Closed()
        self.buf += data

    def read_head(self):
        """The next request head (bytes, through the empty line), or None at a clean close."""
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > MAX_HEAD:
                raise _Closed()
            try:
                self.fill()
            except _Closed:
                if self.buf.strip(b"\r\n"):
                    raise
                return None
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        return head + b"\r\n\r\n"

    def read_exact(self, n):
        while len(self.buf) < n:
            self.fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > MAX_HEAD:
                raise _Closed()
            self.fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def read_body(self, seen):
        """Reads seen's body by its framing (Content-Length or chunked), recording it."""
        te = ",".join(seen.values("transfer-encoding")).lower()
        if "chunked" in te:
            raw = []
            while True:
                line = self.read_line()
                raw.append(line + b"\r\n")
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailer section, to its empty line
                        t = self.read_line()
                        raw.append(t + b"\r\n")
                        if not t:
                            break
                    break
                data = self.read_exact(size + 2)
                raw.append(data)
                seen.body += data[:size]
            seen.raw_body = b"".join(raw)
        else:
            n = int(seen.header("content-length", "0") or 0)
            seen.body = self.read_exact(n)
            seen.raw_body = seen.body
        seen.complete = True

    def send(self, data, last=False):
        """Sends data; last: it ends the answer, so the request stops counting as in flight
        first (lagless may send the next one as soon as it has these bytes: counted after
        the send, the origin could see one more in flight than lagless ever sent)."""
        if last:
            self.o._answered(self.current)
        try:
            self.sock.sendall(data)
        except OSError:
            raise _Closed()


def _parse_head(head):
    lines = head[:-4].decode("latin-1").split("\r\n")
    method, target, version = (lines[0].split(" ", 2) + ["", ""])[:3]
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name, value.strip(" \t")))
    return method, target, version, headers


def _answer(status, body=b"", reason="OK", extra=(), close=False):
    lines = ["HTTP/1.1 %d %s" % (status, reason), "Content-Length: %d" % len(body)]
    lines += list(extra)
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Origin:
    """The misbehaving origin (module docstring)."""

    def __init__(self, unix_path=None, tcp=True):
        self._tmpdir = None
        if unix_path is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="origin-")
            unix_path = os.path.join(self._tmpdir.name, "origin.sock")
        self.unix_path = unix_path
        self._tcp = tcp
        self.port = None
        self._cond = threading.Condition()
        self._seen = []
        self.connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._release_gen = 0
        self._stopping = False
        self._socks = set()
        self._threads = []
        self._listeners = []
        self._sel = None
        self._wake_r = self._wake_w = None
        self._accepter = None

    # ---------------------------------------------------------------------------- control

    @property
    def tcp_server(self):
        return "127.0.0.1:%d" % self.port

    @property
    def unix_server(self):
        return "unix:%s" % self.unix_path

    @property
    def seen(self):
        with self._cond:
            return list(self._seen)

    def start(self):
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        if self._tcp:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", 0))
            s.listen(256)
            self.port = s.getsockname()[1]
            self._listeners.append(s)
        if os.path.exists(self.unix_path):
            os.unlink(self.unix_path)
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        u.bind(self.unix_path)
        u.listen(256)
        self._listeners.append(u)
        for s in self._listeners:
            s.setblocking(False)
            self._sel.register(s, selectors.EVENT_READ, s)
        self._accepter = threading.Thread(target=self._accept_loop, name="origin-accept",
                                          daemon=True)
        self._accepter.start()
        return self

    def stop(self, timeout=5.0):
        """Stops accepting, wakes every waiting request, closes every connection and joins
        every thread (each join bounded by timeout)."""
        with self._cond:
            if self._stopping:
                return
            self._stopping = True
            self._cond.notify_all()
            socks = list(self._socks)
        os.write(self._wake_w, b"x")
        if self._accepter is not None:
            self._accepter.join(timeout)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in list(self._threads):
            t.join(timeout)
        for s in self._listeners:
            s.close()
        self._sel.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        if os.path.exists(self.unix_path):
            os.unlink(self.unix_path)
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
        alive = [t.name for t in self._threads if t.is_alive()]
        assert not alive, "origin threads still running after stop: %r" % alive

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def open_connections(self):
        """Connections accepted and not yet closed (each one's thread still serving it)."""
        with self._cond:
            return len(self._socks)

    def release_all(self):
        """Lets every /hold and /no-read request that has arrived go on (later ones wait for
        the next call)."""
        with self._cond:
            self._release_gen += 1
            self._cond.notify_all()

    def wait(self, pred, timeout):
        """Waits until pred(self) is true (checked at every change the origin records) or
        timeout seconds pass; returns pred's last value."""
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                v = pred(self)
                left = end - time.monotonic()
                if v or left <= 0:
                    return v
                self._cond.wait(left)

    def count(self, behaviour):
        """Requests seen whose behaviour (last path segment) is behaviour."""
        return sum(1 for s in self.seen if s.behaviour == behaviour)

    # ---------------------------------------------------------------------------- serving

    def _accept_loop(self):
        while True:
            for key, _ in self._sel.select():
                if key.data is None:
                    return  # stop() woke us
                try:
                    sock, _ = key.data.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    return
                sock.setblocking(True)
                with self._cond:
                    if self._stopping:
                        sock.close()
                        return
                    self.connections += 1
                    n = self.connections
                    self._socks.add(sock)
                    t = threading.Thread(target=self._serve, args=(sock, n),
                                         name="origin-conn-%d" % n, daemon=True)
                    self._threads.append(t)
                    self._cond.notify_all()
                t.start()

    def _serve(self, sock, n):
        c = _Conn(self, sock, n)
        try:
            while not self._stopping:
                head = c.read_head()
                if head is None:
                    break
                method, target, version, headers = _parse_head(head)
                seen = Seen(n, head, method, target, version, headers)
                with self._cond:
                    seen.gen = self._release_gen  # what a hold waits past: see _held
                    self._seen.append(seen)
                    self.in_flight += 1
                    self.max_in_flight = max(self.max_in_flight, self.in_flight)
                    self._cond.notify_all()
                seen.counted = True
                c.current = seen
                try:
                    keep = self._handle(c, seen)
                finally:
                    self._answered(seen)
                conn = ",".join(seen.values("connection")).lower()
                if not keep or "close" in conn or version == "HTTP/1.0":
                    break
        except _Closed:
            pass
        finally:
            with self._cond:
                self._socks.discard(sock)
                self._cond.notify_all()
            try:
                sock.close()
            except OSError:
                pass

    def _answered(self, s):
        """s stops counting as in flight (once)."""
        with self._cond:
            if s.counted:
                s.counted = False
                self.in_flight -= 1
                self._cond.notify_all()

    def _held(self, s):
        """Waits until release_all() is called after s's head arrived (so a release made as
        soon as in_flight counts s is not missed), or stop(). True if released."""
        with self._cond:
            while self._release_gen == s.gen and not self._stopping:
                self._cond.wait()
            return not self._stopping

    def _recorded(self):
        with self._cond:
            self._cond.notify_all()  # a body came in: wait() predicates may now hold

    def _handle(self, c, s):
        """Answers s on c by its behaviour; returns whether the connection may be kept."""
        b = s.behaviour
        q = {k: v[-1] for k, v in s.query.items()}
        if b == "no-read":
            if q.get("answer") == "1":
                c.send(_answer(200, b"ok\n", close=True))
            self._held(s)
            return False
        c.read_body(s)
        self._recorded()
        handler = getattr(self, "_b_" + b.replace("-", "_"), None)
        if handler is None:
            c.send(_answer(404, b"no such behaviour\n", reason="Not Found"), last=True)
            return True
        return handler(c, s, q)

    def _b_ok(self, c, s, q):
        answer = _answer(200, b"ok\n", extra=["Content-Type: text/plain", "X-Origin: ok"])
        c.send(answer[:-3] if s.method == "HEAD" else answer, last=True)  # HEAD: head alone
        return True

    def _b_echo(self, c, s, q):
        doc = {"method": s.method, "target": s.target, "version": s.version,
               "headers": [[n, v] for n, v in s.headers], "head": s.head.decode("latin-1"),
               "body": s.body.decode("latin-1"), "body_len": len(s.body)}
        c.send(_answer(200, json.dumps(doc).encode(), extra=["Content-Type: application/json"]),
               last=True)
        return True

    def _b_sleep(self, c, s, q):
        with self._cond:
            end = time.monotonic() + int(q.get("ms", "0")) / 1000.0
            while not self._stopping and time.monotonic() < end:
                self._cond.wait(end - time.monotonic())
        c.send(_answer(200, b"slept\n"), last=True)
        return True

    def _b_hold(self, c, s, q):
        if not self._held(s):
            return False
        c.send(_answer(200, b"released\n"), last=True)
        return True

    def _b_big(self, c, s, q):
        n = int(q.get("bytes", "0"))
        chunked = q.get("mode") == "chunked"
        if chunked:
            c.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        else:
            c.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n, last=n == 0)
        line = pattern(64)
        piece = line * 1024  # 64 KiB, aligned with the pattern
        off = 0
        while off < n:
            k = min(len(piece), n - off)
            data = piece[:k]
            c.send(b"%x\r\n%s\r\n" % (k, data) if chunked else data,
                   last=not chunked and off + k == n)
            off += k
        if chunked:
            c.send(b"0\r\n\r\n", last=True)
        return True

    def _b_cl_and_te(self, c, s, q):
        c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n0\r\n\r\n", last=True)
        return False

    def _b_two_cl(self, c, s, q):
        c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
               last=True)
        return False

    def _b_bad_chunk(self, c, s, q):
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        if q.get("mid") == "1":
            c.send(head + b"5\r\nhello\r\n")
            c.send(b"zz\r\nworld\r\n0\r\n\r\n", last=True)
        else:
            c.send(head + b"zz\r\nhello\r\n0\r\n\r\n", last=True)
        return False

    def _b_short(self, c, s, q):
        c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"0123456789", last=True)
        return False

    def _b_reset(self, c, s, q):
        self._answered(s)
        if q.get("at") != "0":
            c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.sock.close()  # a reset, not a FIN
        raise _Closed()

    def _b_garbage(self, c, s, q):
        c.send(b"HELLO, THIS IS NOT HTTP\r\n\x00\x01\x02\r\n\r\n", last=True)
        return False

    def _b_huge_head(self, c, s, q):
        total = int(q.get("bytes", str(10 << 20)))
        c.send(b"HTTP/1.1 200 OK\r\n")
        value = b"v" * 1000
        i = 0
        sent = 0
        while sent < total:
            batch = b"".join(b"X-Fill-%d: %s\r\n" % (i + k, value) for k in range(64))
            i += 64
            c.send(batch)
            sent += len(batch)
        c.send(b"Content-Length: 2\r\n\r\nok", last=True)
        return False

    def _b_close_idle(self, c, s, q):
        c.send(_answer(200, b"ok\n"), last=True)
        return False

    def _b_status(self, c, s, q):
        code = int(q.get("code", "200"))
        if code < 200 or code in (204, 304):
            c.send(b"HTTP/1.1 %d Status\r\n\r\n" % code, last=code >= 200)
            if code < 200:
                c.send(_answer(200, b"after interim\n"), last=True)
        else:
            c.send(_answer(code, b"status %d\n" % code, reason="Status"), last=True)
        return True

    def _b_interim(self, c, s, q):
        c.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        c.send(_answer(200, b"ok\n"), last=True)
        return True

    def _b_chunked_trailers(self, c, s, q):
        c.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"
               b"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 11\r\n\r\n", last=True)
        return True
