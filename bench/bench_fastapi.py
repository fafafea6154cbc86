"""14. The article's FastAPI app three ways, measured in one run (examples/fastapi/, issue 38):

  (a) as the article runs it: uvicorn serving examples/fastapi/main.py, its CPU route in a
      ProcessPoolExecutor of W = cpu_count - 1 workers under asyncio.wait_for;
  (b) the same file behind lagless, every route proxied (examples/fastapi/lagless-proxy.conf:
      lagless starts uvicorn with [app] and fronts it);
  (c) the same file behind lagless with the CPU route run by the python module in lagless's
      compute pool (examples/fastapi/lagless.conf, as shipped but for W compute processes and
      the deadline below), /health and the rest proxied to the app.

The call is the article's execute_cpu_workload with fewer iterations than its 35M (a call of
T_CALL_S alone here), its timeout (the app's CPU_TIMEOUT_S, (c)'s deadline_ms) TIMEOUT_S, so
that the whole benchmark takes a few minutes. Figures:

  a. the app's /health p50 and p99 (bench/latency at 200/s) while 4 CPU calls of T_PROBE_S are
     sent, rounds alternated between the three; target (c) p99 <= 0.5 x (a) p99 (the article's
     table: 3.2 ms mean, 6.8 ms p99 for the process pool on 4 vCPUs);
  b. heavy calls per second at saturation (W + 1 closed-loop clients, slices alternated),
     reported;
  c. 3 x that capacity for 10 s (lagless-load, /health at 20/s alongside): the heavy p99, the
     executor's longest queue (calls submitted and not finished, the app's GET /pool) against
     lagless's 503 share; reported;
  d. a call of 3 x TIMEOUT_S sent alone: its answer, and how long the process that ran it
     still computes after that answer (its CPU time, sampled every 20 ms); target (c) <= 0.1 x
     (a): the executor's worker computes on after wait_for's 504, lagless kills the process.
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from common import (Lagless, Result, children_of, comm_of, cpu_ticks, log, percentile,
                    proc_stat_fields, run_client)

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(HERE), "examples", "fastapi")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
ROUTE = "/compute-non-blocking"
T_CALL_S = 0.2     # the heavy call of b and c
T_PROBE_S = 0.3    # each of the 4 calls of a: 1.2 s of work, within the timeout with W = 1
TIMEOUT_S = 2.0    # the app's wait_for timeout, (c)'s deadline_ms
PROBES = 120       # /health probes per round of a, one each 5 ms
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def workload(n):
    acc = 0
    for i in range(n):
        acc += i * i
    return acc


def t_call(n, runs=2):
    """Seconds of execute_cpu_workload(n) in this process (the same loop), the best of runs."""
    best = None
    for _ in range(runs):
        t0 = time.perf_counter()
        workload(n)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def iterations_for(seconds):
    n = 2_000_000
    return max(10_000, int(n * seconds / t_call(n)))


def request(port, method, path, timeout=60, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=b"" if method == "POST" else None)
        r = c.getresponse()
        return r.status, r.read(), r.getheader("x-run-ms")
    finally:
        if conn is None:
            c.close()


def max_pending(port, timeout=60.0):
    """The app's GET /pool max_pending: behind lagless (b) the request is proxied, and right
    after an overload the upstream's places and queue may still be full, so a 503 (lagless's
    text, not the app's JSON) is asked again until the app answers, within timeout."""
    end = time.monotonic() + timeout
    while True:
        status, body, _ = request(port, "GET", "/pool")
        if status == 200 or time.monotonic() > end:
            if status != 200:
                raise RuntimeError("GET /pool: %d %r" % (status, body[:80]))
            return json.loads(body)["max_pending"]
        time.sleep(0.2)


