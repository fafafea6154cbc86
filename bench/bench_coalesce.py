"""9. One job for a hundred identical requests: lagless's single-flight + TTL cache side by side
with the caches users would otherwise put in front, in one run (docs/BENCHMARKS.md).

Each server faces the same scenarios:

  cold     100 concurrent requests for one key nobody asked for yet
  expiry   a cached key (TTL 1 s) past its TTL, then 50 concurrent requests
  failed   100 concurrent requests for a key whose answer is a failure (500)

nginx (proxy_cache + proxy_cache_lock on) and Varnish (its default configuration: built-in VCL,
backend given with -b) sit in front of bench/origin.py, a slow origin that sleeps 200 ms per
request and counts its calls. lagless runs a 200 ms job (/test/sleep, a compute process that
sleeps) with a coalesce rule; its calls are the jobs it ran. Reported per server and scenario:
origin calls (jobs), every client's status, and the waiters' p50/p99/max latency from its own
send time. Targets (lagless only, gated): 1 job per scenario, every waiter told, waiter p99 <=
job time + 5 ms on the cold key.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from common import Lagless, Result, burst, log, percentile

DELAY_MS = 200
# past a 1 s TTL: nginx keeps expiry times in whole seconds, so 1.3 s could still be fresh
EXPIRY_WAIT_S = 2.2
HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(("GET %s HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n" % path).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return status, head.decode("latin-1"), body


def summary(samples):
    lat = sorted(t * 1000.0 for _, t in samples)
    codes = {}
    for st, _ in samples:
        codes[st] = codes.get(st, 0) + 1
    return {"codes": codes, "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99),
            "max_ms": lat[-1]}


class Origin:
    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "origin.py"), "--port",
                                      str(self.port), "--delay-ms", str(DELAY_MS)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.proc.stdout.readline()

    def calls(self, path):
        return json.loads(http_get(self.port, "/count")[2]).get(path, 0)

    def stop(self):
        self.proc.kill()
        self.proc.wait(5)


NGINX_CONF = """daemon off;
master_process on;
worker_processes {workers};
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
{user}
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    proxy_cache_path {prefix}/cache keys_zone=bench:10m;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{origin};
            proxy_http_version 1.1;
            proxy_cache bench;
            proxy_cache_key $request_uri;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 30s;
        }}
    }}
}}
"""


class Front:
    """nginx or varnishd in the foreground with a private directory, stopped by pid."""

    def __init__(self, kind, origin_port, workers):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix="lagless-bench-%s-" % kind)
        self.port = free_port()
        if kind == "nginx":
            os.makedirs(os.path.join(self.dir, "tmp"))
            import grp
            import pwd
            user = ("user %s %s;" % (pwd.getpwuid(os.geteuid()).pw_name,
                                     grp.getgrgid(os.getegid()).gr_name)) \
                if os.geteuid() == 0 else ""
            conf = os.path.join(self.dir, "nginx.conf")
            with open(conf, "w") as f:
                f.write(NGINX_CONF.format(workers=workers, prefix=self.dir, user=user,
                                          port=self.port, origin=origin_port))
            argv = [shutil.which("nginx") or "/usr/sbin/nginx", "-p", self.dir, "-c", conf,
                    "-e", os.path.join(self.dir, "error.log")]
        else:
            # Default configuration: the built-in VCL with the backend given by -b; -j none
            # and a private -n directory only so that it runs from a temporary directory.
            argv = [shutil.which("varnishd") or "/usr/sbin/varnishd", "-F", "-j", "none",
                    "-a", "127.0.0.1:%d" % self.port, "-b", "127.0.0.1:%d" % origin_port,
                    "-n", self.dir, "-s", "malloc,64m"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        end = time.monotonic() + 15
        while time.monotonic() < end:
            try:
                if http_get(self.port, "/ping", timeout=1)[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("%s did not start" % kind)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


def metric(port, name):
    text = http_get(port, "/metrics")[2].decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else 0.0


def settled(calls, path):
    """Origin calls for path once a background fetch started by the burst had time to land."""
    time.sleep(0.4)
    return calls(path)


def scenarios(port, path_of, calls):
    """Runs the three scenarios; path_of(scenario, key) builds the request, calls(path) counts
    origin calls (jobs) so far: each figure is the difference across its burst."""
    out = {}
    tag = "%d" % int(time.time() * 1000)
    for sc, n in (("cold", 100), ("expiry", 50), ("failed", 100)):
        p = path_of(sc, "%s-%s" % (sc, tag))
        if sc == "expiry":
            http_get(port, p)
            time.sleep(EXPIRY_WAIT_S)
        before = calls(p)
        s = burst([port], p, n)
        out[sc] = dict(summary(s), calls=settled(calls, p) - before)
    return out


def run_front(kind, origin, workers):
    f = Front(kind, origin.port, workers)
    try:
        def path_of(sc, key):
            return ("/fail?k=%s" % key) if sc == "failed" else \
                ("/slow?k=%s&ttl=%d" % (key, 1 if sc == "expiry" else 60))
        return scenarios(f.port, path_of, origin.calls)
    finally:
        f.stop()


def run_lagless(binary, loops, policy):
    srv = Lagless(binary, ["--loop-workers", str(loops), "--compute-workers", "1",
                           "--compute-policy", policy,
                           "--enable-test-jobs", "1", "--cache-jitter-pct", "0", "--coalesce",
                           "/test/sleep ttl=1000 query=ms,k,fail"])
    try:
        def path_of(sc, key):
            return "/test/sleep?ms=%d&k=%s%s" % (DELAY_MS, key, "&fail=1" if sc == "failed" else "")

        # a first job warms the compute process (its first output region, module state), so
        # the cold-key figure is the coalescing and not the process's first run
        http_get(srv.port, "/test/sleep?ms=1&k=warm-up")
        # the benchmark's requests are the only traffic, so every job is one of theirs
        return scenarios(srv.port, path_of,
                         lambda path: int(metric(srv.port, "lagless_coalesce_jobs_total")))
    finally:
        srv.stop()


def line(name, sc, r):
    return "   %-8s %-7s calls %3d  codes %-16s p50 %7.1f  p99 %7.1f  max %7.1f ms" % (
        name, sc, r["calls"], ",".join("%s:%d" % kv for kv in sorted(r["codes"].items())),
        r["p50_ms"], r["p99_ms"], r["max_ms"])


def run(cfg, sz):
    log("== 9. one job for a hundred identical requests: lagless single-flight vs nginx "
        "proxy_cache_lock and Varnish, %d ms origin / job" % DELAY_MS)
    loops = int(sz.get("loop_workers", 2)) if isinstance(sz, dict) else 2
    figures = {}
    origin = Origin()
    try:
        for kind, exe in (("nginx", "nginx"), ("varnish", "varnishd")):
            if shutil.which(exe) is None and not os.path.exists("/usr/sbin/" + exe):
                log("   %s not installed: skipped" % kind)
                continue
            try:
                figures[kind] = run_front(kind, origin, loops)
            except RuntimeError as e:
                log("   %s: %s" % (kind, e))
    finally:
        origin.stop()
    # The origin behind nginx and Varnish is a process of normal priority; so is lagless's job
    # here unless --compute-policy says otherwise (normal is the server's default too). Under
    # --compute-policy idle (SCHED_IDLE) a job
    # on a machine shared with other busy programs waits for their idle time (README,
    # --compute-policy): the cold figure then measured that wait (one run: p50 301 ms for a
    # 200 ms job), not the wake of the waiters this benchmark is about.
    policy = getattr(cfg, "compute_policy", "") or "normal"
    log("   lagless compute processes under --compute-policy %s" % policy)
    figures["lagless"] = run_lagless(cfg.bin, loops, policy)
    for name, res in figures.items():
        for sc in ("cold", "expiry", "failed"):
            log(line(name, sc, res[sc]))
    lg = figures["lagless"]
    results = [
        Result("9. lagless jobs, 100 cold requests", lg["cold"]["calls"], 1, "max",
               figures=figures),
        Result("9. lagless waiter p99 / (job + 5 ms)", lg["cold"]["p99_ms"] / (DELAY_MS + 5.0),
               1.0, "max"),
        Result("9. lagless jobs after expiry, 50 requests", lg["expiry"]["calls"], 1, "max"),
        Result("9. lagless jobs for a failed key", lg["failed"]["calls"], 1, "max"),
        Result("9. lagless failed-key waiters told (share)",
               lg["failed"]["codes"].get(500, 0) / 100.0, 1.0, "min"),
    ]
    for name in ("nginx", "varnish"):
        if name in figures:
            results.append(Result("9. %s cold p99 / lagless cold p99" % name,
                                  figures[name]["cold"]["p99_ms"] / lg["cold"]["p99_ms"], 1.0,
                                  "min", gated=False))
    return results
