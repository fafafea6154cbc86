"""15. One app call per key for the app behind lagless (issue 37, docs/CACHE.md "Proxied
routes"): benchmark 9's stampede, but against a FastAPI app that lagless proxies, with nginx
(proxy_cache + proxy_cache_lock on) and Varnish (its default configuration) in front of the same
app in the same run, and benchmark 12's three replicas sharing one redis-server.

The app is bench/pcache_app.py under one uvicorn process: every GET of /slow or /fail awaits
200 ms (an I/O route), answers with Cache-Control (public, max-age=S for /slow; a 500 without
one for /fail) and counts its calls per path and query; the figures are those counts.

  X3  cold     100 concurrent GETs of one key nobody asked for yet: app calls, and the
               waiters' p99 from each request's own send time (target: 1 call, p99 <= the
               app's own time + 5 ms, that time the slowest of 5 GETs sent to it directly,
               one by one, in the same run)
  X4  expiry   a key stored with max-age=1 (the route's ttl_ms is longer: the app's max-age
               shortens it), 2.2 s later 50 concurrent GETs (target: 1 call)
      failed   100 concurrent GETs of a key the app answers 500 (target: 1 call, every waiter
               told the 500 at once)
  X5  cluster  3 lagless replicas with scope = cluster on one redis-server, 20 concurrent GETs
               to each (60) of one cold key (target: 1 call); then the redis-server stopped and
               the same again on a new key (target: <= 3 calls, one per replica, 0 errors)

lagless: [upstream app] with keepalive and room for every request at once, [route /*] with
`upstream = app`, `coalesce = on`, `ttl_ms = 60000`, one loop worker per core (as its
defaults); nginx and Varnish as benchmark 9 runs them.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import bench_cluster
import bench_coalesce
from common import Lagless, Result, burst, http_get, log, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
DELAY_MS = 200
REPLICAS = 3
PER_REPLICA = 20


class App:
    """bench/pcache_app.py under uvicorn on 127.0.0.1, stopped by its pid."""

    def __init__(self):
        self.port = bench_coalesce.free_port()
        env = dict(os.environ, DELAY_MS=str(DELAY_MS))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", HERE, "pcache_app:app", "--host",
             "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
             "--backlog", "2048"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env, start_new_session=True)
        if not wait_for(lambda: self.proc.poll() is not None or self.answers(), 20) or \
                self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("uvicorn did not start")

    def answers(self):
        try:
            return http_get(self.port, "/ping", timeout=1)[0] == 200
        except OSError:
            return False

    def direct_ms(self, n=5):
        """The slowest of n cold GETs sent straight to the app one by one, in ms: the origin
        time the waiters' p99 is held to."""
        worst = 0.0
        for i in range(n):
            t0 = time.monotonic()
            http_get(self.port, "/slow?k=direct-%d-%d" % (time.monotonic_ns(), i))
            worst = max(worst, (time.monotonic() - t0) * 1e3)
        return worst

    def calls(self, path):
        return json.loads(http_get(self.port, "/count")[2]).get(path, 0)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def conf(app_port, scope):
    d = tempfile.mkdtemp(prefix="lagless-bench-pcache-")
    path = os.path.join(d, "pcache.conf")
    with open(path, "w") as f:
        f.write("[upstream app]\nserver = 127.0.0.1:%d\nmax_conns = 512\nqueue = 512\n"
                "keepalive = 64\n\n[route /*]\nupstream = app\ndeadline_ms = 10000\n"
                "coalesce = on\nttl_ms = 60000\n%s" % (app_port, "scope = cluster\n"
                                                       if scope == "cluster" else ""))
    return path, d


def path_of(sc, key):
    return ("/fail?k=%s" % key) if sc == "failed" else \
        ("/slow?k=%s&ttl=%d" % (key, 1 if sc == "expiry" else 60))


def run_lagless(binary, app, loops):
    path, d = conf(app.port, "local")
    srv = Lagless(binary, ["-c", path, "--loop-workers", str(loops)])
    try:
        http_get(srv.port, "/slow?k=warm-up&ttl=1")  # the first app connection and answer
        return bench_coalesce.scenarios(srv.port, path_of, app.calls)
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)


def run_front(kind, app, loops):
    f = bench_coalesce.Front(kind, app.port, loops)
    try:
        return bench_coalesce.scenarios(f.port, path_of, app.calls)
    finally:
        f.stop()


