"""Regression: lagless-load with a very low rate.

* `--rate /ping=1e-300` put request 1 at +inf ns; converting that to uint64_t is undefined and
  gave 0 on x86, so every further request was due at the start and the generator issued them
  without end (it never finished, its memory grew).
* `--rate /ping=0.1 -d 0.5`: the schedule's timer was armed for the next due time (10 s away)
  instead of the end of the phase, so a 0.5 s run lasted 10 s (at most until the stop timer,
  duration + --timeout + 1 s).

Both runs must end about when their duration says, with the one request due at the start."""
import json
import os
import subprocess
import time

import pytest

from conftest import REPO_ROOT

LOAD_BIN = os.environ.get("LAGLESS_LOAD_BIN") or os.path.join(REPO_ROOT, "build", "lagless-load")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rate", ["1e-300", "0.1"])
def test_low_rate_run_ends_on_time(start_server, rate):
    if not os.access(LOAD_BIN, os.X_OK):
        pytest.skip("lagless-load missing (run make)")
    srv = start_server("--compute-workers", "1")
    t0 = time.monotonic()
    p = subprocess.run([LOAD_BIN, "--rate", "/ping=" + rate, "-d", "0.5", "--idle", "0",
                        "--no-scrape", "-q", "--json", "-", "http://127.0.0.1:%d" % srv.port],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=8)
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    # 0.5 s of run; the old code needed 10 s (0.1/s) or never ended (1e-300/s)
    assert took < 5, took
    report = json.loads(p.stdout)
    (route,) = report["routes"]
    assert route["issued"] == 1, route