class Uvicorn:
    """(a): uvicorn serving main:app on 127.0.0.1:PORT, as the article runs it (a free port
    picked here; not --fd, with which uvicorn takes the socket for AF_UNIX and asyncio then
    leaves Nagle on: its two writes per answer met the client's delayed ACK, 40 ms); stopped
    by its pid (SIGTERM, then SIGKILL), its executor's workers too."""

    def __init__(self, env):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [PY, "-m", "uvicorn", "main:app", "--host", "127.0.0.1", "--port", str(self.port),
             "--log-level", "warning", "--no-access-log"],
            cwd=EXAMPLE, env=env, stdout=self.log, stderr=self.log, start_new_session=True)
        self.pid = self.proc.pid
        end = time.monotonic() + 60
        while not up(self.port):
            if self.proc.poll() is not None or time.monotonic() > end:
                self.stop()
                self.log.seek(0)
                raise RuntimeError("uvicorn did not start: %s" % self.log.read()[-2000:])
            time.sleep(0.1)

    def app_pid(self):
        return self.pid

    def stop(self):
        if self.proc.poll() is None:
            kids = children_of(self.proc.pid)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            for pid, start in kids.items():
                f = proc_stat_fields(pid)
                if f and f[0] not in ("Z", "X") and int(f[19]) == start:
                    os.kill(pid, signal.SIGKILL)


def up(port):
    try:
        return request(port, "GET", "/health", timeout=2)[0] == 200
    except OSError:
        return False


class Fronted:
    """(b) or (c): lagless with the example's configuration, its paths made absolute, started
    with env; ready once /ready answers 200 (the app has passed its probe)."""

    def __init__(self, binary, so_dir, name, workers, env):
        text = open(os.path.join(EXAMPLE, name)).read()
        text = re.sub(r"(?m)^cwd = examples/fastapi$", "cwd = " + EXAMPLE, text)
        text = re.sub(r"(?m)^python_path = examples/fastapi$", "python_path = " + EXAMPLE, text)
        text = re.sub(r"(?m)^path = build/modules/", "path = %s/" % so_dir, text)
        text = re.sub(r"(?m)^command = /usr/bin/python3 ", "command = %s " % PY, text)
        # the CPU route's deadline: the app's timeout of this benchmark
        text = re.sub(r"(?ms)^(\[route %s\].*?^deadline_ms = )10000$" % ROUTE,
                      r"\g<1>%d" % (TIMEOUT_S * 1000), text)
        fd, self.conf = tempfile.mkstemp(suffix=".conf")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        saved = dict(os.environ)
        os.environ.update(env)  # the app's processes and the compute processes inherit it
        try:
            self.lg = Lagless(binary, ["-c", self.conf, "--compute-workers", str(workers)],
                              start_timeout=60)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        self.port = self.lg.port
        end = time.monotonic() + 60
        while request(self.port, "GET", "/ready", timeout=5)[0] != 200:
            if time.monotonic() > end:
                self.stop()
                raise RuntimeError("%s: the app was not ready: %s" % (name, self.lg.log()[-2000:]))
            time.sleep(0.1)

    def app_pid(self):
        (pid,) = [p for p in self.lg.tree()[1:] if (comm_of(p) or "").startswith("python")]
        return pid

    def compute_pids(self):
        return self.lg.role_pids("lagless-compute")

    def stop(self):
        self.lg.stop()
        os.unlink(self.conf)


def health_during_calls(client, port, n_probe, rounds_out):
    """One round: 4 CPU calls sent, /health probed at 200/s meanwhile (PROBES probes, 50 ms
    after the calls); appends the 200 probes' ns to rounds_out; returns the calls' statuses."""
    statuses = []
    calls = [threading.Thread(target=lambda: statuses.append(
        request(port, "POST", "%s?iterations=%d" % (ROUTE, n_probe), timeout=120)[0]))
        for _ in range(4)]
    for c in calls:
        c.start()
    time.sleep(0.05)
    rounds_out += [ns for st, ns in run_client(client, port, path="/health", count=PROBES,
                                                interval_us=5000, max_seconds=30) if st == 200]
    for c in calls:
        c.join(180)
    return statuses


