"""Benchmark 13: lagless in front of an app (upstream routes, issue 35) against nginx
`proxy_pass` to an `upstream {}` block with `keepalive N`, `proxy_http_version 1.1` and
`proxy_set_header Connection ""` (nginx's own advice for kept upstream connections), each
figure a ratio measured in the same run. Both servers run one event-loop process (lagless
`--loop-workers 1`, nginx `worker_processes 1`) and proxy to the SAME origin: a separate nginx
serving a 1 KB file with keep-alive (as its users run it: access log off, one worker), which is
also what the direct request asks.

13a (X1) 64 keep-alive clients, GET of the 1 KB file:
    * latency added over the direct request: lagless-load open loop (no coordinated
      omission) at PACE_RPS over 64 connections, each server in turn, ROUNDS rounds
      (direct, lagless, nginx), the median p50 and p99 of the rounds; added = proxied - direct.
      Target: lagless's added p99 <= nginx's.
    * requests per server CPU-second: wrk -t1 -c64 -d3s after a 1 s warm-up, requests /
      (the ns the scheduler ran every process of the server, /proc/PID/schedstat), lagless
      and nginx in turn CPU_ROUNDS times, the means compared. Target >= 1.2 x nginx.
    * instructions per proxied request: callgrind on lagless's one loop worker and on nginx
      with `master_process off` (its only process serves), counting switched on once they
      answer (callgrind_control -i on), wrk -t1 -c64 -d3s; the process's total instructions /
      wrk's requests (as bench_instr.py does for /ping). Target <= 0.5 x nginx's.
13b (X2) app connections opened per 100,000 requests once warm: a fresh server, X2_WARM
    requests of wrk -t1 -c64 (its first connections opened), then the origin nginx's
    stub_status `accepts` over X2_REQUESTS more (wrk stopped by a count): what the keep-alive policy
    (keepalive N, max_requests / keepalive_requests, both 1000 by default) closes and opens
    again. Target <= nginx's.
13c (X7) overload: an app answering after 1 s (bench/app_origin.py, which records its
    concurrency), a route with max_conns C and queue Q, deadline DEADLINE_MS; an open-loop
    client sends 3 x C requests per second (3 x what the app can serve), each on a fresh
    connection, for OVERLOAD_S. Targets: the app's max in flight <= C; the 503s' p99 (from the
    request's write to the answer's last byte) <= 10 ms; every admitted request (not a 503)
    answered 200 before its deadline. lagless alone (nginx has no queue to compare).
13d (X12) memory, each on a fresh server and app (bench/app_origin.py), keepalive 1000 on both,
    the server's Pss summed over its processes (/proc/PID/smaps_rollup) once a few requests
    went through it, then: HELD requests at once to an app answering after 200 ms, the
    clients gone: Pss delta / the app connections left open (the app counts them); and
    HELD requests held at the app (/hold): Pss delta / HELD (each one's client and app
    connection included). Targets <= nginx's, each.
13e (X10) outlier ejection: three app servers (bench/app_origin.py, 5 ms each), one of them
    answering 500 to everything, an upstream of the three with eject_after 5 (Envoy's
    consecutive_5xx), eject_ms X10_EJECT_MS; an open-loop client at X10_RPS on fresh
    connections for X10_S. Targets: <= 5 client-visible errors before the ejection, the
    ejection within 1 s of the first error, and the server back (taken again once, on
    probation: ejected a second time) after its back-off. lagless alone (the reference is
    Envoy's default, a fixed figure: Envoy is not installed here).
13f (X6) bulkheads onto one app: bench/bulkhead_app.py under uvicorn (one process, FastAPI's
    40-thread pool for its plain-def endpoints), /slow (1 s) flooded at 3x what the pool can
    serve (X6_SLOW_RPS for X6_S s, each on a fresh connection) while /fast (5 ms) is asked
    X6_FAST_RPS times a second; the /fast p99, lagless with a bulkhead on /slow (max_conns
    X6_BULKHEAD of the app's 32, queue 16) against nginx proxy_pass (keepalive 32, as 13a).
    Targets: <= 25 ms and <= 0.2 x nginx's.
13g (X8) an app stall under 2x load: bench/app_origin.py with X8_WORKERS workers of X8_MS
    each (80 req/s; the others wait in the app's own queue, as in a prefork or thread-pool
    app), offered twice that (X8_RPS, open loop, each on a fresh connection and stamped with
    its send time), X8_PRE_S s of that load, then the app stalls X8_STALL_S s (the issue's
    30 s: POST /stall; the requests in hand and the ones started meanwhile end only when it
    ends), then X8_POST_S s more. Every request has a X8_DEADLINE_MS deadline: lagless's
    route deadline_ms with max_conns X8_WORKERS, queue X8_QUEUE and CoDel on the upstream
    (queue_wait_target_ms X8_TARGET_MS, interval X8_INTERVAL_MS); nginx proxy_pass with its
    connect, send and read timeouts at the deadline. Figures: the p99 of the 200s among the
    requests sent in the 1 s after the stall ends against the p99 of the 200s sent before it
    (its first second left out as warm-up), fewer 200s in that second than half the app's
    rate counting as not recovered; and the requests a worker of the app started more than
    the deadline after their send (the app compares their stamp with its clock; it also
    counts the ones already past it when it read them). Targets (lagless, gated): recovery
    p99 <= X8_RECOVERY_P99 x the normal p99, and 0 requests started late; nginx's figures
    informational (at 2x load with no queue of its own it is past its deadline before the
    stall).
"""

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from bench_conn import tree_pids
from bench_throughput import free_port, nginx_path
from common import (Lagless, Result, http_get, http_request, log, median, sched_of,
                    smaps_rollup, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = "/1k"
BODY = 1024
CLIENTS = 64
KEEPALIVE = 64          # kept app connections, both servers (one per client)
PACE_RPS = 2000         # 13a's open-loop rate: well under every server's capacity here
PACE_S = 5
ROUNDS = 3
WRK_SECONDS = 3
CPU_ROUNDS = 3          # 13a's CPU-second runs: lagless, nginx in turn; the means compared
X2_WARM = 10000         # 13b: requests before the count (every client's connection opened)
X2_REQUESTS = 150000    # 13b: requests counted (each kept app connection's 1,000 twice over)
C, Q, DEADLINE_MS = 16, 32, 4000   # 13c: queue wait at most Q/C s, then 1 s at the app
OVERLOAD_S = 15
HELD = 500              # 13d's connections and requests
X10_RPS, X10_S, X10_EJECT_MS = 200, 4, 2000  # 13e: the back-off ends within the run
X6_SLOW_RPS, X6_FAST_RPS, X6_S, X6_BULKHEAD = 120, 20, 8, 8  # 13f: 3 x the 40 threads' 40/s
# 13g: an app of X8_WORKERS workers, X8_MS each (80 req/s), offered 2 x that; the 30 s
# stall between X8_PRE_S s of normal load and X8_POST_S s of recovery
X8_WORKERS, X8_MS, X8_DEADLINE_MS = 4, 50, 2000
X8_RPS = 2 * X8_WORKERS * 1000 // X8_MS
X8_PRE_S, X8_STALL_S, X8_POST_S = 5, 30, 4
X8_TARGET_MS, X8_INTERVAL_MS, X8_QUEUE = 100, 250, 16
X8_RECOVERY_P99 = 1.5   # the recovery second's p99 at most this x the normal p99
LOOP_STARTED_RE = re.compile(r"loop\[\d+\] pid=(\d+) lg_loop_main: started")

NGINX_HEAD = """daemon off;
master_process {master};
worker_processes 1;
worker_rlimit_nofile 8192;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
{user}
events {{ worker_connections 4096; }}
http {{
    access_log off;
    default_type text/plain;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
"""
# The origin: a static 1 KB file, keep-alive kept (a benchmark origin never closes first).
ORIGIN_HTTP = """    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        root {prefix}/www;
        location = /ping {{ return 200 "ok"; }}
        location = /nginx_status {{ stub_status; }}
        location / {{ }}
    }}
}}
"""
# The reference proxy: nginx's documented set-up for kept upstream connections.
PROXY_HTTP = """    upstream app {{
        server 127.0.0.1:{origin};
        keepalive {keepalive};
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location = /ping {{ return 200 "ok"; }}
        location / {{
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""
LAGLESS_CONF = """[upstream app]
server = 127.0.0.1:{origin}
max_conns = {max_conns}
queue = {queue}
keepalive = {keepalive}

[route {path}]
upstream = app
deadline_ms = {deadline_ms}
"""


class Nginx:
    """nginx in the foreground with a private prefix and the http {} body `http`; the origin
    gets a 1 KB file at /1k. wrapper: argv before nginx's (valgrind), with master_process off.
    stop() by pid."""

    def __init__(self, http, wrapper=(), start_timeout=5.0, **kw):
        self.prefix = tempfile.mkdtemp(prefix="lagless-bench-nginx-")
        for d in ("www", "tmp"):
            os.makedirs(os.path.join(self.prefix, d))
        with open(os.path.join(self.prefix, "www", PATH.lstrip("/")), "wb") as f:
            f.write(b"x" * (BODY - 1) + b"\n")
        import grp
        import pwd
        user = ("user %s %s;" % (pwd.getpwuid(os.geteuid()).pw_name,
                                 grp.getgrgid(os.getegid()).gr_name)) if os.geteuid() == 0 else ""
        self.proc = None
        for _ in range(3):  # the port may be taken between free_port() and nginx's bind
            self.port = free_port()
            conf = os.path.join(self.prefix, "nginx.conf")
            with open(conf, "w") as f:
                f.write(NGINX_HEAD.format(master="off" if wrapper else "on", prefix=self.prefix,
                                          user=user) +
                        http.format(prefix=self.prefix, port=self.port, **kw))
            self.proc = subprocess.Popen(
                list(wrapper) + [nginx_path(), "-p", self.prefix, "-c", conf,
                                 "-e", os.path.join(self.prefix, "error.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
            if wait_ping(self.port, self.proc, start_timeout):
                self.pid = self.proc.pid
                return
            self.stop(keep=True)
        raise RuntimeError("nginx did not start: %s" % self.error_log())

    def error_log(self):
        try:
            with open(os.path.join(self.prefix, "error.log")) as f:
                return f.read()[-1000:]
        except OSError:
            return "(no error log)"

    def accepts(self):
        """The origin's stub_status `accepts` (connections it accepted)."""
        body = http_get(self.port, "/nginx_status", timeout=5)[2].decode()
        return int(body.split("\n")[2].split()[0])

    def stop(self, keep=False):
        """SIGQUIT (graceful) to the master, SIGKILL after 10 s (its workers die with it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if not keep:
            shutil.rmtree(self.prefix, ignore_errors=True)


def wait_ping(port, proc, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            if http_get(port, "/ping", timeout=1)[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def nginx_proxy(origin, keepalive=KEEPALIVE, wrapper=(), start_timeout=5.0):
    return Nginx(PROXY_HTTP, wrapper=wrapper, start_timeout=start_timeout, origin=origin,
                 keepalive=keepalive)


def lagless_proxy(cfg, origin, path=PATH, keepalive=KEEPALIVE, max_conns=1024, queue=1024,
                  deadline_ms=10000, wrapper=(), start_timeout=10.0):
    """lagless with one loop worker and one compute process, [route path] to the app at
    127.0.0.1:origin. The config file lives in a directory removed at stop()."""
    d = tempfile.mkdtemp(prefix="lagless-bench-proxy-")
    conf = os.path.join(d, "proxy.conf")
    with open(conf, "w") as f:
        f.write(LAGLESS_CONF.format(origin=origin, path=path, keepalive=keepalive,
                                    max_conns=max_conns, queue=queue, deadline_ms=deadline_ms))
    srv = Lagless(cfg.bin, ["-c", conf, "--loop-workers", "1", "--compute-workers", "1",
                            "--max-conns", "4096"], start_timeout=start_timeout,
                  wrapper=wrapper)
    stop = srv.stop

    def stop_and_clean():
        try:
            return stop()
        finally:
            shutil.rmtree(d, ignore_errors=True)
    srv.stop = stop_and_clean
    return srv


# --------------------------------------------------------------------------------------------
# 13a, 13b


def paced(load, port):
    """(p50 µs, p99 µs) of lagless-load's open-loop PACE_RPS over CLIENTS connections."""
    fd, out = tempfile.mkstemp(prefix="proxy-load-", suffix=".json")
    os.close(fd)
    try:
        p = subprocess.run([load, "-q", "--no-scrape", "-c", str(CLIENTS), "-d", "%ds" % PACE_S,
                            "--idle", "0", "-r", "%s=%d" % (PATH, PACE_RPS), "--json", out,
                            "http://127.0.0.1:%d" % port], capture_output=True, text=True,
                           timeout=PACE_S + 60)
        with open(out) as f:
            r = json.load(f)["routes"][0]
    finally:
        os.unlink(out)
    codes = {s["status"] for s in r["statuses"]}
    if codes != {"200"}:
        raise RuntimeError("lagless-load got statuses %s: %s" % (sorted(codes), p.stderr[-300:]))
    return r["all"]["p50_ms"] * 1e3, r["all"]["p99_ms"] * 1e3


def wrk(port, seconds, conns=CLIENTS, stop_after=None):
    """Requests of one wrk -t1 run of PATH (a non-2xx answer fails it). stop_after: wrk stops
    once that many answers came back (a Lua response() count; `seconds` is then a bound)."""
    argv = ["wrk", "-t1", "-c%d" % conns, "-d%ds" % seconds]
    script = None
    if stop_after is not None:
        fd, script = tempfile.mkstemp(prefix="lagless-bench-", suffix=".lua")
        with os.fdopen(fd, "w") as f:
            f.write("local n = 0\nfunction response(status, headers, body)\n  n = n + 1\n"
                    "  if n >= %d then wrk.thread:stop() end\nend\n" % stop_after)
        argv += ["-s", script]
    try:
        out = subprocess.run(argv + ["http://127.0.0.1:%d%s" % (port, PATH)],
                             capture_output=True, text=True, timeout=seconds + 60)
    finally:
        if script:
            os.unlink(script)
    total = re.search(r"(\d+) requests in", out.stdout)
    if out.returncode != 0 or not total or "Non-2xx" in out.stdout or "Socket errors" in \
            out.stdout:
        raise RuntimeError("wrk failed: %s %s" % (out.stdout, out.stderr))
    return int(total.group(1))


def per_cpu_second(pid, port):
    """(requests per server CPU-second, requests per second) of wrk -t1 -c64 after a 1 s
    warm-up. CPU time is what the scheduler ran the server's processes for, in ns
    (/proc/PID/schedstat), not utime + stime: those are 10 ms ticks sampled per process."""
    wrk(port, 1)
    pids = tree_pids(pid)
    t0 = sched_of(pids)
    w0 = time.monotonic()
    n = wrk(port, WRK_SECONDS)
    wall = time.monotonic() - w0
    t1 = sched_of(pids)
    ran = sum(t1[p][0] - t0[p][0] for p in t0 if p in t1)
    return n / (ran / 1e9), n / wall


def opened_per_100k(pid, port, origin):
    """(app connections opened per 100,000 requests once warm, requests): after X2_WARM
    requests (which open the first CLIENTS connections), the origin's accepts over X2_REQUESTS
    more of wrk -t1 -c64: what the keep-alive policy closes and opens again. Counts, not
    durations: the CLIENTS connections age together and close in bursts every max_requests
    of theirs, so over a fixed time the faster server crossed one more burst or one less
    (79-127 and 70-161 per 100,000 in earlier runs of one policy)."""
    wrk(port, 30, stop_after=X2_WARM)
    a0 = origin.accepts()
    n = wrk(port, 60, stop_after=X2_REQUESTS)
    # per X2_REQUESTS, not per n: n passes it by the answers still in flight at the stop (up
    # to 63), which is not what the servers did differently
    return (origin.accepts() - a0 - 1) * 1e5 / X2_REQUESTS, n  # -1: a0's own reading


def callgrind_total(path):
    with open(path) as f:
        m = re.search(r"^totals:\s+(\d+)", f.read(), re.M)
    if not m:
        raise RuntimeError("no totals line in %s" % path)
    return int(m.group(1))


def instructions(cfg, origin, keep=None):
    """(lagless, nginx) instructions per proxied request: callgrind on lagless's loop worker
    and on nginx's one process (master_process off), wrk -t1 -c64 -d3s each. keep: a
    directory to copy the callgrind outputs into (for callgrind_annotate), or None."""
    out = tempfile.mkdtemp(prefix="callgrind-proxy-")
    wrapper = ["valgrind", "--tool=callgrind", "--trace-children=yes", "--instr-atstart=no",
               "--callgrind-out-file=%s/cg.%%p" % out]
    figures = []
    try:
        srv = lagless_proxy(cfg, origin.port, wrapper=wrapper, start_timeout=120.0)
        try:
            m = wait_for(lambda: LOOP_STARTED_RE.search(srv.log()), 60.0)
            if not m:
                raise RuntimeError("no loop worker started: %s" % srv.log()[-1000:])
            figures.append(counted(int(m.group(1)), srv.port, out, keep, "lagless"))
        finally:
            srv.stop()
        ngx = nginx_proxy(origin.port, wrapper=wrapper, start_timeout=60.0)
        try:
            figures.append(counted(ngx.pid, ngx.port, out, keep, "nginx"))
        finally:
            ngx.stop()
        return figures
    finally:
        shutil.rmtree(out, ignore_errors=True)


def counted(pid, port, out, keep, name):
    """(instructions per request, requests) of pid under callgrind over one wrk run: counting
    on, wrk, then a dump (callgrind_control -d) whose totals line is what was counted."""
    subprocess.run(["callgrind_control", "-i", "on", str(pid)], check=True,
                   capture_output=True, timeout=60)
    n = wrk(port, WRK_SECONDS)
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True,
                   timeout=120)
    dumps = sorted(f for f in os.listdir(out) if f.startswith("cg.%d." % pid))
    if not dumps:
        raise RuntimeError("callgrind wrote no dump for %s" % name)
    path = os.path.join(out, dumps[-1])
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(path, os.path.join(keep, "callgrind.%s" % name))
    return callgrind_total(path) / n, n