def run_cluster(binary, app, tag):
    """X5: (calls with redis, statuses), (calls with redis stopped, statuses)."""
    redis = bench_cluster.Redis()
    path, d = conf(app.port, "cluster")
    srvs = []
    try:
        for _ in range(REPLICAS):
            srvs.append(Lagless(binary, ["-c", path, "--loop-workers", "1", "--redis",
                                         "unix:" + redis.sock, "--redis-budget-ms", "50"]))
        end = time.monotonic() + 10
        while sum(bench_coalesce.metric(s.port, "lagless_cluster_redis_up") for s in srvs) \
                < REPLICAS:
            if time.monotonic() > end:
                raise RuntimeError("replicas not connected to redis")
            time.sleep(0.05)
        ports = [s.port for s in srvs]
        out = []
        for phase in ("up", "down"):
            if phase == "down":
                redis.stop()
            p = path_of("cold", "cluster-%s-%s" % (phase, tag))
            before = app.calls(p)
            got = burst(ports, p, REPLICAS * PER_REPLICA)
            out.append(dict(bench_coalesce.summary(got),
                            calls=bench_coalesce.settled(app.calls, p) - before))
        return out
    finally:
        for s in srvs:
            s.stop()
        redis.stop()
        shutil.rmtree(d, ignore_errors=True)


def run(cfg, sz):
    log("== 15. one app call per key behind lagless: proxied GETs of a %d ms FastAPI route, "
        "lagless vs nginx proxy_cache_lock and Varnish; %d replicas on redis" % (DELAY_MS,
                                                                                REPLICAS))
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        return [Result("15. proxy cache", skipped="python3-fastapi or python3-uvicorn missing")]
    loops = int(sz.get("loop_workers", 2)) if isinstance(sz, dict) else 2
    figures = {}
    app = App()
    try:
        origin_ms = app.direct_ms()
        figures["lagless"] = run_lagless(cfg.bin, app, loops)
        for kind, exe in (("nginx", "nginx"), ("varnish", "varnishd")):
            if shutil.which(exe) is None and not os.path.exists("/usr/sbin/" + exe):
                log("   %s not installed: skipped" % kind)
                continue
            try:
                figures[kind] = run_front(kind, app, loops)
            except RuntimeError as e:
                log("   %s: %s" % (kind, e))
        cluster, why = None, "redis-server not installed"
        if os.access(bench_cluster.REDIS_BIN, os.X_OK):
            try:
                cluster = run_cluster(cfg.bin, app, "%d" % int(time.time() * 1000))
            except (RuntimeError, OSError) as e:
                why = str(e).strip().splitlines()[-1][:160]
                log("   cluster: %s" % e)
    finally:
        app.stop()
    log("   the app alone: the slowest of 5 cold GETs %.1f ms" % origin_ms)
    for name, res in figures.items():
        for sc in ("cold", "expiry", "failed"):
            log(bench_coalesce.line(name, sc, res[sc]))
    lg = figures["lagless"]
    results = [
        Result("15. X3 app calls, 100 cold GETs", lg["cold"]["calls"], 1, "max",
               figures=figures),
        Result("15. X3 waiter p99 / (app alone + 5 ms)",
               lg["cold"]["p99_ms"] / (origin_ms + 5.0), 1.0, "max",
               figures={"origin_ms": origin_ms}),
        Result("15. X4 app calls after expiry, 50 GETs", lg["expiry"]["calls"], 1, "max"),
        Result("15. X4 app calls for a failing key", lg["failed"]["calls"], 1, "max"),
        Result("15. X4 failing-key waiters told (share)",
               lg["failed"]["codes"].get(500, 0) / 100.0, 1.0, "min"),
    ]
    for name in ("nginx", "varnish"):
        if name in figures:
            results.append(Result("15. %s cold p99 / lagless cold p99" % name,
                                  figures[name]["cold"]["p99_ms"] / lg["cold"]["p99_ms"], 1.0,
                                  "min", gated=False))
    if cluster is None:
        results.append(Result("15. X5 cluster", skipped=why))
        return results
    up, down = cluster
    for name, r in (("redis up", up), ("redis stopped", down)):
        log("   cluster, %-13s calls %3d  codes %-16s p50 %7.1f  p99 %7.1f  max %7.1f ms" % (
            name, r["calls"], ",".join("%s:%d" % kv for kv in sorted(r["codes"].items())),
            r["p50_ms"], r["p99_ms"], r["max_ms"]))
    n = REPLICAS * PER_REPLICA
    results += [
        Result("15. X5 app calls, %d cold GETs over %d replicas" % (n, REPLICAS), up["calls"],
               1, "max", figures={"up": up, "down": down}),
        Result("15. X5 redis stopped: app calls", down["calls"], REPLICAS, "max"),
        Result("15. X5 redis stopped: answered 200 (share)",
               down["codes"].get(200, 0) / float(n), 1.0, "min"),
    ]
    return results