def saturation(port, clients, seconds, n_call):
    """Heavy calls/s with `clients` closed-loop keep-alive clients: (completions - 1) / (last -
    first completion)."""
    done, stop, lock = [], time.monotonic() + seconds, threading.Lock()

    def loop():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while time.monotonic() < stop:
            try:
                ok = request(port, "POST", "%s?iterations=%d" % (ROUTE, n_call),
                             conn=conn)[0] == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()  # a connection the server closed: the next request reconnects
            if ok:
                with lock:
                    done.append(time.monotonic())
        conn.close()
    ts = [threading.Thread(target=loop) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(seconds + 120)
    done.sort()
    return (len(done) - 1) / (done[-1] - done[0]) if len(done) > 2 else 0.0


def overload(load_bin, port, rate, capacity, scrape):
    out = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
    out.close()
    argv = [load_bin, "-q", "-d", "10", "--idle", "1", "--timeout", "40", "--capacity",
            "%.3f" % capacity, "--rate", "%s=%.2f/s,method=POST,heavy" % (ROUTE, rate),
            "--rate", "/health=20/s,cheap", "--json", out.name]
    if not scrape:
        argv.append("--no-scrape")
    subprocess.run(argv + ["http://127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)
    with open(out.name) as f:
        doc = json.load(f)
    os.unlink(out.name)
    routes = {r["path"]: r for r in doc["routes"]}
    return routes[ROUTE], routes["/health"]


def status_stats(route, code):
    for s in route["statuses"]:
        if s["status"] == code:
            return s
    return {"count": 0, "p99_ms": None}


def quiet(pids_of, seconds=30):
    """Waits (at most seconds) until no process of pids_of() gains CPU time for 0.3 s: what
    an earlier phase left in an executor has run out."""
    end, ticks, since = time.monotonic() + seconds, {}, time.monotonic()
    while time.monotonic() < end and time.monotonic() - since < 0.3:
        now = {pid: cpu_ticks(pid) for pid in pids_of()}
        if any(now[p] > ticks.get(p, now[p]) for p in now):
            since = time.monotonic()
        ticks = now
        time.sleep(0.05)


def timed_out_call(port, pids_of, n_long):
    """Sends one call of n_long iterations (3 x the timeout) alone; returns (status, seconds to
    the answer, seconds the processes of pids_of() that were computing at the answer go on
    computing after it). CPU time is sampled every 20 ms; a process is computing while its
    utime + stime grows."""
    ticks, result = {}, {}

    def call():
        t0 = time.monotonic()
        result["status"] = request(port, "POST", "%s?iterations=%d" % (ROUTE, n_long),
                                   timeout=60)[0]
        result["t"] = time.monotonic()
        result["took"] = result["t"] - t0
    th = threading.Thread(target=call)
    th.start()
    busy_at_answer, last_growth = None, None
    end = time.monotonic() + 6 * TIMEOUT_S + 10
    while time.monotonic() < end:
        now = time.monotonic()
        grew = set()
        for pid in pids_of():
            t = cpu_ticks(pid)
            if pid in ticks and t > ticks[pid]:
                grew.add(pid)
            ticks[pid] = t
        if "t" in result:
            if busy_at_answer is None:
                busy_at_answer = grew
                last_growth = result["t"]
            elif grew & busy_at_answer:
                last_growth = now
            elif now - last_growth > 0.5:  # quiet for half a second: done
                break
        time.sleep(0.02)
    th.join(60)
    after = max(0.0, (last_growth or result.get("t", 0)) - result.get("t", 0))
    return result.get("status", 0), result.get("took", 0.0), after


def run(cfg, sz):
    log("== 14. The article's FastAPI app three ways: (a) uvicorn + ProcessPoolExecutor, (b) "
        "behind lagless, proxied, (c) behind lagless, CPU route in the pool")
    so_dir = os.path.join(os.path.dirname(cfg.bin), "modules")
    load_bin = cfg.load or os.path.join(os.path.dirname(cfg.bin), "lagless-load")
    if not os.path.isfile(os.path.join(so_dir, "python.so")) or not os.path.isfile(load_bin):
        return [Result("14. FastAPI example", skipped="python.so or lagless-load not built")]
    if subprocess.run([PY, "-c", "import fastapi, uvicorn"]).returncode != 0:
        return [Result("14. FastAPI example", skipped="fastapi or uvicorn missing for %s" % PY)]
    workers = max(1, (os.cpu_count() or 2) - 1)
    n_call, n_probe = iterations_for(T_CALL_S), iterations_for(T_PROBE_S)
    n_long = iterations_for(3 * TIMEOUT_S)
    log("   W = %d; a call: %d iterations (%.0f ms alone here), the probe phase's %d, the "
        "timeout %.1f s; load average %s" % (workers, n_call, t_call(n_call) * 1e3, n_probe,
                                             TIMEOUT_S, open("/proc/loadavg").read().split()[0]))
    env = {"WORKER_COUNT": str(workers), "CPU_ITERATIONS": str(n_call),
           "CPU_TIMEOUT_S": str(TIMEOUT_S)}
    servers = {}
    try:
        servers["a"] = Uvicorn(dict(os.environ, **env))
        servers["b"] = Fronted(cfg.bin, so_dir, "lagless-proxy.conf", workers, env)
        servers["c"] = Fronted(cfg.bin, so_dir, "lagless.conf", workers, env)
        return measure(cfg, servers, workers, n_call, n_probe, n_long, load_bin)
    finally:
        for s in servers.values():
            s.stop()


def measure(cfg, servers, workers, n_call, n_probe, n_long, load_bin):
    res, ways = [], ("a", "b", "c")
    probes, st = {w: [] for w in ways}, {w: [] for w in ways}
    for _ in range(4):
        for w in ways:
            st[w] += health_during_calls(cfg.client, servers[w].port, n_probe, probes[w])
    p = {}
    for w in ways:
        v = sorted(probes[w])
        p[w] = (percentile(v, 50) / 1e6, percentile(v, 99) / 1e6, len(v))
        log("   a. (%s) /health with 4 CPU calls sent: p50 %.2f ms, p99 %.2f ms (%d probes; "
            "the calls: %s)" % (w, p[w][0], p[w][1], p[w][2], ", ".join(
                "%d x %d" % (st[w].count(s), s) for s in sorted(set(st[w])))))
    res.append(Result("14a. /health p99, (c) / (a)", p["c"][1] / p["a"][1], 0.5, figures={
        w: {"p50_ms": p[w][0], "p99_ms": p[w][1], "probes": p[w][2]} for w in ways}))
    res.append(Result("14a. /health p99, (b) / (a)", p["b"][1] / p["a"][1], 1.0, gated=False))
    thr = {w: [] for w in ways}
    for _ in range(2):
        for w in ways:
            thr[w].append(saturation(servers[w].port, workers + 1, 2, n_call))
    thr = {w: sum(v) / len(v) for w, v in thr.items()}
    cap = max(thr.values())
    log("   b. saturation (%d clients): (a) %.2f/s, (b) %.2f/s, (c) %.2f/s; W / t_call %.2f/s"
        % (workers + 1, thr["a"], thr["b"], thr["c"], workers / t_call(n_call)))
    res.append(Result("14b. heavy calls/s, (c) / (a)", thr["c"] / thr["a"], 0.9, kind="min",
                      gated=False, figures={"per_s": thr}))
    over = {}
    for w in ways:
        before = max_pending(servers[w].port)
        heavy, cheap = overload(load_bin, servers[w].port, 3 * cap, cap, w != "a")
        after = max_pending(servers[w].port)
        over[w] = {"heavy": heavy["all"], "cheap": cheap["all"], "executor_max_queue": after,
                   "executor_max_queue_before": before,
                   "statuses": {s["status"]: s["count"] for s in heavy["statuses"]},
                   "share_503": heavy.get("share_503"),
                   "p99_503_ms": status_stats(heavy, "503")["p99_ms"]}
        log("   c. (%s) 3 x %.2f/s for 10 s: heavy p99 %.0f ms, statuses %s, 503 share %s "
            "(503 p99 %s ms), the executor's longest queue %d; /health p99 %.2f ms" % (
                w, cap, heavy["all"]["p99_ms"], over[w]["statuses"], over[w]["share_503"],
                over[w]["p99_503_ms"], after, cheap["all"]["p99_ms"]))
    res.append(Result("14c. overload heavy p99, (c) / (a)", over["c"]["heavy"]["p99_ms"] /
                      max(over["a"]["heavy"]["p99_ms"], 1e-3), float("inf"), gated=False,
                      figures=over))
    left = {}
    pids = {"a": lambda: list(children_of(servers["a"].app_pid())),
            "b": lambda: list(children_of(servers["b"].app_pid())),
            "c": servers["c"].compute_pids}
    for w in ways:
        quiet(pids[w])
        status, took, after = timed_out_call(servers[w].port, pids[w], n_long)
        left[w] = after
        log("   d. (%s) a call of %.1f s with a %.1f s timeout: %d after %.2f s; the process "
            "computed on for %.2f s after it" % (w, t_call(n_long, 1), TIMEOUT_S, status, took,
                                                after))
    res.append(Result("14d. CPU after a timed-out call's answer, (c) / (a)", left["c"] /
                      max(left["a"], TICK_S), 0.1, figures={"seconds": left}))
    return res
