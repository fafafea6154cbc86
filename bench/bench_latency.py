"""Benchmarks 1 and 2: a cheap request stays cheap, and a refusal is fast, with the pool
saturated (every compute process busy and the queue full).

One server, several rounds; each round measures idle first, then saturates the pool and
measures again, so that a burst of noise from other work on the machine lands on both sides
instead of on one. Latency is measured by the C client (bench/latency.c), one request in flight
at a time; the load comes from Python threads that spend their time blocked on a socket (a
handful of requests a second), so the measuring side is not fighting the load generator.
"""

import http.client
import json
import os
import socket
import threading
import time

from common import (Result, Stats, cpu_ticks, http_get, log, run_client)

HEAVY_SECONDS = 0.1  # length of one background job; C+Q of them are always in flight
CLK_TCK = float(os.sysconf("SC_CLK_TCK"))


class Load:
    """n threads, each keeping one /heavy job in flight on its own keep-alive connection, with
    the next request already pipelined behind it: the loop worker parses that request and
    claims the freed slot in the same callback that answers the finished job, so the pool never
    has a free slot waiting for a Python thread to wake up (a probe could steal it, and the
    thread would then spin on 503s). A 503 (which closes the connection) is retried after
    1 ms, so a slot a probe took is taken back soon after that probe's job ends. Bounded:
    socket timeouts, and stop() joins the threads."""

    def __init__(self, port, n, iterations, job_timeout):
        self.port, self.job_timeout = port, job_timeout
        self.req = ("GET /heavy?iterations=%d HTTP/1.1\r\nHost: bench\r\n\r\n"
                    % iterations).encode()
        self.stopping = threading.Event()
        self.counts = {"ok": 0, "refused": 0, "other": 0, "error": 0}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(n)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def _count(self, key):
        with self.lock:
            self.counts[key] += 1

    def _run(self):
        while not self.stopping.is_set():
            try:
                status = self._connection()
            except (OSError, ValueError):
                status = None
            if status is None:
                self._count("error")
            if not self.stopping.is_set():
                self.stopping.wait(0.001 if status == 503 else 0.05)

    def _connection(self):
        """Runs one connection until it closes; returns the last status (None: error)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=self.job_timeout) as s:
            s.sendall(self.req + self.req)
            buf = b""
            while not self.stopping.is_set():
                status, close, buf = read_one(s, buf)
                self._count({200: "ok", 503: "refused"}.get(status, "other"))
                if close:
                    return status
                s.sendall(self.req)
            return 200

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(self.job_timeout + 5)
        return dict(self.counts)


def read_one(s, buf):
    """Reads one response (Content-Length body) from s after the bytes in buf. Returns
    (status, connection closes, bytes left over); raises ValueError / OSError on failure."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ValueError("connection closed mid-response")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hdr = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    n = int(hdr.get("content-length", "0"))
    while len(rest) < n:
        chunk = s.recv(65536)
        if not chunk:
            raise ValueError("connection closed mid-body")
        rest += chunk
    return int(lines[0].split()[1]), hdr.get("connection", "").lower() == "close", rest[n:]


def slots(port):
    doc = json.loads(http_get(port, "/health", timeout=5)[2])
    return doc["slots"]


def wait_slots(port, pred, timeout):
    """Polls /health (answered by the loop, never the pool) until pred(slots); bounded."""
    end = time.monotonic() + timeout
    s = slots(port)
    while not pred(s) and time.monotonic() < end:
        time.sleep(0.02)
        s = slots(port)
    return pred(s), s


def calibrate(port):
    """Iterations of /heavy that run about HEAVY_SECONDS here (fastest of two runs)."""
    n, best = 20_000_000, 0.0
    for _ in range(2):
        status, _, body = http_get(port, "/heavy?iterations=%d" % n, timeout=30)
        if status != 200:
            raise RuntimeError("calibration /heavy answered %d" % status)
        run_s = max(float(json.loads(body)["run_ms"]) / 1000.0, 1e-3)
        best = max(best, n / run_s)
    return int(best * HEAVY_SECONDS)


def measure_loaded(srv, client, cfg, iterations, nslots, acc):
    """Saturates the pool, measures loaded /ping and 503 probes, then lets the pool drain."""
    port = srv.port
    load = Load(port, nslots, iterations, job_timeout=60).start()
    full, s = wait_slots(port, lambda x: x["free"] == 0 and x["queued"] > 0, 10)
    if not full:
        load.stop()
        raise RuntimeError("the pool never filled up: %r" % s)
    computes = srv.role_pids("lagless-compute")
    t0, ticks0 = time.monotonic(), sum(cpu_ticks(p) for p in computes)
    acc["loaded"] += run_client(client, port, "/ping", cfg.pings, cfg.max_seconds,
                                 interval_us=cfg.interval_us)
    acc["probe"] += run_client(client, port, "/heavy?iterations=1", cfg.probes,
                               cfg.max_seconds, fresh=True, interval_us=cfg.interval_us)
    wall = time.monotonic() - t0
    acc["busy"].append((sum(cpu_ticks(p) for p in computes) - ticks0) / CLK_TCK /
                       (wall * max(1, len(computes))))
    counts = load.stop()
    for k, v in counts.items():
        acc["load"][k] = acc["load"].get(k, 0) + v
    wait_slots(port, lambda x: x["free"] == x["total"], 10)


