"""Benchmark 11: the lagless-load scenarios (load/scenarios/*.scn) against lagless. Each file
is a documented experiment with its expected verdicts; lagless is started with the file's
`server` line (paths relative to the file), lagless-load runs the scenario, and the figure is
the share of its expectations met (informational: the verdicts of a shared machine vary, and
each scenario's own report says why one was not met).
"""

import glob
import json
import os
import shlex
import subprocess

from common import Lagless, Result, log

SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "load", "scenarios")


def server_args(path):
    """The `server ARGS` line of a scenario, with its file arguments made absolute."""
    for line in open(path):
        words = shlex.split(line, comments=True)
        if words and words[0] == "server":
            here = os.path.dirname(os.path.abspath(path))
            return [os.path.join(here, w) if w.endswith(".conf") else w for w in words[1:]]
    return []


def run(cfg, sz):
    log("== 10. lagless-load scenarios (load/scenarios/): expected verdicts met")
    load_bin = cfg.load or os.path.join(os.path.dirname(cfg.bin), "lagless-load")
    if not os.access(load_bin, os.X_OK):
        return [Result("11. scenarios", skipped="no lagless-load at %s" % load_bin)]
    results = []
    for path in sorted(glob.glob(os.path.join(SCENARIOS, "*.scn"))):
        name = os.path.basename(path)
        srv = Lagless(cfg.bin, server_args(path))
        try:
            p = subprocess.run([load_bin, "--scenario", path, "--json", "-", "-q",
                                "http://127.0.0.1:%d" % srv.port], capture_output=True,
                               text=True, timeout=180)
        finally:
            srv.stop()
        try:
            exp = json.loads(p.stdout)["scenario"]["expectations"]
        except (ValueError, KeyError):
            results.append(Result("11. " + name, skipped="lagless-load: %s" % p.stderr[-200:]))
            continue
        met = sum(1 for e in exp if e["met"])
        for e in exp:
            log("   %s: %s expected %s, got %s%s" % (name, e["verdict"], e["expected"], e["got"],
                                                   "" if e["met"] else "  NOT MET"))
        results.append(Result("11. %s expectations met" % name, met / max(1, len(exp)), 1.0,
                              kind="min", gated=False, figures={"expectations": exp}))
    return results
