"""A small HTTP/1.1 origin for the proxy tests (worker/upstream/): keep-alive, on TCP or a unix
socket, in a thread of the test. It records what it saw (connections, requests by path, the
most requests in flight at once) and misbehaves on request, by path:

  /api/echo        200, a JSON body: method, path, headers, body length
  /api/slow?ms=N   the same after N ms (in flight meanwhile)
  /api/hold        waits until release() (in flight meanwhile)
  /api/clte        an answer with both Content-Length and Transfer-Encoding
  /api/badchunk    a chunked answer with a chunk size that is not hex
  /api/garbage     bytes that are no HTTP answer
  /api/cut         Content-Length 100000, 10 bytes, then the close
  /api/chunked     a well-formed chunked answer with a trailer
  /api/close       200 then the connection closed (Connection: close)
  /api/silent      accepts and never answers
  /api/drop        reads the request, then closes without an answer
  /api/big?mb=N    N MiB of body, Content-Length framed, written as fast as it is taken
  /api/noread      reads the head, never the body, never answers
"""
import json
import os
import socket
import threading
import time


class Origin:
    def __init__(self, unix_path=None):
        if unix_path:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if os.path.exists(unix_path):
                os.unlink(unix_path)
            self.sock.bind(unix_path)
            self.address = "unix:" + unix_path
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(("127.0.0.1", 0))
            self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.sock.listen(256)
        self.lock = threading.Lock()
        self.connections = 0
        self.open = 0           # connections not yet closed by the proxy (or by us)
        self.requests = {}      # path -> count
        self.bodies = []        # (path, body bytes) of each request
        self.heads = []         # the raw head of each request
        self.heads_read = 0     # request heads read, counted before the body is
        self.inflight = 0
        self.max_inflight = 0
        self.gate = threading.Event()
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def release(self):
        self.gate.set()

    def count(self, path):
        with self.lock:
            return self.requests.get(path, 0)

    def close(self):
        self.stopping = True
        self.gate.set()
        try:
            self.sock.close()
        except OSError:
            pass

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                self.open += 1
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _read_head(c, buf):
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                return None, buf
            buf += d
        i = buf.index(b"\r\n\r\n") + 4
        return buf[:i], buf[i:]

    @staticmethod
    def _read_body(c, head, buf):
        lower = head.lower()
        if b"transfer-encoding: chunked" in lower:
            body = b""
            def more():
                d = c.recv(65536)
                if not d:  # the request ended short (lagless shut its side): give up
                    raise OSError("end of input inside a chunked body")
                return d
            while True:
                while b"\r\n" not in buf:
                    buf += more()
                line, buf = buf.split(b"\r\n", 1)
                n = int(line.split(b";")[0], 16)
                while len(buf) < n + 2:
                    buf += more()
                body += buf[:n]
                buf = buf[n + 2:]
                if n == 0:
                    return body, buf
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                n = int(line.split(b":", 1)[1])
                while len(buf) < n:
                    d = c.recv(65536)
                    if not d:
                        break
                    buf += d
                return buf[:n], buf[n:]
        return b"", buf

    def _serve(self, c):
        buf = b""
        try:
            while True:
                head, buf = self._read_head(c, buf)
                if head is None:
                    return
                with self.lock:
                    self.heads_read += 1
                if head.split(b" ", 2)[1].startswith(b"/api/noread"):
                    with self.lock:
                        self.requests["/api/noread"] = self.requests.get("/api/noread", 0) + 1
                    self.gate.wait(30)
                    return
                body, buf = self._read_body(c, head, buf)
                line = head.split(b"\r\n", 1)[0].decode()
                method, target, _ = line.split(" ", 2)
                path = target.split("?", 1)[0]
                with self.lock:
                    self.requests[path] = self.requests.get(path, 0) + 1
                    self.bodies.append((path, body))
                    self.heads.append(head)
                    self.inflight += 1
                    self.max_inflight = max(self.max_inflight, self.inflight)
                try:
                    keep = self._answer(c, method, target, path, head, body)
                finally:
                    self._leave()
                if not keep:
                    return
        except (OSError, ValueError):
            return
        finally:
            c.close()
            with self.lock:
                self.open -= 1

    def _leave(self):
        """The request leaves the in-flight count: just before its answer is sent (once the
        last byte is out, the proxy may send the next request before this thread runs on)."""
        with self.lock:
            if not getattr(threading.current_thread(), "left", False):
                self.inflight -= 1
            threading.current_thread().left = True

    def _answer(self, c, method, target, path, head, body):
        threading.current_thread().left = False

        def send(data):
            self._leave()
            c.sendall(data)
        if path == "/api/slow":
            ms = int(target.split("ms=", 1)[1]) if "ms=" in target else 200
            time.sleep(ms / 1000.0)
        elif path == "/api/hold":
            self.gate.wait(30)
        elif path == "/api/silent":
            time.sleep(30)
            return False
        if path == "/api/drop":
            return False
        if path == "/api/big":
            n = int(target.split("mb=", 1)[1]) << 20
            send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
            block = b"b" * 65536
            for _ in range(n // len(block)):
                c.sendall(block)
            return True
        if path == "/api/clte":
            send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"5\r\nhello\r\n0\r\n\r\n")
            return True
        if path == "/api/badchunk":
            send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
            return True
        if path == "/api/garbage":
            send(b"this is no answer\r\n\r\n")
            return False
        if path == "/api/cut":
            send(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n0123456789")
            return False
        if path == "/api/chunked":
            send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n"
                      b"5\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n")
            return True
        headers = {}
        for ln in head.split(b"\r\n")[1:]:
            if b":" in ln:
                k, v = ln.split(b":", 1)
                headers.setdefault(k.decode().lower(), []).append(v.strip().decode())
        out = json.dumps({"method": method, "target": target, "headers": headers,
                          "body_len": len(body)}).encode()
        close = path == "/api/close"
        send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nKeep-Alive: timeout=5\r\n"
                  b"Content-Length: %d\r\n%s\r\n" % (len(out), b"Connection: close\r\n" if close else b"")
                  + (b"" if method == "HEAD" else out))
        return not close
