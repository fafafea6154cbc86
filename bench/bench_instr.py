"""Benchmark 6c's gate: instructions per keep-alive GET /ping in the loop worker, counted by
callgrind (valgrind's instruction counter), which a noisy machine does not change.

One loop worker and one compute process run under `valgrind --tool=callgrind
--instr-atstart=no`; once the server answers, counting is switched on in the loop worker alone
(`callgrind_control -i on PID`), `wrk -t1 -c64 -d3s` sends keep-alive /pings, and the loop's
total instructions (the `totals:` line of its output file, written at its exit) divided by
wrk's request count is the figure. Connection set-up and the 100 ms timers are spread over the
run's requests, so the figure holds within about 1 % between runs.

The gate is the figure against PING_INSTR_BASELINE, the count measured on the commit that set
it: it must not rise by more than PING_INSTR_SLACK (issue 34: "instructions per keep-alive
/ping not rising"). Lower the baseline when a change lowers the count; raising it needs a
reason in docs/BENCHMARKS.md.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile

from common import Lagless, Result, log, wait_for

PING_INSTR_BASELINE = 2408   # callgrind, wrk -t1 -c64 -d3s, one loop worker (docs/BENCHMARKS.md)
PING_INSTR_SLACK = 1.03      # the figure may move this much between runs without a change
WRK_SECONDS = 3
LOOP_STARTED_RE = re.compile(r"loop\[\d+\] pid=(\d+) lg_loop_main: started")


def instructions_per_ping(binary):
    """(instructions per request, requests) of the loop worker under callgrind."""
    out = tempfile.mkdtemp(prefix="callgrind-")
    wrapper = ["valgrind", "--tool=callgrind", "--trace-children=yes", "--instr-atstart=no",
               "--callgrind-out-file=%s/cg.%%p" % out]
    srv = Lagless(binary, ["--loop-workers", "1", "--compute-workers", "1"],
                  start_timeout=120.0, wrapper=wrapper)
    try:
        m = wait_for(lambda: LOOP_STARTED_RE.search(srv.log()), 60.0)
        if not m:
            raise RuntimeError("no loop worker started: %s" % srv.log()[-1000:])
        loop = int(m.group(1))
        subprocess.run(["callgrind_control", "-i", "on", str(loop)], check=True,
                       capture_output=True, timeout=60)
        res = subprocess.run(["wrk", "-t1", "-c64", "-d%ds" % WRK_SECONDS,
                              "http://127.0.0.1:%d/ping" % srv.port],
                             capture_output=True, text=True, timeout=WRK_SECONDS + 60)
        total = re.search(r"(\d+) requests in", res.stdout)
        if res.returncode != 0 or not total or "Non-2xx" in res.stdout:
            raise RuntimeError("wrk failed: %s %s" % (res.stdout, res.stderr))
        requests = int(total.group(1))
    finally:
        srv.stop()
    path = os.path.join(out, "cg.%d" % loop)
    try:
        with open(path) as f:
            totals = re.search(r"^totals:\s+(\d+)", f.read(), re.M)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if not totals:
        raise RuntimeError("no totals line in the loop's callgrind output")
    return int(totals.group(1)) / requests, requests


def run(cfg):
    log("== 6c'. instructions per keep-alive /ping in the loop worker (callgrind)")
    if shutil.which("valgrind") is None or shutil.which("wrk") is None:
        return [Result("6c. instructions per /ping / baseline", skipped="valgrind or wrk missing")]
    try:
        per, n = instructions_per_ping(cfg.bin)
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        return [Result("6c. instructions per /ping / baseline", skipped=str(e)[:120])]
    log("   %.0f instructions per /ping over %d requests (baseline %d)"
        % (per, n, PING_INSTR_BASELINE))
    r = Result("6c. instructions per /ping / baseline", per / PING_INSTR_BASELINE,
               PING_INSTR_SLACK, figures={"instructions": per, "requests": n,
                                          "baseline": PING_INSTR_BASELINE})
    log("   " + r.line())
    return [r]
