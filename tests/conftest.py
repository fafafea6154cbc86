"""Shared helpers for the lagless integration tests.

* ``Server``: starts the binary with ``--listen 127.0.0.1:0``, captures stderr to a file, waits
  (bounded) for the ``listening on <addr>:<port>`` line and for ``GET /ping``, finds children by
  process name through /proc, and stops the server by its pid.
* ``start_server`` fixture: a factory; every server it starts is stopped in the finalizer
  (SIGTERM, wait, SIGKILL), and any child process the tests saw that outlived its master is
  SIGKILLed by pid.
* Tiny HTTP clients: ``request``/``get`` over http.client, ``raw_exchange``/``read_response`` over
  a raw socket for exact bytes (e.g. headers without a body); ``metric`` reads one /metrics
  line, ``free_port`` finds a loopback port.
* ``heavy_result(n)``: the reference /heavy job computed independently (closed form).

All tests are skipped when the binary is missing (LAGLESS_BIN unset and build/lagless absent,
or not executable).
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def _find_binary():
    path = os.environ.get("LAGLESS_BIN")
    if not path:
        path = os.path.join(REPO_ROOT, "build", "lagless")
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return os.path.abspath(path)
    return None


LAGLESS_BIN = _find_binary()


def _sanitized(path):
    """True for a binary built with AddressSanitizer (make SAN=1), told by the symbol the
    compiler makes every instrumented object call. Its resident memory is not the server's:
    it holds ASan's shadow memory (an eighth of every page the process touched, kept after the
    munmap that gave the page back) and the quarantine of freed blocks (up to 256 MiB), whose
    sizes depend on the allocator's version and the kernel (one machine measured 0.18 KiB per
    idle connection plain and 4.65 KiB under ASan). So a resident-memory figure is asserted on
    the plain build; under ASan the same test checks correctness and the server's own counts."""
    if path is None:
        return False
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


SANITIZED = _sanitized(LAGLESS_BIN)
HARNESS_VARS = ("LAGLESS_BIN", "LAGLESS_MODULES", "LAGLESS_TEST_MODULES", "LAGLESS_LOAD_BIN")

COMM_BY_ROLE = {
    "master": "lagless",
    "loop": "lagless-loop",
    "compute": "lagless-compute",
}

LISTEN_RE = re.compile(r"listening on \[?([0-9A-Za-z.:%]*?)\]?:(\d+)\b")

HEAVY_MOD = 1000003

# a sanitizer report or a child dying of a crash signal in the server's log is always a bug
CRASH_RE = re.compile(r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:"
                      r"|killed by signal (?:4|6|7|8|11)\b|SIGSEGV|SIGABRT|SIGBUS|SIGILL|SIGFPE")