def on_proxy(cfg, name, origin, fn):
    """fn(pid, port) on a fresh proxy `name` (lagless or nginx) in front of origin."""
    srv = lagless_proxy(cfg, origin.port) if name == "lagless" else nginx_proxy(origin.port)
    try:
        return fn(srv.pid, srv.port)
    finally:
        srv.stop()


def bench_x1_x2(cfg, origin, results):
    load = cfg.load or os.path.join(os.path.dirname(cfg.bin), "lagless-load")
    lat = {"direct": [], "lagless": [], "nginx": []}
    for _ in range(ROUNDS):
        lat["direct"].append(paced(load, origin.port))
        srv = lagless_proxy(cfg, origin.port)
        try:
            lat["lagless"].append(paced(load, srv.port))
        finally:
            srv.stop()
        ngx = nginx_proxy(origin.port)
        try:
            lat["nginx"].append(paced(load, ngx.port))
        finally:
            ngx.stop()
    p50 = {k: median([x[0] for x in v]) for k, v in lat.items()}
    p99 = {k: median([x[1] for x in v]) for k, v in lat.items()}
    add = {k: (p50[k] - p50["direct"], p99[k] - p99["direct"]) for k in ("lagless", "nginx")}
    log("   %d req/s open loop over %d connections, %d s, %d rounds (p50/p99 µs): direct %.0f/%.0f;"
        " lagless %.0f/%.0f (added %.0f/%.0f); nginx %.0f/%.0f (added %.0f/%.0f)"
        % (PACE_RPS, CLIENTS, PACE_S, ROUNDS, p50["direct"], p99["direct"], p50["lagless"],
           p99["lagless"], add["lagless"][0], add["lagless"][1], p50["nginx"], p99["nginx"],
           add["nginx"][0], add["nginx"][1]))
    # added p99 may be <= 0 on a noisy machine; compare with a floor of 1 µs
    results.append(Result("13a. added p99 over direct / nginx's", max(add["lagless"][1], 1.0) /
                          max(add["nginx"][1], 1.0), 1.0,
                          figures={"p50_us": p50, "p99_us": p99, "rounds": lat}))
    cpu = {"lagless": [], "nginx": []}
    for _ in range(CPU_ROUNDS):
        for name in ("lagless", "nginx"):
            cpu[name].append(on_proxy(cfg, name, origin, per_cpu_second))
    ours, theirs = (sum(x[0] for x in cpu[k]) / len(cpu[k]) for k in ("lagless", "nginx"))

    def runs(k):
        return ", ".join("%.0f (%.0f req/s)" % x for x in cpu[k])
    log("   wrk -t1 -c%d, lagless and nginx in turn, %d rounds: req per CPU-s: lagless %s; "
        "nginx %s" % (CLIENTS, CPU_ROUNDS, runs("lagless"), runs("nginx")))
    results.append(Result("13a. proxied req per CPU-second / nginx", ours / theirs, 1.2,
                          kind="min", figures=cpu))
    opened = {k: on_proxy(cfg, k, origin, lambda pid, port: opened_per_100k(pid, port, origin))
              for k in ("lagless", "nginx")}
    log("   app connections opened per 100,000 requests once warm (keepalive %d, %d requests "
        "of wrk -c%d): lagless %.0f (%d requests); nginx %.0f (%d requests)"
        % (KEEPALIVE, X2_REQUESTS, CLIENTS, opened["lagless"][0], opened["lagless"][1],
           opened["nginx"][0], opened["nginx"][1]))
    results.append(Result("13b. app conns opened per 100k req / nginx",
                          max(opened["lagless"][0], 1.0) / max(opened["nginx"][0], 1.0), 1.0,
                          figures=opened))
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        results.append(Result("13a. instructions per proxied request / nginx",
                              skipped="valgrind missing"))
        return
    keep = os.environ.get("BENCH_PROXY_CALLGRIND") or None
    (ours_i, n1), (theirs_i, n2) = instructions(cfg, origin, keep)
    log("   callgrind, wrk -t1 -c%d: lagless %.0f instructions per proxied request (%d "
        "requests); nginx %.0f (%d)%s" % (CLIENTS, ours_i, n1, theirs_i, n2,
                                          "; outputs in %s" % keep if keep else ""))
    results.append(Result("13a. instructions per proxied request / nginx", ours_i / theirs_i,
                          0.5, figures={"lagless": ours_i, "nginx": theirs_i}))


