"""lagless as PID 1 of a PID namespace (`unshare --pid --fork --mount-proc`, the stand-in for a
container): it serves, reaps an orphan reparented to it, leaves no zombie, restores a killed
child, and exits 0 on SIGTERM sent from outside the namespace. test_container.py covers the
container set-up itself (cgroup quota, tiny /dev/shm); this file covers reaping.

Skipped with the reason when unshare/nsenter are missing or creating namespaces is not permitted."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import (LAGLESS_BIN, LISTEN_RE, children_of, get, heavy_result, pid_alive,
                      proc_stat, wait_until)


def _namespaces_usable():
    if not shutil.which("unshare") or not shutil.which("nsenter"):
        return "unshare or nsenter (util-linux) not installed"
    try:
        p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "unshare failed: %s" % e
    if p.returncode != 0:
        return "unshare --pid --fork --mount-proc not permitted here: %s" % \
            p.stderr.decode(errors="replace").strip()
    return None


def live_children(pid):
    return [(p, comm, state) for p, comm, state, _ in children_of(pid)]


@pytest.mark.timeout(60)
def test_pid1_reaps_orphans_and_exits_0_on_sigterm():
    why = _namespaces_usable()
    if why:
        pytest.skip(why)
    workdir = tempfile.mkdtemp(prefix="lagless-pid1-")
    log_path = os.path.join(workdir, "stderr.log")
    log = open(log_path, "wb")
    outer = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", LAGLESS_BIN, "--listen", "127.0.0.1:0",
         "--loop-workers", "1", "--compute-workers", "1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    seen = {}
    master = None

    def text():
        with open(log_path, "rb") as f:
            return f.read().decode(errors="replace")

    try:
        m = wait_until(lambda: LISTEN_RE.search(text()), 10)
        assert m, text()
        port = int(m.group(2))
        # the master as seen from here: the child unshare forked
        kids = wait_until(lambda: [p for p, c, s in live_children(outer.pid) if c == "lagless"], 5)
        assert len(kids) == 1, live_children(outer.pid)
        master = kids[0]
        assert re.search(r"master\[0\] pid=1 ", text()), "the master is not PID 1 inside:\n" + text()
        assert wait_until(lambda: len(live_children(master)) == 2, 5), live_children(master)
        for p, _, _ in live_children(master):
            seen[p] = proc_stat(p)[3]
        assert get(port, "/ping", timeout=5).status == 200
        r = get(port, "/heavy?iterations=1000", timeout=10)
        assert r.status == 200 and r.json()["result"] == heavy_result(1000), r

        # an orphan: a process started in the namespace whose parent exits at once is
        # reparented to PID 1, which must reap it when it exits
        subprocess.run(["nsenter", "--target", str(master), "--pid", "--",
                        "sh", "-c", "sleep 1 & exit 0"], timeout=10, check=True)
        orphan = wait_until(lambda: [p for p, c, s in live_children(master) if c == "sleep"], 2)
        assert orphan, "the orphan was not reparented to lagless: %r" % live_children(master)
        assert wait_until(lambda: not any(c == "sleep" for p, c, s in live_children(master)), 5), \
            "the orphan was not reaped: %r" % live_children(master)
        assert not [k for k in live_children(master) if k[2] == "Z"], live_children(master)

        # a killed child is reaped and replaced
        comp = [p for p, c, s in live_children(master) if c == "lagless-compute"]
        assert len(comp) == 1, live_children(master)
        os.kill(comp[0], signal.SIGKILL)
        assert wait_until(lambda: [p for p, c, s in live_children(master)
                                   if c == "lagless-compute" and p != comp[0] and s != "Z"], 5)
        for p, _, _ in live_children(master):
            st = proc_stat(p)
            if st:
                seen[p] = st[3]
        assert not [k for k in live_children(master) if k[2] == "Z"], live_children(master)

        # SIGTERM from outside the namespace reaches PID 1 (blocked + signalfd) and it exits 0
        os.kill(master, signal.SIGTERM)
        rc = outer.wait(15)
        assert rc == 0, "unshare (reporting lagless) exited %r\n%s" % (rc, text())
        assert not [p for p, s in seen.items() if pid_alive(p, s)]
    finally:
        if master is not None and pid_alive(master):
            os.kill(master, signal.SIGKILL)  # PID 1: the whole namespace dies with it
        if outer.poll() is None:
            outer.kill()
        outer.wait(5)
        log.close()
        for p, s in seen.items():
            if pid_alive(p, s):
                os.kill(p, signal.SIGKILL)