def heavy_result(n):
    """x = 0; for i in 0..n-1: x = (x + i*7) % 1000003, in closed form (the sum is linear)."""
    return (7 * (n * (n - 1) // 2)) % HEAVY_MOD


def heavy_result_loop(n):
    x = 0
    for i in range(n):
        x = (x + i * 7) % HEAVY_MOD
    return x


@pytest.fixture(autouse=True)
def _require_binary():
    if LAGLESS_BIN is None:
        pytest.skip("lagless binary missing (set LAGLESS_BIN or run make)")


# --------------------------------------------------------------------------------------------
# /proc helpers


def proc_stat(pid):
    """Returns (comm, state, ppid, starttime) of pid, or None if it does not exist."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None
    lp = data.find("(")
    rp = data.rfind(")")
    if lp < 0 or rp < 0:
        return None
    comm = data[lp + 1:rp]
    rest = data[rp + 2:].split()
    # rest[0] = state (field 3), rest[1] = ppid (field 4), rest[19] = starttime (field 22)
    try:
        return comm, rest[0], int(rest[1]), int(rest[19])
    except (IndexError, ValueError):
        return None


def proc_cpu_ticks(pid):
    """utime + stime of pid in clock ticks, or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    rest = data[data.rfind(")") + 2:].split()
    try:
        return int(rest[11]) + int(rest[12])
    except (IndexError, ValueError):
        return None


def sched_slice_of(pid):
    """The se.slice line of /proc/pid/sched (ns; EEVDF kernels), or None."""
    with open("/proc/%d/sched" % pid) as f:
        for line in f:
            if line.startswith("se.slice"):
                return int(line.split(":")[1])
    return None


def children_of(ppid):
    """[(pid, comm, state, starttime)] of every process whose parent is ppid."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = proc_stat(int(name))
        if st is None:
            continue
        comm, state, parent, start = st
        if parent == ppid:
            out.append((int(name), comm, state, start))
    return out


def lagless_in_group(pgid):
    """Pids of live processes named lagless* whose process group is pgid."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        comm = data[data.find("(") + 1:data.rfind(")")]
        rest = data[data.rfind(")") + 2:].split()
        try:
            if comm.startswith("lagless") and rest[0] not in ("Z", "X") and int(rest[2]) == pgid:
                out.append(int(name))
        except (IndexError, ValueError):
            continue
    return out


def pid_alive(pid, starttime=None):
    """True while pid exists, is not a zombie and (if given) has the same start time."""
    st = proc_stat(pid)
    if st is None:
        return False
    if starttime is not None and st[3] != starttime:
        return False  # pid reused by another process
    return st[1] not in ("Z", "X", "x")


def wait_until(pred, timeout, interval=0.05):
    """Polls pred() until it returns a truthy value or timeout seconds pass; returns the last value."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= end:
            return v
        time.sleep(interval)


class Notify:
    """The systemd side of NOTIFY_SOCKET: collects every datagram the server sends, as they
    come (a reader thread, as systemd reads its socket): a reader that falls behind lets the
    socket's queue fill (net.unix.max_dgram_qlen, 10 datagrams: ten seconds of STATUS= lines)
    and sd_notify(3) in the master then blocks, so a test that waited long without reading
    hung the server it watched."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.messages = []
        self._lock = threading.Lock()  # every recv and append under it: arrival order kept
        self._closed = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _pull(self):
        with self._lock:
            while True:
                try:
                    self.messages.append(self.sock.recv(4096, socket.MSG_DONTWAIT).decode())
                except (BlockingIOError, OSError):
                    return

    def _read(self):
        import select
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select([self.sock], [], [], 0.05)
            except (OSError, ValueError):
                return  # closed
            if ready:
                self._pull()

    def drain(self):
        """Every datagram received so far (those already queued included)."""
        self._pull()
        return self.messages

    def wait_for(self, key, timeout=10.0):
        return wait_until(lambda: any(key in m for m in self.drain()), timeout)

    def count(self, key):
        return sum(1 for m in self.drain() if key in m)

    def close(self):
        self._closed.set()
        self._reader.join(5)
        self.sock.close()


# --------------------------------------------------------------------------------------------
# HTTP helpers


class Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # dict, lower-case names -> last value
        self.body = body

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return "Response(%d %r, %r, %r)" % (self.status, self.reason, self.headers, self.body[:200])


def request(port, method, path, body=None, headers=None, timeout=10.0):
    """One request on a fresh connection; returns Response."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, r.reason, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        conn.close()


def get(port, path, timeout=10.0):
    return request(port, "GET", path, timeout=timeout)


def metric(port, name, timeout=10.0):
    """The value of the /metrics line "NAME VALUE" (name with its labels, as the server writes
    them), or 0.0 when there is no such line."""
    text = get(port, "/metrics", timeout=timeout).body.decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else 0.0


def free_port():
    """A loopback TCP port that was free a moment ago (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


# bytes received past the end of a response, per socket (pipelined responses)
_leftover = weakref.WeakKeyDictionary()


def _recv(sock):
    buf = _leftover.pop(sock, b"")
    if buf:
        return buf
    return sock.recv(65536)


def read_response(sock, read_body=True):
    """Reads one HTTP/1.1 response from sock (Content-Length bodies, or until close when there is
    none); bytes past its end are kept for the next call on the same socket. Raises
    socket.timeout / ConnectionError on failure, EOFError on an early close."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = _recv(sock)
        if not chunk:
            raise EOFError("connection closed before a full response head: %r" % buf[:200])
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})(?: (.*))?$", lines[0])
    if not m:
        raise AssertionError("bad status line %r" % lines[0])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = rest
    if not read_body:
        if body:
            _leftover[sock] = body
        body = b""
    elif "content-length" in headers:
        n = int(headers["content-length"])
        while len(body) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        if len(body) > n:
            _leftover[sock] = body[n:]
        body = body[:n]
    elif "transfer-encoding" not in headers:
        # no length: the body runs to the close (not expected from lagless; tolerated)
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                body += chunk
        except (socket.timeout, ConnectionError):
            pass
    return Response(int(m.group(1)), m.group(2) or "", headers, body)


def raw_exchange(port, data, timeout=5.0):
    """Sends exact bytes on a fresh connection and reads one response."""
    with connect(port, timeout) as s:
        s.sendall(data)
        return read_response(s)


def peer_closed(sock, timeout=2.0):
    """True if the peer closes sock (EOF or reset) within timeout, False if still open."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(1)
    except socket.timeout:
        return False
    except ConnectionError:
        return True
    return data == b""


def tcp_queues(local_port, remote_port):
    """(tx_queue, rx_queue) in bytes of the IPv4 socket local_port -> remote_port on this host,
    from /proc/net/tcp (a connection still in the accept queue is listed too), or None."""
    want_local, want_remote = ":%04X" % local_port, ":%04X" % remote_port
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            p = line.split()
            if p[1].endswith(want_local) and p[2].endswith(want_remote):
                tx, rx = p[4].split(":")
                return int(tx, 16), int(rx, 16)
    return None


def server_rx_queue(server_port, client_port):
    """Bytes the server has not read yet on its side of our connection, or None."""
    q = tcp_queues(server_port, client_port)
    return None if q is None else q[1]


def wait_server_read(port, sock, timeout=10.0):
    """Waits until the server on port has read every byte sent on the client socket sock: the
    server acknowledged them all (our send queue is empty) and its receive queue is empty.
    For a test that must know the server saw bytes before it acts (a sleep cannot know)."""
    cport = sock.getsockname()[1]

    def read_all():
        mine, theirs = tcp_queues(cport, port), tcp_queues(port, cport)
        return mine is not None and theirs is not None and mine[0] == 0 and theirs[1] == 0
    return wait_until(read_all, timeout)


def job_slots(port):
    """The job-slot table as /health shows it: total, free, running, queued."""
    return get(port, "/health", timeout=10).json()["slots"]


def wait_jobs(port, running=None, queued=None, timeout=10.0):
    """Waits until /health shows `running` jobs on compute and `queued` jobs waiting (None:
    any number); True once it does, False after timeout. A job sent from another thread is
    seen this way, where a sleep only guesses when it got there."""
    def ok():
        st = job_slots(port)
        return ((running is None or st["running"] == running)
                and (queued is None or st["queued"] == queued))
    return bool(wait_until(ok, timeout))


# --------------------------------------------------------------------------------------------
# The server under test


class ServerStartError(Exception):
    pass


class Server:
    def __init__(self, args=(), workdir=None, start_timeout=10.0, env=None, listen=True,
                 log_path=None, preexec_fn=None, pass_fds=()):
        self.args = list(args)
        self.workdir = workdir or tempfile.mkdtemp(prefix="lagless-it-")
        fd, self.stderr_path = tempfile.mkstemp(prefix="stderr-", suffix=".log", dir=self.workdir)
        os.close(fd)
        self.log_path = log_path  # where the log lines go when --error-log is given
        self.argv = [LAGLESS_BIN] + self.args + (["--listen", "127.0.0.1:0"] if listen else [])
        self._stderr = open(self.stderr_path, "wb")
        self.port = None
        self.seen = {}  # pid -> starttime of every child observed, for the final cleanup
        # a test that crashes a process on purpose (/test/crash) sets this to a regex of the
        # log lines it caused, so they are not reported as crashes
        self.expected_crash_re = None
        self.returncode = None
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            # The harness's own LAGLESS_* variables are no settings: the server would warn.
            env=env if env is not None else {k: v for k, v in os.environ.items()
                                             if k not in HARNESS_VARS},
            start_new_session=True,  # own process group: terminal signals do not reach it
            preexec_fn=preexec_fn,   # e.g. a low RLIMIT_NOFILE for the EMFILE test
            pass_fds=pass_fds,       # descriptors the server inherits (the fd leak test)
        )
        self.pid = self.proc.pid
        try:
            self._wait_ready(start_timeout)
        except BaseException:
            self.kill_all()
            raise

    # -- start-up

    def _wait_ready(self, timeout):
        end = time.monotonic() + timeout
        while True:
            m = LISTEN_RE.search(self.log())
            if m:
                self.port = int(m.group(2))
                break
            if self.proc.poll() is not None:
                raise ServerStartError("lagless exited with %r before listening; argv=%r\nstderr:\n%s"
                                       % (self.proc.returncode, self.argv, self.log()))
            if time.monotonic() >= end:
                raise ServerStartError("no 'listening on' line within %.0f s; argv=%r\nstderr:\n%s"
                                       % (timeout, self.argv, self.log()))
            time.sleep(0.02)
        if self.port == 0:
            raise ServerStartError("server reported port 0: %s" % self.log())
        last = None
        while True:
            try:
                r = get(self.port, "/ping", timeout=1.0)
                if r.status == 200:
                    return
                last = r
            except (OSError, http.client.HTTPException) as e:
                last = e
            if self.proc.poll() is not None:
                raise ServerStartError("lagless exited with %r before answering /ping\nstderr:\n%s"
                                       % (self.proc.returncode, self.log()))
            if time.monotonic() >= end:
                raise ServerStartError("GET /ping did not answer 200 within %.0f s (last: %r)\n"
                                       "stderr:\n%s" % (timeout, last, self.log()))
            time.sleep(0.05)

    # -- inspection

    def log(self):
        text = ""
        for path in (self.stderr_path, self.log_path):
            try:
                with open(path, "rb") as f:
                    text += f.read().decode("utf-8", "replace")
            except (OSError, TypeError):
                pass
        return text

    def crash_reports(self):
        """Log lines that show a sanitizer report or a crash (see CRASH_RE)."""
        return [line for line in self.log().splitlines() if CRASH_RE.search(line)
                and not (self.expected_crash_re and re.search(self.expected_crash_re, line))]

    def running(self):
        return self.proc.poll() is None

    def children(self, role=None):
        """Sorted pids of the live (non-zombie) direct children of the master, filtered by role
        ("loop", "compute") through the process name."""
        out = []
        for pid, comm, state, start in children_of(self.pid):
            if state in ("Z", "X", "x"):
                continue
            self.seen[pid] = start
            if role is None or comm == COMM_BY_ROLE[role]:
                out.append(pid)
        return sorted(out)

    def wait_children(self, role, count, timeout=5.0, exclude=()):
        """Waits until exactly count children of role are alive and none is in exclude; returns
        the pid list (possibly not matching on timeout)."""
        exclude = set(exclude)
        res = []

        def ok():
            nonlocal res
            res = self.children(role)
            return len(res) == count and not (set(res) & exclude)

        wait_until(ok, timeout)
        return res

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    # -- shutdown

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """Sends sig to the master, waits up to timeout for it to exit and returns its exit code
        (negative: killed by that signal). If it does not exit in time it is SIGKILLed (the
        return code is then -9)."""
        if self.proc.poll() is None:
            self.children()  # remember the current children for the cleanup
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.returncode = self.proc.returncode
        self._close_log()
        return self.returncode

    def _close_log(self):
        try:
            self._stderr.close()
        except OSError:
            pass

    def kill_all(self):
        """Finalizer: stops the master (SIGTERM, 5 s, SIGKILL), then SIGKILLs by pid any child we
        saw that is still alive (same start time) and the server's own process group."""
        if self.proc.poll() is None:
            self.children()
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
        for pid, start in list(self.seen.items()):
            if pid_alive(pid, start):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        # stragglers we never saw: lagless processes left in the process group we created
        # (start_new_session: its id is the master's pid)
        for pid in lagless_in_group(self.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._close_log()


@pytest.fixture
def start_server(tmp_path):
    """Factory: start_server(*args) -> Server. Every server is stopped at teardown."""
    servers = []

    def _start(*args, start_timeout=10.0, env=None, log_path=None, pass_fds=()):
        d = tmp_path / ("server%d" % len(servers))
        d.mkdir()
        srv = Server(list(args), workdir=str(d), start_timeout=start_timeout, env=env,
                     log_path=log_path, pass_fds=pass_fds)
        servers.append(srv)
        return srv

    yield _start
    for srv in servers:
        srv.kill_all()
    crashes = [(srv.argv, line) for srv in servers for line in srv.crash_reports()]
    if crashes:
        pytest.fail("server log shows a crash or sanitizer report: %r" % crashes[:10])


@pytest.fixture
def server(start_server):
    """A server with default sizing."""
    return start_server()


def calibrate_heavy(port, iterations=30_000_000, runs=2, timeout=30.0):
    """Iterations per second of the server's /heavy job, from its run_ms (wall time as a
    fallback); the fastest of a few runs, so that jobs sized from it last at least as long as
    asked even when the machine was busy during the calibration."""
    best = 0.0
    for _ in range(runs):
        t0 = time.monotonic()
        r = get(port, "/heavy?iterations=%d" % iterations, timeout=timeout)
        wall = time.monotonic() - t0
        assert r.status == 200, r
        doc = r.json()
        run_s = float(doc.get("run_ms", 0)) / 1000.0
        if run_s <= 0.001:
            run_s = max(wall, 0.001)
        best = max(best, iterations / run_s)
    return best


def heavy_iterations_for(port, seconds):
    """Iterations that make /heavy run about `seconds` here (at most 10^12)."""
    ips = calibrate_heavy(port)
    return int(min(10 ** 12, max(1_000_000, ips * seconds)))


def send_all_at_once(port, payloads, timeout=60.0):
    """Sends each payload (the bytes of one request) on its own connection, all connected first
    and released together; returns (Response, time.monotonic() at its end) per payload."""
    return send_all_at_once_to([(port, p) for p in payloads], timeout)


def send_all_at_once_to(pairs, timeout=60.0):
    """send_all_at_once with a port per request: pairs are (port, payload bytes)."""
    socks = [connect(port, timeout=timeout) for port, _ in pairs]
    out = [None] * len(pairs)
    go = threading.Event()

    def one(i):
        go.wait()
        socks[i].sendall(pairs[i][1])
        out[i] = (read_response(socks[i]), time.monotonic())

    calls = [Call(one, i) for i in range(len(pairs))]
    for c in calls:
        c.start()
    go.set()
    for c in calls:
        c.get(timeout)
    for s in socks:
        s.close()
    return out


class Call(threading.Thread):
    """Runs fn(*args) in a thread; .result / .error / .elapsed after join()."""

    def __init__(self, fn, *args, **kwargs):
        super().__init__(daemon=True)
        self.fn, self.a, self.kw = fn, args, kwargs
        self.result = None
        self.error = None
        self.elapsed = None

    def run(self):
        t0 = time.monotonic()
        try:
            self.result = self.fn(*self.a, **self.kw)
        except BaseException as e:  # reported by the test
            self.error = e
        self.elapsed = time.monotonic() - t0

    def get(self, timeout):
        self.join(timeout)
        assert not self.is_alive(), "call %r did not finish within %.1f s" % (self.fn, timeout)
        if self.error is not None:
            raise self.error
        return self.result
