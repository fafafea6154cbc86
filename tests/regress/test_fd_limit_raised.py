"""Regression: the default --max-conns (10,000 per loop worker) exceeded the usual soft fd
limit of 1,024, so connections past it waited in the accept queue with no word in the log.
The master now raises the soft RLIMIT_NOFILE to the hard limit at start-up, and warns with
the numbers when the hard limit is still short (issue 10, item 5)."""
import resource

import pytest


def limits(lo, hi):
    def fn():
        resource.setrlimit(resource.RLIMIT_NOFILE, (lo, hi))
    return fn


def soft_nofile(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return None


@pytest.mark.timeout(30)
def test_soft_fd_limit_is_raised_to_the_hard_one(start_server, tmp_path):
    from conftest import Server
    hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 4096)
    srv = Server(["--max-conns", "100"], workdir=str(tmp_path), preexec_fn=limits(256, hard))
    try:
        assert soft_nofile(srv.pid) == hard, open("/proc/%d/limits" % srv.pid).read()
        for pid in srv.children("loop"):
            assert soft_nofile(pid) == hard
        assert "RLIMIT_NOFILE raised from 256 to the hard limit %d" % hard in srv.log()
    finally:
        srv.kill_all()


@pytest.mark.timeout(30)
def test_short_hard_limit_is_warned_with_numbers(tmp_path):
    from conftest import Server
    srv = Server(["--max-conns", "10000"], workdir=str(tmp_path), preexec_fn=limits(512, 512))
    try:
        assert "RLIMIT_NOFILE is 512 but --max-conns 10000 per loop worker" in srv.log(), srv.log()
    finally:
        srv.kill_all()