def run(srv, client, sz, cfg):
    """Returns [Result 1, Result 2]. srv: a started Lagless with default sizing."""
    L, C, Q = sz["loop_workers"], sz["compute_workers"], sz["queue_capacity"]
    iterations = calibrate(srv.port)
    log("   sizing: budget=%s L=%d C=%d Q=%d; background load: %d threads keep C+Q=%d "
        "/heavy jobs of %d iterations (~%.0f ms each) in flight"
        % (sz["budget"], L, C, Q, C + Q, C + Q, iterations, HEAVY_SECONDS * 1000))
    log("   per round: %d sequential keep-alive GET /ping idle and loaded, %d fresh-connection "
        "GET /ping idle, %d fresh-connection GET /heavy probes while saturated; one request "
        "every %d µs; %d rounds" % (cfg.pings, cfg.probes, cfg.probes, cfg.interval_us,
                                    cfg.rounds))
    run_client(client, srv.port, "/ping", 500, cfg.max_seconds)  # warm-up
    acc = {"idle": [], "idle_fresh": [], "loaded": [], "probe": [], "busy": [], "load": {}}
    per_round = []
    for r in range(cfg.rounds):
        n0, m0 = len(acc["idle"]), len(acc["loaded"])
        acc["idle"] += run_client(client, srv.port, "/ping", cfg.pings, cfg.max_seconds,
                                  interval_us=cfg.interval_us)
        acc["idle_fresh"] += run_client(client, srv.port, "/ping", cfg.probes,
                                        cfg.max_seconds, fresh=True, interval_us=cfg.interval_us)
        measure_loaded(srv, client, cfg, iterations, C + Q, acc)
        per_round.append((Stats(ns for _, ns in acc["idle"][n0:]).p99,
                          Stats(ns for _, ns in acc["loaded"][m0:]).p99))
    return report(acc, per_round, cfg)


def _ok(samples, status):
    return [ns for st, ns in samples if st == status]


def report(acc, per_round, cfg):
    idle, loaded = Stats(_ok(acc["idle"], 200)), Stats(_ok(acc["loaded"], 200))
    idle_fresh, refused = Stats(_ok(acc["idle_fresh"], 200)), Stats(_ok(acc["probe"], 503))
    failed = sum(1 for k in ("idle", "loaded", "idle_fresh") for st, _ in acc[k] if st != 200)
    admitted = sum(1 for st, _ in acc["probe"] if st != 503)
    busy = min(acc["busy"]) if acc["busy"] else 0.0
    log("   idle   /ping keep-alive : %s" % idle.line())
    log("   loaded /ping keep-alive : %s" % loaded.line())
    log("   p99 per round (idle -> loaded, µs): %s"
        % ", ".join("%.1f -> %.1f" % pr for pr in per_round))
    log("   saturation: compute CPU busy >= %.0f%% of wall time in every loaded phase; "
        "load threads got %r; non-200 /ping answers: %d" % (100 * busy, acc["load"], failed))
    r1 = Result("1. /ping p99 loaded / idle", loaded.p99 / idle.p99, 2.0,
                figures={"idle": idle.as_dict(), "loaded": loaded.as_dict(),
                         "compute_busy_min": busy, "load": acc["load"],
                         "p99_per_round": per_round, "non_200": failed})
    log("   " + r1.line())
    log("")
    log("== 2. refusal is fast: 503 latency with the pool saturated vs idle /ping")
    log("   idle /ping, fresh connection : %s" % idle_fresh.line())
    log("   503 probes, fresh connection : %s (%d of %d probes found a free slot and were "
        "admitted; excluded)" % (refused.line(), admitted, len(acc["probe"])))
    r2 = Result("2. 503 p99 / idle /ping p99 (keep-alive)", refused.p99 / idle.p99, 2.0,
                figures={"refused": refused.as_dict(), "idle": idle.as_dict(),
                         "idle_fresh": idle_fresh.as_dict(), "admitted": admitted})
    r2b = Result("2b. 503 p99 / fresh-connection /ping p99", refused.p99 / idle_fresh.p99,
                 2.0, gated=False)
    log("   " + r2.line())
    log("   " + r2b.line())
    return [r1, r2, r2b]
