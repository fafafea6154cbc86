"""Benchmark 5: argon2id logins per second at saturation, against what C compute processes could
do at best: C / (the `argon2` command's own time per hash with the same parameters).

The server runs its default /verify route (argon2id m=19456 KiB, t=2, p=1, OWASP's minimum).
C + Q client threads each keep one keep-alive connection busy with POST /verify of a stored
hash and the right password, so every job slot is taken all the time and the compute processes
never wait for work; each answer is checked. The reference is `argon2 SALT -id -t 2 -k 19456
-p 1 -l 32`, whose output ends with its own time for the hash ("0.027 seconds", its CPU time,
clock(3)): the median of CLI_RUNS runs. Reference and server phases alternate for ROUNDS rounds
and the medians are compared. Gated: logins/s / (C / t_cli) >= 0.9.

The reference is CPU time and the server's rate wall-clock, so on a shared machine the ratio
also falls with the CPU the compute processes do not get; the bench prints their CPU share
during each phase (/proc/<pid>/stat), and 5b (informational) their CPU time per login over
t_cli, which waiting for a CPU does not move.
"""

import os
import re
import subprocess
import threading
import time

from common import Lagless, Result, cpu_ticks, http_request, log, median

M_KIB, T, P = 19456, 2, 1
ROUNDS = 3
CLI_RUNS = 8         # reference hashes per round
PHASE_S = 4.0        # server phase per round
PASSWORD = b"correct horse battery staple"
SECONDS_RE = re.compile(rb"([0-9.]+) seconds")
ARGV = ["argon2", "benchsalt", "-id", "-t", str(T), "-k", str(M_KIB), "-p", str(P), "-l", "32"]


def cli_seconds():
    """Median of the command's own printed time per hash over CLI_RUNS runs."""
    times = []
    for _ in range(CLI_RUNS):
        out = subprocess.run(ARGV, input=PASSWORD, capture_output=True, timeout=60,
                             check=True).stdout
        m = SECONDS_RE.search(out)
        if not m:
            raise RuntimeError("no timing in argon2 output: %r" % out[-200:])
        times.append(float(m.group(1)))
    return median(times)


def saturate(port, body, clients, seconds):
    """(answers by status, elapsed s) of `clients` closed-loop keep-alive POST /verify."""
    import http.client

    stop = time.monotonic() + seconds
    counts, lock = {}, threading.Lock()
    wrong = []

    def lane():
        conn = None
        while time.monotonic() < stop:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("POST", "/verify", body=body)
            r = conn.getresponse()
            data = r.read()
            if r.status == 200 and data != b'{"match":true}\n':
                wrong.append(data)
            with lock:
                counts[r.status] = counts.get(r.status, 0) + 1
            if r.getheader("connection", "").lower() == "close":
                conn.close()
                conn = None
        if conn is not None:
            conn.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=lane, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    if wrong:
        raise RuntimeError("/verify answered %r" % wrong[0])
    return counts, time.monotonic() - t0


def run(cfg, sz):
    log("== 5. argon2id logins/s at saturation vs C / the argon2 command's time per hash")
    try:
        subprocess.run(["argon2", "-h"], capture_output=True, timeout=10)
    except FileNotFoundError:
        return [Result("5. argon2id logins/s vs argon2 command", skipped="argon2 missing")]
    c, q = sz["compute_workers"], sz["queue_capacity"]
    hz = os.sysconf("SC_CLK_TCK")
    srv = Lagless(cfg.bin)
    ours, refs, cpu, share = [], [], [], []
    try:
        status, _, stored = http_request(srv.port, "POST", "/hash", PASSWORD, timeout=60)
        if status != 200:
            raise RuntimeError("/hash answered %d" % status)
        pids = srv.role_pids("lagless-compute")
        for rnd in range(ROUNDS):
            refs.append(cli_seconds())
            ticks0 = sum(cpu_ticks(p) for p in pids)
            counts, el = saturate(srv.port, stored + PASSWORD, c + q, PHASE_S)
            cpu_s = (sum(cpu_ticks(p) for p in pids) - ticks0) / hz
            ok = counts.get(200, 0)
            ours.append(ok / el)
            cpu.append(cpu_s / max(1, ok))
            share.append(cpu_s / el / c)
            log("   round %d: argon2 %.1f ms/hash -> C / t = %.1f/s; lagless %.1f logins/s, "
                "%.1f ms compute CPU each, compute CPU share %.0f%% (answers %s)"
                % (rnd + 1, refs[-1] * 1000, c / refs[-1], ours[-1], cpu[-1] * 1000,
                   share[-1] * 100, counts))
    finally:
        srv.stop()
    rate, t_cli, per = median(ours), median(refs), median(cpu)
    log("   medians: %.1f logins/s vs C / %.1f ms = %.1f/s; compute CPU %.1f ms per login, "
        "share %.0f%%" % (rate, t_cli * 1000, c / t_cli, per * 1000, median(share) * 100))
    figures = {"logins_per_s": rate, "cli_s_per_hash": t_cli, "compute_cpu_s_per_login": per,
               "compute_cpu_share": median(share), "compute_workers": c, "clients": c + q,
               "m_kib": M_KIB, "t": T, "p": P,
               "rounds": {"lagless": ours, "cli": refs, "cpu": cpu, "share": share}}
    return [Result("5. argon2id logins/s / (C / argon2 CLI)", rate * t_cli / c, 0.9,
                   kind="min", figures=figures),
            Result("5b. compute CPU per login / CLI per hash", per / t_cli, 1.1, gated=False)]
