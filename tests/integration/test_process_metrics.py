"""process_* metrics, as every Prometheus client library exports them, for each process of
the server labelled by role and index."""
import re
import socket

import pytest

from conftest import get, heavy_iterations_for, wait_until


def samples(port):
    out = {}
    for m in re.finditer(r'^(process_\w+)\{role="(\w+)",index="(\d+)"\} (\S+)$',
                         get(port, "/metrics").body.decode(), re.M):
        out[(m.group(1), m.group(2), int(m.group(3)))] = float(m.group(4))
    return out


@pytest.mark.timeout(90)
def test_process_metrics_per_role(start_server):
    srv = start_server("--loop-workers", "2", "--compute-workers", "1")
    s = samples(srv.port)
    for role, index in (("master", 0), ("loop", 0), ("loop", 1), ("compute", 0)):
        for name in ("process_cpu_seconds_total", "process_resident_memory_bytes",
                     "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                     "process_start_time_seconds", "process_threads"):
            assert (name, role, index) in s, (name, role, index)
        assert s[("process_resident_memory_bytes", role, index)] > 100 * 1024
        assert 0 < s[("process_open_fds", role, index)] <= s[("process_max_fds", role, index)]
    # the compute process's CPU time counts the job it ran
    before = s[("process_cpu_seconds_total", "compute", 0)]
    n = heavy_iterations_for(srv.port, 0.5)
    assert get(srv.port, "/heavy?iterations=%d" % n, timeout=60).status == 200
    assert wait_until(lambda: samples(srv.port)[("process_cpu_seconds_total", "compute", 0)]
                      >= before + 0.2, 5)
    # open connections are descriptors of the loop workers (a margin of 5 below the 20: the
    # baseline may count connections of the earlier requests that the loops had not yet seen
    # close, and that close while the 20 are opened)
    fds = sum(v for (n_, r, _), v in samples(srv.port).items()
              if n_ == "process_open_fds" and r == "loop")
    socks = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(20)]
    try:
        assert wait_until(lambda: sum(v for (n_, r, _), v in samples(srv.port).items()
                                      if n_ == "process_open_fds" and r == "loop")
                          >= fds + 15, 15)
    finally:
        for x in socks:
            x.close()