# --------------------------------------------------------------------------------------------
# the slow app (13c, 13d)


class App:
    """bench/app_origin.py on 127.0.0.1, stopped by pid."""

    def __init__(self, delay_ms, status=200, workers=0, deadline_ms=0):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "app_origin.py"),
                                      "--delay-ms", str(delay_ms), "--status", str(status),
                                      "--workers", str(workers),
                                      "--deadline-ms", str(deadline_ms)],
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        m = re.match(r"port=(\d+)", self.proc.stdout.readline())
        if not m:
            self.stop()
            raise RuntimeError("bench/app_origin.py did not start")
        self.port = int(m.group(1))

    def stats(self):
        return json.loads(http_get(self.port, "/stats", timeout=5)[2])

    def post(self, path):
        http_request(self.port, "POST", path, b"", 5)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


async def one_request(port, path, due, timeout, stamp=False):
    """(status, seconds from the request's write to its answer's last byte) of one GET on a
    fresh connection opened at its due time (loop clock); status 0 on a failure. stamp: the
    path gets ?t=time.monotonic() at the write (bench/app_origin.py counts late arrivals)."""
    await asyncio.sleep(max(0.0, due - asyncio.get_running_loop().time()))
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    except (OSError, asyncio.TimeoutError):
        return 0, timeout
    t0 = time.monotonic()
    try:
        if stamp:
            path = "%s?t=%.6f" % (path, t0)
        w.write(b"GET %s HTTP/1.1\r\nHost: bench\r\n\r\n" % path.encode())
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), timeout)
        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        if m and int(m.group(1)):
            await asyncio.wait_for(r.readexactly(int(m.group(1))), timeout)
        return int(head.split(b" ", 2)[1]), time.monotonic() - t0
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
        return 0, time.monotonic() - t0
    finally:
        w.close()


