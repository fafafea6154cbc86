"""Live resize: the master reads the CPU budget again about once a second and, after two equal
readings that differ from the budget in force, resizes the compute processes and the queue
(master/resize.c). Played against LAGLESS_SYSROOT fixture trees whose cpu.max is rewritten
while the server runs, and against a real cgroup v1 `cpu` controller where the machine allows
one (skipped with the reason elsewhere).

`--compute-workers 100%` makes the pool one compute process per CPU of the budget, so budgets 1
and 2 give different counts even on a 2-CPU machine (the default, budget - 1, gives 1 for both).
"""
import os
import re
import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import LAGLESS_BIN, Call, Server, get, heavy_iterations_for, wait_until
from test_sizing_cgroup import _rmdir_retry, _set_quota, _writable_parent, print_sizing
from test_systemd import Notify

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "sizing" / "v2_quota_1.5"
CPU_MAX = "sys/fs/cgroup/system.slice/lagless.service/cpu.max"
CHANGE_S = 10.0   # two readings a second apart, then forks 100 ms apart: "a few seconds"


def status(port):
    return get(port, "/status", timeout=5).json()


def metric(port, name):
    for line in get(port, "/metrics", timeout=5).body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("no %s in /metrics" % name)


class SteadyLoad(threading.Thread):
    """One client, one request at a time: short /heavy jobs and /ping, every answer recorded.
    It never holds more than one job slot, so no shrink may refuse it."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop_flag, self.answers = port, threading.Event(), []

    def run(self):
        while not self.stop_flag.is_set():
            for path in ("/heavy?iterations=200000", "/ping"):
                try:
                    self.answers.append((path, get(self.port, path, timeout=10).status))
                except OSError as e:
                    self.answers.append((path, repr(e)))

    def finish(self):
        self.stop_flag.set()
        self.join(20)
        assert not self.is_alive()
        failed = [a for a in self.answers if a[1] != 200]
        assert self.answers and not failed, failed[:10]
        return len(self.answers)


def follows(srv, budget, compute, queue):
    """The budget in force and the process count match: /status, /metrics and the real
    children of the master."""
    def ok():
        st = status(srv.port)
        rows = [p for p in st["processes"] if p["role"] == "compute"]
        return (st["sizing"]["budget"] == budget and st["sizing"]["compute_workers"] == compute
                and st["queue"]["capacity"] == queue and len(rows) == compute
                and len(srv.children("compute")) == compute)
    return wait_until(ok, CHANGE_S)


def fixture_root(tmp_path, quota_us):
    root = tmp_path / "sysroot"
    shutil.copytree(FIXTURE, root)
    write_cpu_max(root, quota_us)
    return root


def write_cpu_max(root, quota_us):
    # Rewritten in place, as the kernel's file is; a reader sees the old or the new line.
    (root / CPU_MAX).write_text("%d 100000\n" % quota_us)


def start(root, *args, env_extra=None):
    env = dict(os.environ, LAGLESS_SYSROOT=str(root), **(env_extra or {}))
    return Server(["--loop-workers", "1", "--max-body", "1M", "--deadline-ms", "20000"]
                  + list(args), workdir=str(root.parent), env=env)


@pytest.mark.timeout(90)
def test_fixture_quota_shrinks_and_grows_the_pool(tmp_path):
    root = fixture_root(tmp_path, 200000)
    notify = Notify(str(tmp_path / "notify.sock"))
    srv = start(root, "--compute-workers", "100%", env_extra={"NOTIFY_SOCKET": notify.path})
    try:
        assert follows(srv, 2, 2, 4), status(srv.port)
        st = status(srv.port)
        assert st["resize"]["enabled"] is True and st["resize"]["budget_changes"] == 0
        assert st["resize"]["compute_max"] == 16  # the fixture host has 16 CPUs online
        load = SteadyLoad(srv.port)
        load.start()
        # the load is answered before, between and after the changes (waited for: a loaded
        # machine may run both changes before a fixed count of answers)
        assert wait_until(lambda: len(load.answers) >= 2, 30), load.answers
        write_cpu_max(root, 100000)
        assert follows(srv, 1, 1, 2), status(srv.port)
        assert status(srv.port)["slots"]["total"] == 3
        assert notify.wait_for("budget 1 CPU"), notify.messages
        n = len(load.answers)
        assert wait_until(lambda: len(load.answers) >= n + 2, 30), load.answers
        write_cpu_max(root, 200000)
        assert follows(srv, 2, 2, 4), status(srv.port)
        assert notify.wait_for("budget 2 CPU"), notify.messages
        n = len(load.answers)
        assert wait_until(lambda: len(load.answers) >= n + 2, 30), load.answers
        assert load.finish() > 4
        st = status(srv.port)
        assert st["resize"]["budget_changes"] == 2 and st["resize"]["last_change"] is not None
        assert (st["resize"]["retired"], st["resize"]["spawned"]) == (1, 1), st["resize"]
        assert metric(srv.port, "lagless_cpu_budget") == 2
        assert metric(srv.port, "lagless_cgroup_cpu_quota") == 2
        assert metric(srv.port, "lagless_cpu_budget_changes_total") == 2
        assert metric(srv.port, 'lagless_resize_processes_total{action="shrink"}') == 1
        assert metric(srv.port, 'lagless_resize_processes_total{action="grow"}') == 1
        log = srv.log()
        assert "CPU budget changed from 2 to 1" in log and "CPU budget changed from 1 to 2" in log
        assert "retired after its job" in log
        # a retirement is not a crash: nothing was counted as a restart
        assert all(v == 0 for r in st["restarts"].values() for v in r.values()), st["restarts"]
        assert srv.stop() == 0
    finally:
        srv.kill_all()
        notify.close()


@pytest.mark.timeout(180)
def test_fixture_shrink_waits_for_running_jobs(tmp_path):
    """Both compute processes run a long job when the budget halves: neither job is killed,
    and one process leaves only once the jobs are done."""
    root = fixture_root(tmp_path, 200000)
    srv = start(root, "--compute-workers", "100%", "--deadline-ms", "120000")
    try:
        assert follows(srv, 2, 2, 4)
        url = "/heavy?iterations=%d" % heavy_iterations_for(srv.port, 4.0)
        jobs = [Call(get, srv.port, url, timeout=120) for _ in range(2)]
        for j in jobs:
            j.start()
        assert wait_until(lambda: status(srv.port)["queue"]["busy"] == 2, 5)
        write_cpu_max(root, 100000)
        assert wait_until(lambda: status(srv.port)["sizing"]["budget"] == 1, CHANGE_S)
        assert all(j.is_alive() for j in jobs), "jobs ended before the change was seen"
        assert len(srv.children("compute")) == 2 and status(srv.port)["queue"]["busy"] == 2
        assert [j.get(120).status for j in jobs] == [200, 200]
        assert follows(srv, 1, 1, 2), status(srv.port)
        assert "killing" not in srv.log()
    finally:
        srv.kill_all()


@pytest.mark.timeout(90)
def test_fixture_explicit_counts_and_switch_off_are_kept(tmp_path):
    """A count given in the configuration never moves (the budget shown still follows), and
    --live-resize=no reads nothing after start-up."""
    root = fixture_root(tmp_path, 200000)
    fixed = start(root, "--compute-workers", "2")
    off = start(root, "--compute-workers", "100%", "--live-resize=no")
    try:
        assert follows(fixed, 2, 2, 4) and follows(off, 2, 2, 4)
        assert status(off.port)["resize"]["enabled"] is False
        assert metric(off.port, "lagless_live_resize") == 0
        write_cpu_max(root, 100000)
        assert wait_until(lambda: status(fixed.port)["sizing"]["budget"] == 1, CHANGE_S)
        st = status(fixed.port)
        assert st["sizing"]["compute_workers"] == 2 and len(fixed.children("compute")) == 2
        assert st["resize"]["budget_changes"] == 1 and st["resize"]["spawned"] == 0
        assert st["resize"]["retired"] == 0
        # the switched-off server would have changed by now, give or take one reading
        assert not wait_until(lambda: status(off.port)["sizing"]["budget"] != 2, 2.5)
        assert len(off.children("compute")) == 2
    finally:
        fixed.kill_all()
        off.kill_all()


# ---- a real cgroup ----

@pytest.fixture
def cgroup_v1_cpu():
    """A new cgroup v1 `cpu` directory under our own, removed afterwards; skips with the
    reason where none can be made (the test needs a quota it can write while we run)."""
    if not LAGLESS_BIN:
        pytest.skip("LAGLESS_BIN is not set")
    version, parent = _writable_parent()
    if version is None:
        pytest.skip(parent)
    if version != "v1":
        pytest.skip("the cpu controller is on cgroup v2 here; this test drives v1 cfs_quota_us")
    base = print_sizing(LAGLESS_BIN)
    if base["budget"] < 2:
        pytest.skip("needs a budget of 2 CPUs outside the test cgroup, have %d" % base["budget"])
    d = parent / ("lagless-resize-%d-%s" % (os.getpid(), uuid.uuid4().hex[:8]))
    try:
        d.mkdir()
    except OSError as e:
        pytest.skip("cannot create a cgroup under %s: %s" % (parent, e))
    try:
        yield d
    finally:
        _rmdir_retry(d)


@pytest.mark.timeout(120)
def test_real_cgroup_quota_change(cgroup_v1_cpu, tmp_path):
    d = cgroup_v1_cpu
    _set_quota("v1", d, 200000)

    def enter():
        with open(d / "cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    srv = Server(["--loop-workers", "1", "--compute-workers", "100%", "--max-body", "1M"],
                 workdir=str(tmp_path), preexec_fn=enter)
    try:
        assert follows(srv, 2, 2, 4), status(srv.port)
        assert status(srv.port)["sizing"]["quota"] == 2
        load = SteadyLoad(srv.port)
        load.start()
        (d / "cpu.cfs_quota_us").write_text("100000")
        assert follows(srv, 1, 1, 2), status(srv.port)
        assert status(srv.port)["sizing"]["quota"] == 1
        (d / "cpu.cfs_quota_us").write_text("200000")
        assert follows(srv, 2, 2, 4), status(srv.port)
        assert load.finish() > 4
        assert metric(srv.port, "lagless_cpu_budget_changes_total") == 2
        assert re.search(r"CPU budget changed from 2 to 1 \(quota 1 from \S+cpu.cfs_quota_us",
                         srv.log()), srv.log()
        assert srv.stop() == 0
    finally:
        srv.kill_all()


@pytest.mark.timeout(90)
def test_fixture_share_pool_follows_count_pool_stays(tmp_path):
    """Per pool: a pool sized as a share of the budget follows it, one given as a count
    does not, and the default pool (a count here) keeps its processes."""
    root = fixture_root(tmp_path, 200000)
    conf = tmp_path / "pools.conf"
    conf.write_text("[pool share]\ncompute = 100%\noversubscribe = yes\n"
                    "[pool fixed]\ncompute = 1\noversubscribe = yes\n")
    srv = start(root, "-c", str(conf), "--compute-workers", "1")

    def sizes():
        st = status(srv.port)
        return {p["name"]: (p["processes"]["target"], p["processes"]["total"],
                            p["queue"]["capacity"]) for p in st["pools"]}
    try:
        assert wait_until(lambda: sizes() == {"default": (1, 1, 2), "share": (2, 2, 4),
                                              "fixed": (1, 1, 2)}, CHANGE_S), sizes()
        write_cpu_max(root, 100000)
        assert wait_until(lambda: sizes() == {"default": (1, 1, 2), "share": (1, 1, 2),
                                              "fixed": (1, 1, 2)}, CHANGE_S), sizes()
        assert len(srv.children("compute")) == 3
        assert "pool share: compute processes 2 -> 1, queue 4 -> 2" in srv.log()
        write_cpu_max(root, 200000)
        assert wait_until(lambda: sizes()["share"] == (2, 2, 4), CHANGE_S), sizes()
    finally:
        srv.kill_all()
