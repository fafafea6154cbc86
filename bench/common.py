"""Shared pieces of the lagless benchmarks (see docs/BENCHMARKS.md).

* ``Lagless``: the real binary on 127.0.0.1 with an ephemeral port, stopped by its pid (and any
  child it had that outlived it, by pid and start time).
* ``run_client``: the C latency client (bench/latency.c), bounded in count and time; returns
  (status, nanoseconds) samples.
* ``Stats`` / ``percentile``: nearest-rank percentiles, in microseconds.
* /proc readers: process tree, CPU ticks, Pss from smaps_rollup, the memfd arena's resident bytes.
* ``Result``: one measured ratio against its target, printed the same way by every benchmark.
* ``burst``: n concurrent GETs sent back to back, each timed from its own send (benchmarks 9
  and 12).
"""

import http.client
import json
import math
import os
import re
import selectors
import signal
import socket
import subprocess
import tempfile
import time

LISTEN_RE = re.compile(r"listening on \[?[0-9A-Za-z.:%]*?\]?:(\d+)\b")


def log(msg=""):
    print(msg, flush=True)


# --------------------------------------------------------------------------------------------
# statistics


def wait_for(pred, timeout):
    """pred()'s first true value, polled every 50 ms for at most timeout seconds; else its
    last value."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


def percentile(sorted_values, p):
    """Nearest-rank percentile (p in 0..100) of an ascending list; None when empty."""
    if not sorted_values:
        return None
    k = max(1, int(math.ceil(p / 100.0 * len(sorted_values))))
    return sorted_values[k - 1]


class Stats:
    """Latency figures of a list of nanosecond samples, reported in microseconds."""

    def __init__(self, ns_samples):
        v = sorted(ns_samples)
        self.n = len(v)
        self.p50 = _us(percentile(v, 50))
        self.p90 = _us(percentile(v, 90))
        self.p99 = _us(percentile(v, 99))
        self.p999 = _us(percentile(v, 99.9))
        self.max = _us(v[-1] if v else None)

    def line(self):
        if self.n == 0:
            return "n=0"
        return ("n=%d p50=%.1f p90=%.1f p99=%.1f p99.9=%.1f max=%.1f (µs)"
                % (self.n, self.p50, self.p90, self.p99, self.p999, self.max))

    def as_dict(self):
        return {k: getattr(self, k) for k in ("n", "p50", "p90", "p99", "p999", "max")}


def _us(ns):
    return None if ns is None else ns / 1000.0


def median(values):
    v = sorted(values)
    return v[len(v) // 2] if v else None


# --------------------------------------------------------------------------------------------
# results


class Result:
    """One benchmark figure: measured / reference = ratio, compared with target.

    kind is "max" (ratio must be <= target) or "min" (ratio must be >= target). A gated result
    that misses its target fails the run (unless BENCH_STRICT=0); an informational one only
    says so. skipped is a reason string when the benchmark could not run."""

    def __init__(self, name, ratio=None, target=None, kind="max", gated=True, skipped=None,
                 figures=None):
        self.name, self.ratio, self.target, self.kind = name, ratio, target, kind
        self.gated, self.skipped, self.figures = gated, skipped, figures or {}

    @property
    def met(self):
        if self.skipped or self.ratio is None:
            return None
        return self.ratio <= self.target if self.kind == "max" else self.ratio >= self.target

    def verdict(self):
        if self.skipped:
            return "SKIP (%s)" % self.skipped
        word = "met" if self.met else "MISSED"
        return "%s%s" % (word, "" if self.gated else " (informational)")

    def line(self):
        if self.skipped:
            return "%-44s %s" % (self.name, self.verdict())
        op = "<=" if self.kind == "max" else ">="
        return "%-44s ratio %6.2f  target %s %.2f  %s" % (self.name, self.ratio, op,
                                                          self.target, self.verdict())

    def as_dict(self):
        return {"name": self.name, "ratio": self.ratio, "target": self.target,
                "kind": self.kind, "gated": self.gated, "met": self.met,
                "skipped": self.skipped, "figures": self.figures}


# --------------------------------------------------------------------------------------------
# /proc


def proc_stat_fields(pid):
    """Fields after the comm of /proc/pid/stat (index 0 = state), or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    return data[data.rfind(")") + 2:].split()


def children_of(ppid):
    """{pid: starttime} of the live processes whose parent is ppid."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            f = proc_stat_fields(int(name))
            if f and f[0] not in ("Z", "X") and int(f[1]) == ppid:
                out[int(name)] = int(f[19])
    return out


def comm_of(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def cpu_ticks(pid):
    """utime + stime of pid in clock ticks (0 when gone)."""
    f = proc_stat_fields(pid)
    return int(f[11]) + int(f[12]) if f else 0


def smaps_rollup(pid):
    """{field: kB} of /proc/pid/smaps_rollup (Rss, Pss, Pss_Shmem, ...); {} when gone."""
    out = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB":
                    out[parts[0].rstrip(":")] = int(parts[1])
    except OSError:
        pass
    return out


def memfd_resident_bytes(pid):
    """Bytes of memory backing pid's memfd files (st_blocks of /proc/pid/fd/N), or None."""
    total, found = 0, False
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return None
    for fd in fds:
        path = "/proc/%d/fd/%s" % (pid, fd)
        try:
            if os.readlink(path).startswith("/memfd:"):
                total += os.stat(path).st_blocks * 512
                found = True
        except OSError:
            continue
    return total if found else None


