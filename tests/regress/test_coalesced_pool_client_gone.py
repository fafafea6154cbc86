"""Regression (hostile trial): a [pool] section's on_client_gone = finish was ignored when the
job was a coalesced one: the last waiter leaving cancelled it with the server-wide setting
(--on-client-gone, kill by default since issue 39), so the pool's compute process was killed
and replaced ("asking the master to kill", restarts{reason="client_gone"}) although its pool
says finish; an uncoalesced job of the same pool was left to finish. The flight now keeps its
job's pool, and the pool's setting decides, as for a job without waiters."""
import re
import socket
import time

import pytest

from conftest import connect, get, heavy_iterations_for, wait_until

CONF = """
[pool keep]
compute = 1
oversubscribe = yes
on_client_gone = finish
routes = /heavy
"""


def health(port):
    return get(port, "/health", timeout=5).json()


@pytest.mark.timeout(90)
def test_pool_finish_keeps_a_coalesced_job_whose_waiters_left(start_server, tmp_path):
    conf = tmp_path / "pools.conf"
    conf.write_text(CONF)
    srv = start_server("-c", str(conf), "--compute-workers", "1", "--deadline-ms", "60000",
                       "--coalesce", "/heavy ttl=60000")
    n = heavy_iterations_for(srv.port, 1.5)
    old = srv.children("compute")
    s = connect(srv.port, timeout=10)
    s.sendall(b"GET /heavy?iterations=%d HTTP/1.1\r\nHost: t\r\n\r\n" % n)
    time.sleep(0.5)  # the job runs
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()
    assert wait_until(lambda: "every waiter of a coalesced job left" in srv.log(), 5), srv.log()
    time.sleep(1.0)
    assert "asking the master to kill" not in srv.log() and "killing compute" not in srv.log(), \
        srv.log()
    assert sorted(srv.children("compute")) == sorted(old), (old, srv.children("compute"))
