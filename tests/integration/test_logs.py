"""--error-log and log rotation: SIGUSR1 makes the master and every child reopen the file."""
import os
import signal
import time

import pytest

from conftest import get, wait_until


@pytest.mark.timeout(60)
def test_sigusr1_reopens_error_log_in_every_process(start_server, tmp_path):
    log = tmp_path / "lagless.log"
    srv = start_server("--error-log", str(log), "--loop-workers", "2", "--compute-workers", "1",
                       log_path=str(log))
    assert "listening on" in log.read_text()
    assert get(srv.port, "/ping").status == 200
    rotated = tmp_path / "lagless.log.1"
    os.rename(log, rotated)
    os.kill(srv.pid, signal.SIGUSR1)
    assert wait_until(lambda: log.exists() and "log file reopened" in log.read_text(), 5)
    time.sleep(0.2)  # children handle their SIGUSR1
    assert srv.stop(signal.SIGTERM) == 0
    new, old = log.read_text(), rotated.read_text()
    # Loop workers log their drain after the rotation: it must land in the new file only.
    assert new.count("loop[") >= 2 and "draining" in new, new
    assert "draining" not in old
    assert "started" in old  # the children's start lines went to the first file


@pytest.mark.timeout(30)
def test_unwritable_error_log_fails_at_start(tmp_path):
    import subprocess
    from conftest import LAGLESS_BIN
    r = subprocess.run([LAGLESS_BIN, "--error-log", str(tmp_path / "no" / "such" / "dir.log"),
                        "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 1 and "error log" in r.stderr
