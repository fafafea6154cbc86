"""Regression: at the descriptor limit (EMFILE), "pausing accept" was logged on every 100 ms
tick, ten lines a second per loop worker. It is now logged at most once per 10 s per loop
worker, with the count of the repeats it stood for (issue 10, item 5)."""
import resource
import time

import pytest

from conftest import connect, get, wait_until


@pytest.mark.timeout(60)
def test_pausing_accept_logged_rarely(tmp_path):
    from conftest import Server

    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    srv = Server(["--loop-workers", "1", "--compute-workers", "1"], workdir=str(tmp_path),
                 preexec_fn=low_nofile)
    held = []
    try:
        for _ in range(100):  # more than the loop worker can hold open
            held.append(connect(srv.port, timeout=10))
        assert wait_until(lambda: "pausing accept" in srv.log(), 10)
        # 3 s at the limit: the old code logged ~30 lines
        t_end = time.monotonic() + 3.0
        while time.monotonic() < t_end:
            time.sleep(0.2)
        assert srv.log().count("pausing accept") <= 2, srv.log()[-3000:]
        for s in held:
            s.close()
        held = []
        assert wait_until(lambda: get(srv.port, "/ping", timeout=2).status == 200, 15)
    finally:
        for s in held:
            s.close()
        srv.kill_all()
