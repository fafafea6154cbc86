"""Regression: descriptors inherited by the master (an open file of the shell or supervisor that
started it) leaked into every loop worker and compute process, holding that file open for the
server's lifetime. The master now closes every inherited descriptor but 0, 1, 2 and the sockets
systemd passes.
"""
import os

import pytest

from conftest import get, wait_until


def fd_targets(pid):
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:  # closed meanwhile
            pass
    return out


@pytest.mark.timeout(30)
def test_inherited_fd_reaches_no_worker(start_server, tmp_path):
    marker = tmp_path / "inherited-marker"
    fd = os.open(str(marker), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        srv = start_server("--loop-workers", "1", "--compute-workers", "1", pass_fds=(fd,))
    finally:
        os.close(fd)
    loops = srv.wait_children("loop", 1)
    computes = srv.wait_children("compute", 1)
    # The pids /status names (as an operator would look them up), and the master's.
    procs = get(srv.port, "/status").json()["processes"]
    pids = {p["pid"] for p in procs if p["pid"] > 0}
    assert any(p["role"] == "loop" and p["pid"] in loops for p in procs), procs
    for pid in pids | set(computes) | {srv.pid}:
        assert str(marker) not in fd_targets(pid), (pid, fd_targets(pid))