async def open_loop(port, path, rate, seconds, timeout):
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.1
    n = int(rate * seconds)
    return await asyncio.gather(*(one_request(port, path, start + i / rate, timeout)
                                  for i in range(n)))


def bench_x7(cfg, results):
    app = App(1000)
    try:
        srv = lagless_proxy(cfg, app.port, path="/slow", keepalive=C, max_conns=C, queue=Q,
                            deadline_ms=DEADLINE_MS)
        try:
            got = asyncio.run(open_loop(srv.port, "/slow", 3 * C, OVERLOAD_S,
                                        DEADLINE_MS / 1e3 + 5))
        finally:
            srv.stop()
        peak = app.stats()["max_in_flight"]
    finally:
        app.stop()
    refused = sorted(s for st, s in got if st == 503)
    admitted = [(st, s) for st, s in got if st != 503]
    late = [(st, s) for st, s in admitted if st != 200 or s > DEADLINE_MS / 1e3]
    p99 = refused[max(0, -(-len(refused) * 99 // 100) - 1)] * 1e6 if refused else float("nan")
    log("   %d req/s (3 x C=%d per 1 s answer), queue %d, deadline %d ms, %d s: %d sent, %d "
        "refused 503 (p99 %.0f µs, max %.0f µs), %d admitted, %d of them not a 200 within "
        "the deadline (statuses %s); app's max in flight %d"
        % (3 * C, C, Q, DEADLINE_MS, OVERLOAD_S, len(got), len(refused), p99,
           refused[-1] * 1e6 if refused else float("nan"), len(admitted), len(late),
           sorted({st for st, _ in got}), peak))
    results.append(Result("13c. app max in flight / max_conns", peak / C, 1.0,
                          figures={"max_in_flight": peak, "max_conns": C}))
    results.append(Result("13c. 503 p99 under 3x overload (ms)", p99 / 1e3, 10.0,
                          figures={"p99_us": p99, "refused": len(refused)}))
    results.append(Result("13c. admitted answered late or not 200", len(late), 0,
                          figures={"admitted": len(admitted), "late": late[:10]}))


# --------------------------------------------------------------------------------------------
# 13f


X6_CONF = """[upstream app]
server = 127.0.0.1:{origin}
max_conns = 32
queue = 256
keepalive = 32

[route /slow]
upstream = app
max_conns = {bulkhead}
queue = 16
deadline_ms = 30000

[route /fast]
upstream = app
deadline_ms = 30000
"""


class UvicornApp(App):
    """bench/bulkhead_app.py under uvicorn on a free 127.0.0.1 port, stopped by pid."""

    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "bulkhead_app:app", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning", "--no-access-log"],
            cwd=HERE, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        end = time.monotonic() + 20
        while time.monotonic() < end and self.proc.poll() is None:
            try:
                if http_get(self.port, "/fast", timeout=1)[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("uvicorn serving bench/bulkhead_app.py did not start")


async def fast_under_slow_flood(port):
    """/fast answers ((status, s) each) while /slow is flooded, both open-loop."""
    timeout = X6_S + 40.0
    slow = asyncio.ensure_future(open_loop(port, "/slow", X6_SLOW_RPS, X6_S, timeout))
    fast = await open_loop(port, "/fast", X6_FAST_RPS, X6_S, timeout)
    await slow
    return fast


def fast_p99_ms(name, port):
    got = asyncio.run(fast_under_slow_flood(port))
    lat = sorted(s for st, s in got if st == 200)
    bad = len(got) - len(lat)
    p99 = lat[max(0, -(-len(lat) * 99 // 100) - 1)] * 1e3 if lat else float("inf")
    log("   %s: /fast p99 %.1f ms (p50 %.1f ms, %d answered 200, %d not) under /slow at %d/s"
        % (name, p99, lat[len(lat) // 2] * 1e3 if lat else float("nan"), len(lat), bad,
           X6_SLOW_RPS))
    return p99, bad


def bench_x6(cfg, results):
    if subprocess.run([sys.executable, "-c", "import fastapi, uvicorn"]).returncode != 0:
        results.append(Result("13f. /fast p99 under a /slow flood", skipped="fastapi or "
                              "uvicorn missing"))
        return
    figures = {}
    for name in ("lagless", "nginx"):
        app = UvicornApp()
        try:
            if name == "nginx":
                proxy = nginx_proxy(app.port, keepalive=32)
            else:
                d = tempfile.mkdtemp(prefix="lagless-bench-x6-")
                conf = os.path.join(d, "x6.conf")
                with open(conf, "w") as f:
                    f.write(X6_CONF.format(origin=app.port, bulkhead=X6_BULKHEAD))
                proxy = Lagless(cfg.bin, ["-c", conf, "--loop-workers", "1",
                                          "--compute-workers", "1", "--max-conns", "4096"])
            try:
                figures[name] = fast_p99_ms(name, proxy.port)
            finally:
                proxy.stop()
                if name == "lagless":
                    shutil.rmtree(d, ignore_errors=True)
        finally:
            app.stop()
    ours, theirs = figures["lagless"][0], figures["nginx"][0]
    results.append(Result("13f. /fast p99 under a /slow flood (ms)", ours, 25.0,
                          figures={"lagless_ms": ours, "nginx_ms": theirs,
                                   "lagless_not_200": figures["lagless"][1],
                                   "nginx_not_200": figures["nginx"][1]}))
    results.append(Result("13f. /fast p99 under a /slow flood / nginx's", ours / theirs, 0.2,
                          figures={"lagless_ms": ours, "nginx_ms": theirs}))


# --------------------------------------------------------------------------------------------
# 13g


X8_CONF = """[upstream app]
server = 127.0.0.1:{origin}
max_conns = {workers}
queue = {queue}
keepalive = {workers}
queue_wait_target_ms = {target}
queue_wait_interval_ms = {interval}

[route /slow]
upstream = app
deadline_ms = {deadline}
"""
# nginx as its users would set it for a 2 s deadline: the upstream's timeouts at the deadline.
X8_NGINX_HTTP = """    upstream app {{
        server 127.0.0.1:{origin};
        keepalive {keepalive};
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location = /ping {{ return 200 "ok"; }}
        location / {{
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_connect_timeout {deadline}ms;
            proxy_send_timeout {deadline}ms;
            proxy_read_timeout {deadline}ms;
        }}
    }}
}}
"""


async def stall_app(app_port, at):
    """At loop time `at`, POST /stall?ms=X8_STALL_S to the app itself; returns the
    time.monotonic() at which the app ends the stall (its answer says)."""
    await asyncio.sleep(max(0.0, at - asyncio.get_running_loop().time()))
    r, w = await asyncio.open_connection("127.0.0.1", app_port)
    try:
        w.write(b"POST /stall?ms=%d HTTP/1.1\r\nHost: bench\r\nContent-Length: 0\r\n\r\n"
                % (X8_STALL_S * 1000))
        head = await r.readuntil(b"\r\n\r\n")
        n = int(re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head).group(1))
        return float(re.search(rb"until=([\d.]+)", await r.readexactly(n)).group(1))
    finally:
        w.close()


async def stalled_load(port, app_port):
    """([(sent, status, seconds)], stall end): X8_RPS stamped GET /slow on fresh connections
    (sent: the due time, time.monotonic()), the app stalled X8_PRE_S s in."""
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.1
    n = int(X8_RPS * (X8_PRE_S + X8_STALL_S + X8_POST_S))
    stall = asyncio.ensure_future(stall_app(app_port, start + X8_PRE_S))
    due = [start + i / X8_RPS for i in range(n)]
    got = await asyncio.gather(*(one_request(port, "/slow", t, X8_DEADLINE_MS / 1e3 + 1,
                                             stamp=True) for t in due))
    return [(t, st, sec) for t, (st, sec) in zip(due, got)], await stall


def p99_of(xs):
    xs = sorted(xs)
    return xs[max(0, -(-len(xs) * 99 // 100) - 1)] if xs else float("inf")


def stall_figures(name, port, app):
    """The figures of one server in front of a stalled app (its log line written)."""
    got, end = asyncio.run(stalled_load(port, app.port))
    late = app.stats()
    begin = end - X8_STALL_S

    def ok(lo, hi):
        return [sec for t, st, sec in got if lo <= t < hi and st == 200]
    normal = ok(begin - X8_PRE_S + 1, begin)  # the first second warms up
    recovery = ok(end, end + 1)
    codes = {}
    for _, st, _ in got:
        codes[st] = codes.get(st, 0) + 1
    f = {"normal_p99_ms": p99_of(normal) * 1e3, "recovery_p99_ms": p99_of(recovery) * 1e3,
         "recovery_200": len(recovery), "normal_200_per_s": len(normal) / (X8_PRE_S - 1),
         "late_at_app": late["late"], "started_at_app": late["started"],
         "read_late_at_app": late["arrived_late"],
         "max_lag_ms": late["max_lag_ms"], "sent": len(got),
         "statuses": {str(k): v for k, v in sorted(codes.items())}}
    log("   %s: normal p99 %.0f ms (%.0f answered 200 per s), the 1 s after the stall p99 "
        "%.0f ms (%d answered 200); statuses %s (0: no answer within %.1f s); the app started "
        "%d requests, %d of them past their deadline (the latest %.0f ms after its send; %d were "
        "already past it when the app read them)"
        % (name, f["normal_p99_ms"], f["normal_200_per_s"], f["recovery_p99_ms"],
           f["recovery_200"], f["statuses"], X8_DEADLINE_MS / 1e3 + 1, f["started_at_app"],
           f["late_at_app"], f["max_lag_ms"], f["read_late_at_app"]))
    return f


def bench_x8(cfg, results):
    figures = {}
    for name in ("lagless", "nginx"):
        app = App(X8_MS, workers=X8_WORKERS, deadline_ms=X8_DEADLINE_MS)
        d = None
        try:
            if name == "nginx":
                proxy = Nginx(X8_NGINX_HTTP, origin=app.port, keepalive=X8_WORKERS,
                              deadline=X8_DEADLINE_MS)
            else:
                d = tempfile.mkdtemp(prefix="lagless-bench-x8-")
                conf = os.path.join(d, "x8.conf")
                with open(conf, "w") as f:
                    f.write(X8_CONF.format(origin=app.port, workers=X8_WORKERS, queue=X8_QUEUE,
                                           target=X8_TARGET_MS, interval=X8_INTERVAL_MS,
                                           deadline=X8_DEADLINE_MS))
                proxy = Lagless(cfg.bin, ["-c", conf, "--loop-workers", "1",
                                          "--compute-workers", "1", "--max-conns", "4096"])
            try:
                figures[name] = stall_figures(name, proxy.port, app)
            finally:
                proxy.stop()
                if d:
                    shutil.rmtree(d, ignore_errors=True)
        finally:
            app.stop()
    log("   (%d workers of %d ms: %d req/s; %d req/s offered; a %d s stall; deadline %d ms; "
        "lagless max_conns %d, queue %d, queue_wait_target_ms %d, interval %d ms)"
        % (X8_WORKERS, X8_MS, X8_WORKERS * 1000 // X8_MS, X8_RPS, X8_STALL_S, X8_DEADLINE_MS,
           X8_WORKERS, X8_QUEUE, X8_TARGET_MS, X8_INTERVAL_MS))
    ours, theirs = figures["lagless"], figures["nginx"]

    def recovery(f):  # fewer 200s in the recovery second than half the app's rate: not served
        if f["recovery_200"] < X8_WORKERS * 1000 // X8_MS // 2:
            return float("inf")
        return f["recovery_p99_ms"] / f["normal_p99_ms"]
    results.append(Result("13g. p99 the 1 s after a stall / normal p99", recovery(ours),
                          X8_RECOVERY_P99, figures=ours))
    results.append(Result("13g. requests reaching the app past deadline", ours["late_at_app"],
                          0, figures={"late": ours["late_at_app"],
                                      "started": ours["started_at_app"],
                                      "read_late": ours["read_late_at_app"]}))
    results.append(Result("13g. nginx: p99 after a stall / normal p99", recovery(theirs),
                          X8_RECOVERY_P99, gated=False, figures=theirs))
    results.append(Result("13g. nginx: requests reaching the app late", theirs["late_at_app"],
                          0, gated=False, figures={"late": theirs["late_at_app"],
                                                   "started": theirs["started_at_app"],
                                                   "read_late": theirs["read_late_at_app"]}))


# --------------------------------------------------------------------------------------------
# 13e


def bench_x10(cfg, results):
    apps = []
    try:
        apps = [App(5, status=500), App(5), App(5)]
        d = tempfile.mkdtemp(prefix="lagless-bench-eject-")
        conf = os.path.join(d, "eject.conf")
        with open(conf, "w") as f:
            f.write("[upstream app]\n%smax_conns = 256\nqueue = 256\neject_after = 5\n"
                    "eject_ms = %d\n\n[route /slow]\nupstream = app\ndeadline_ms = 5000\n"
                    % ("".join("server = 127.0.0.1:%d\n" % a.port for a in apps),
                       X10_EJECT_MS))
        srv = Lagless(cfg.bin, ["-c", conf, "--loop-workers", "2", "--compute-workers", "1"])
        try:
            t0 = time.monotonic()
            got = asyncio.run(timed_open_loop(srv.port, "/slow", X10_RPS, X10_S, 5))
            text = http_get(srv.port, "/metrics", timeout=5)[2].decode()
        finally:
            srv.stop()
            shutil.rmtree(d, ignore_errors=True)
    finally:
        for a in apps:
            a.stop()
    errors = sorted(t - t0 for st, t in got if st != 200)
    first = [t for t in errors if t < X10_EJECT_MS / 1e3]
    m = re.search(r'lagless_upstream_ejections_total\{upstream="app",server="127.0.0.1:%d"\} '
                  r'(\d+)' % apps[0].port, text)
    ejections = int(m.group(1)) if m else 0
    to_eject = first[-1] - first[0] if first else float("nan")
    log("   %d req/s for %d s over 3 servers, one answering 500: %d sent, %d errors before "
        "the back-off's end (the last %.0f ms after the first), %d after it; ejections %d"
        % (X10_RPS, X10_S, len(got), len(first), to_eject * 1e3, len(errors) - len(first),
           ejections))
    results.append(Result("13e. client errors before ejection / 5", len(first) / 5, 1.0,
                          figures={"errors": len(first)}))
    results.append(Result("13e. time to eject (s)", to_eject, 1.0,
                          figures={"seconds": to_eject}))
    results.append(Result("13e. ejections (2: back, then out again)", ejections / 2, 1.0,
                          kind="min", figures={"ejections": ejections}))


async def timed_open_loop(port, path, rate, seconds, timeout):
    """open_loop's requests, each as (status, time.monotonic() at its answer's end)."""
    async def one(due):
        st, _ = await one_request(port, path, due, timeout)
        return st, time.monotonic()
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.1
    return await asyncio.gather(*(one(start + i / rate) for i in range(int(rate * seconds))))


def tree_pss_kb(pid):
    return sum(smaps_rollup(p).get("Pss", 0) for p in tree_pids(pid))


def hold_clients(port, path, n):
    """n connections each sending GET path; returns the sockets (their answers unread)."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"GET %s HTTP/1.1\r\nHost: bench\r\n\r\n" % path.encode())
        socks.append(s)
    return socks


def drain(socks):
    """Reads each socket's answer (a Content-Length body) and closes it; returns the count of
    200s."""
    ok = 0
    for s in socks:
        data = b""
        while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < 5:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        ok += data.startswith(b"HTTP/1.1 200")
        s.close()
    return ok


def warm(pid, port):
    """Pss (kB) of the server tree once a few requests went through it (lazily made state,
    the first connection's, is not counted) and it settled."""
    drain(hold_clients(port, "/slow", 4))
    time.sleep(0.5)
    return tree_pss_kb(pid)


def idle_memory(pid, port, app):
    """(KB per idle kept app connection, connections kept): HELD requests at once, answered,
    their clients gone."""
    m0 = warm(pid, port)
    got = drain(hold_clients(port, "/slow", HELD))
    if got != HELD:
        raise RuntimeError("%d of %d answered 200" % (got, HELD))
    time.sleep(0.5)
    kept = app.stats()["open"]
    return (tree_pss_kb(pid) - m0) / max(kept, 1), kept


def inflight_memory(pid, port, app):
    """KB per in-flight proxied request, its client connection and its app connection
    included: HELD requests held at the app."""
    m0 = warm(pid, port)
    socks = hold_clients(port, "/hold", HELD)
    try:
        if not wait_for(lambda: app.stats()["in_flight"] >= HELD, 30):
            raise RuntimeError("only %d requests reached the app" % app.stats()["in_flight"])
        time.sleep(0.3)
        m1 = tree_pss_kb(pid)
    finally:
        app.post("/release")
        drain(socks)
    return (m1 - m0) / HELD


def memory_on(cfg, name, fn):
    """fn(pid, port, app) on a fresh app and a fresh server `name` in front of it."""
    app = App(200)
    try:
        if name == "lagless":
            srv = lagless_proxy(cfg, app.port, path="/*", keepalive=1000, max_conns=2000,
                                queue=0)
        else:
            srv = nginx_proxy(app.port, keepalive=1000)
        try:
            return fn(srv.pid, srv.port, app)
        finally:
            srv.stop()
    finally:
        app.stop()


def bench_x12(cfg, results):
    idle = {n: memory_on(cfg, n, idle_memory) for n in ("lagless", "nginx")}
    held = {n: memory_on(cfg, n, inflight_memory) for n in ("lagless", "nginx")}
    log("   %d requests at once, then idle: lagless %.2f KB per kept app connection (%d kept), "
        "nginx %.2f KB (%d kept); %d held at the app (client and app connection included): "
        "lagless %.2f KB per in-flight request, nginx %.2f KB"
        % (HELD, idle["lagless"][0], idle["lagless"][1], idle["nginx"][0], idle["nginx"][1],
           HELD, held["lagless"], held["nginx"]))
    results.append(Result("13d. KB per idle kept app conn / nginx",
                          max(idle["lagless"][0], 0.01) / max(idle["nginx"][0], 0.01), 1.0,
                          figures=idle))
    results.append(Result("13d. KB per in-flight proxied request / nginx",
                          max(held["lagless"], 0.01) / max(held["nginx"], 0.01), 1.0,
                          figures=held))


def run(cfg, sz, parts="abcdefg"):
    log("== 13. in front of an app: lagless upstream routes vs nginx proxy_pass with keepalive")
    if shutil.which("wrk") is None or nginx_path() is None:
        return [Result("13. proxy", skipped="wrk or nginx not installed")]
    results = []
    if "a" in parts or "b" in parts:
        origin = Nginx(ORIGIN_HTTP)
        try:
            log("   origin: nginx serving a %d-byte file, one worker; both proxies one "
                "event-loop process, keepalive %d" % (BODY, KEEPALIVE))
            bench_x1_x2(cfg, origin, results)
        finally:
            origin.stop()
    if "c" in parts:
        bench_x7(cfg, results)
    if "d" in parts:
        bench_x12(cfg, results)
    if "e" in parts:
        bench_x10(cfg, results)
    if "f" in parts:
        bench_x6(cfg, results)
    if "g" in parts:
        bench_x8(cfg, results)
    for x in results:
        log("   " + x.line())
    return results
