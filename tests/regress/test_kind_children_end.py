"""Regression: a child process a kind forked outlived the stopped server, holding the arena and
the channels. Compute processes are subreapers (prctl PR_SET_CHILD_SUBREAPER) leading their own
process group: a kind's orphaned descendants stay theirs (and are reaped), and every descendant
ends with the compute process (tests/modules/forker.c)."""
import os
import threading

import pytest

from conftest import children_of, get, pid_alive, proc_stat, wait_until

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")
pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(MODS, "forker.so")),
                                reason="test modules not built (make integration builds them)")


def conf(tmp_path):
    p = tmp_path / "lagless.conf"
    p.write_text("[module forker]\npath = %s\n\n"
                 "[route /spawn]\nmethods = GET\nkind = forker.spawn\n\n"
                 "[route /spawn-loop]\nmethods = GET\nkind = forker.spawn\nwhere = loop\n\n"
                 "[route /orphan]\nmethods = GET\nkind = forker.orphan\n\n"
                 "[route /spin]\nmethods = GET\nkind = forker.spawn_spin\ndeadline_ms = 1500\n"
                 % os.path.join(MODS, "forker.so"))
    return str(p)


def kill_left(pids):
    for pid, start in pids:
        if pid_alive(pid, start):
            os.kill(pid, 9)


@pytest.mark.timeout(60)
def test_descendants_end_with_the_server(start_server, tmp_path):
    srv = start_server("-c", conf(tmp_path), "--compute-workers", "1", "--kill-grace-ms", "100")
    left = []
    try:
        compute = srv.wait_children("compute", 1)[0]
        child = int(get(srv.port, "/spawn").body)
        left.append((child, proc_stat(child)[3]))
        grandchild = int(get(srv.port, "/orphan").body)
        left.append((grandchild, proc_stat(grandchild)[3]))
        loop_child = int(get(srv.port, "/spawn-loop").body)          # forked by a loop worker
        left.append((loop_child, proc_stat(loop_child)[3]))
        # the orphaned grandchild is the compute process's now, not init's
        assert wait_until(lambda: proc_stat(grandchild)[2] == compute, 5), proc_stat(grandchild)
        assert pid_alive(child) and pid_alive(grandchild) and pid_alive(loop_child)
        assert srv.stop() == 0
        assert wait_until(lambda: not any(pid_alive(p) for p in (child, grandchild, loop_child)),
                          10), (proc_stat(child), proc_stat(grandchild), proc_stat(loop_child))
    finally:
        kill_left(left)


@pytest.mark.timeout(60)
def test_descendants_end_with_a_killed_compute_process(start_server, tmp_path):
    srv = start_server("-c", conf(tmp_path), "--compute-workers", "1", "--kill-grace-ms", "100")
    left = []
    try:
        compute = srv.wait_children("compute", 1)[0]
        res = {}
        t = threading.Thread(target=lambda: res.setdefault("r", get(srv.port, "/spin",
                                                                       timeout=20)))
        t.start()
        assert wait_until(lambda: children_of(compute), 10)
        kids = [(pid, start) for pid, _, _, start in children_of(compute)]
        left.extend(kids)
        t.join(30)
        assert res["r"].status == 504, res
        assert wait_until(lambda: not any(pid_alive(p, s) for p, s in kids), 10), kids
        assert get(srv.port, "/spawn").status == 200       # the replacement serves
    finally:
        kill_left(left)
