"""Regressions of start-up and sizing checks that said nothing (issue 18, section 5):
* a queue-wait target far below the jobs' run time (5 ms against 140 ms jobs) refused a third
  of the jobs at 0.8x capacity, and neither -t nor the log said how the target relates to the
  run time;
* a CPU quota of 0.5 gave a budget of 1 with no warning (sizing's log line, --print-sizing);
* an RLIMIT_FSIZE below the arena's size killed the server at start with SIGXFSZ, no message;
* a module refused at start exited 2 with a usage hint, where lagless(8) says 1."""
import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import HARNESS_VARS, LAGLESS_BIN, get, heavy_iterations_for, wait_until

REPO = Path(__file__).resolve().parents[2]
MODS = os.environ.get("LAGLESS_TEST_MODULES", "")


def run(*args, env=None, preexec_fn=None):
    e = {k: v for k, v in os.environ.items() if k not in HARNESS_VARS}
    e.update(env or {})
    return subprocess.run([LAGLESS_BIN, *args], capture_output=True, text=True, timeout=30,
                          env=e, preexec_fn=preexec_fn)


@pytest.mark.timeout(30)
def test_t_says_how_the_target_relates_to_run_time():
    r = run("-t", "--queue-wait-target-ms", "5")
    assert r.returncode == 0, r.stderr
    assert "queue_wait_target_ms 5" in r.stderr and "at least the run time" in r.stderr, \
        r.stderr
    assert "queue_wait_target_ms" not in run("-t").stderr


@pytest.mark.timeout(90)
def test_target_far_below_run_time_is_warned_once(start_server):
    srv = start_server("--queue-wait-target-ms", "5", "--compute-workers", "1")
    url = "/heavy?iterations=%d" % heavy_iterations_for(srv.port, 0.05)
    for _ in range(3):
        assert get(srv.port, url, timeout=30).status in (200, 503)
    assert wait_until(lambda: "far over the queue-wait target" in srv.log(), 10), \
        srv.log()[-2000:]
    assert srv.log().count("far over the queue-wait target") == 1


def quota_root(tmp_path, quota):
    root = tmp_path / "root"
    shutil.copytree(REPO / "tests" / "fixtures" / "sizing" / "v2_quota_1.5", root)
    (root / "sys/fs/cgroup/system.slice/lagless.service/cpu.max").write_text(
        "%d 100000\n" % int(quota * 100000))
    return root


@pytest.mark.timeout(60)
def test_quota_under_one_cpu_is_warned(start_server, tmp_path):
    import json
    r = run("--print-sizing", env={"LAGLESS_SYSROOT": str(quota_root(tmp_path, 0.5))})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["budget"] == 1 and doc["quota"] == 0.5, doc
    assert "under one" in doc.get("note", ""), doc
    assert "warning" in r.stderr and "CPU quota is 0.5 CPU" in r.stderr, r.stderr
    r = run("--print-sizing", env={"LAGLESS_SYSROOT": str(quota_root(tmp_path / "b", 1.5))})
    assert "note" not in json.loads(r.stdout) and r.stderr == "", r.stderr
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_VARS}
    env["LAGLESS_SYSROOT"] = str(quota_root(tmp_path / "c", 0.5))
    srv = start_server("--live-resize=no", env=env)
    line = [s for s in srv.log().splitlines() if " warn " in s and "CPU quota" in s]
    assert len(line) == 1 and "under one" in line[0], srv.log()[-2000:]


def low_fsize():
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("test", [False, True])
def test_low_file_size_limit_is_named(test):
    r = run(*(["-t"] if test else ["--listen", "127.0.0.1:0"]), preexec_fn=low_fsize)
    assert r.returncode == 1, (r.returncode, r.stderr)     # not killed by SIGXFSZ (-25)
    assert "RLIMIT_FSIZE" in r.stderr and "ulimit -f" in r.stderr, r.stderr


@pytest.mark.skipif(not os.path.exists(os.path.join(MODS, "badabi.so")),
                    reason="test modules not built (make integration builds them)")
@pytest.mark.timeout(30)
def test_module_refused_at_start_exits_1_without_usage_hint(tmp_path):
    conf = tmp_path / "lagless.conf"
    conf.write_text("[module badabi]\npath = %s\n" % os.path.join(MODS, "badabi.so"))
    r = run("-c", str(conf), "--listen", "127.0.0.1:0")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "module compiled with module ABI 2.0" in r.stderr and "--help" not in r.stderr, \
        r.stderr
    r = run("--queue", "x")                                  # a wrong flag is still a usage error
    assert r.returncode == 2 and "try 'lagless --help'" in r.stderr, r.stderr