# --------------------------------------------------------------------------------------------
# the server


class Lagless:
    """build/lagless on 127.0.0.1:0. stop() ends it by pid: SIGTERM, 10 s, SIGKILL, then
    SIGKILL to any child seen earlier that is still alive with the same start time."""

    def __init__(self, binary, args=(), start_timeout=10.0, wrapper=()):
        """wrapper: argv put before the binary's (a valgrind tool), or ()."""
        self.workdir = tempfile.mkdtemp(prefix="lagless-bench-")
        self.log_path = os.path.join(self.workdir, "stderr.log")
        self.argv = list(wrapper) + [binary] + list(args) + ["--listen", "127.0.0.1:0"]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self._log,
                                     start_new_session=True)
        self.pid = self.proc.pid
        self.seen = {}
        self.port = None
        try:
            self._wait_ready(start_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout):
        end = time.monotonic() + timeout
        while self.port is None:
            m = LISTEN_RE.search(self.log())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("lagless did not start: %s" % self.log()[-2000:])
            else:
                time.sleep(0.02)
        while True:
            try:
                if http_get(self.port, "/ping", timeout=1.0)[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("lagless did not answer /ping: %s" % self.log()[-2000:])
            time.sleep(0.05)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def tree(self):
        """[master pid] + the pids of its live children (remembered for stop())."""
        kids = children_of(self.pid)
        self.seen.update(kids)
        return [self.pid] + sorted(kids)

    def role_pids(self, comm):
        return [p for p in self.tree()[1:] if comm_of(p) == comm]

    def stop(self):
        if self.proc.poll() is None:
            self.tree()
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for pid, start in self.seen.items():
            f = proc_stat_fields(pid)
            if f and f[0] not in ("Z", "X") and int(f[19]) == start:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self._log.close()
        return self.proc.returncode


def sizing(binary):
    """The sizing decision the binary makes on this machine (--print-sizing)."""
    out = subprocess.run([binary, "--print-sizing"], capture_output=True, timeout=10,
                         check=True)
    return json.loads(out.stdout)


def http_get(port, path, timeout=10.0):
    """(status, headers dict, body) of one GET on a fresh connection."""
    return http_request(port, "GET", path, None, timeout)


def http_request(port, method, path, body, timeout):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def burst(ports, path, n, timeout=10.0):
    """n connections opened first (over ports round-robin), then n requests sent back to back
    from one thread and the responses read with a selector: latency is from each request's own
    send time to its last byte, with no client thread scheduling in between. Returns
    [(status, seconds)]; a request with no whole answer within timeout is (0, timeout)."""
    socks = [socket.create_connection(("127.0.0.1", ports[i % len(ports)]), timeout=timeout)
             for i in range(n)]
    sel = selectors.DefaultSelector()
    req = ("GET %s HTTP/1.1\r\nHost: bench\r\n\r\n" % path).encode()
    sent, buf, done = {}, {}, {}
    for s in socks:
        s.setblocking(False)
    for i, s in enumerate(socks):
        sent[i] = time.monotonic()
        s.sendall(req)
        buf[i] = b""
        sel.register(s, selectors.EVENT_READ, i)
    end = time.monotonic() + timeout
    while len(done) < n and time.monotonic() < end:
        for key, _ in sel.select(timeout=0.5):
            i, s = key.data, key.fileobj
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            buf[i] += chunk
            if complete(buf[i]) or not chunk:
                done[i] = (status_of(buf[i]), time.monotonic() - sent[i])
                sel.unregister(s)
    for s in socks:
        s.close()
    return [done.get(i, (0, timeout)) for i in range(n)]


def complete(data):
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    return m is not None and len(body) >= int(m.group(1))


def status_of(data):
    try:
        return int(data.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0



# --------------------------------------------------------------------------------------------
# the C client


def run_client(client, port, path="/ping", count=3000, max_seconds=20.0, fresh=False,
               interval_us=0, cpu=None):
    """Runs bench/latency (count requests, one every interval_us, or back to back when 0);
    returns [(status, ns)] (status 0 = failed request)."""
    fd, out = tempfile.mkstemp(prefix="lat-", suffix=".txt")
    os.close(fd)
    argv = [client, "--port", str(port), "--path", path, "--count", str(count),
            "--max-seconds", str(max_seconds), "--interval-us", str(interval_us), "--out", out]
    if fresh:
        argv.append("--fresh")
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    try:
        subprocess.run(argv, stdout=subprocess.DEVNULL, timeout=max_seconds + 15)
        with open(out) as f:
            return [(int(a), int(b)) for a, b in (line.split() for line in f if line.strip())]
    finally:
        os.unlink(out)


def sched_of(pids):
    """{pid: (ns run on a CPU, ns waited on a run queue)} from /proc/PID/schedstat (the
    kernel's Documentation/scheduler/sched-stats.rst); a process gone or a kernel without the
    file is left out."""
    out = {}
    for pid in pids:
        try:
            with open("/proc/%d/schedstat" % pid) as f:
                ran, waited = f.read().split()[:2]
            out[pid] = (int(ran), int(waited))
        except (OSError, ValueError):
            pass
    return out
