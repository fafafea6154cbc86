"""Container behaviour without a container engine: the real binary as PID 1 of a new PID
namespace (unshare), inside a real cgroup with a CPU quota of 1.5 where the machine allows it,
with a 64 KiB /dev/shm (the arena is a memfd, so it must not care)."""
import os
import re
import shutil
import signal
import subprocess
import uuid

import pytest

from conftest import LAGLESS_BIN, children_of, get, request, wait_until
from test_sizing_cgroup import _rmdir_retry, _set_quota, _writable_parent

SCRIPT = r'''
set -e
if [ -n "$1" ]; then echo $$ > "$1/cgroup.procs"; fi
mount -t tmpfs -o size=64k tmpfs /dev/shm
exec "$2" --listen 127.0.0.1:0 --drain-timeout-ms 5000
'''


def _unshare_works():
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount", "--mount-proc", "true"],
                       capture_output=True, text=True, timeout=10)
    return None if r.returncode == 0 else "unshare is not permitted here: %s" % r.stderr.strip()


@pytest.fixture
def cgroup_dir():
    version, parent = _writable_parent()
    if version is None:
        yield None, parent  # run without a quota; the reason is reported by the test
        return
    d = parent / ("lagless-ct-%d-%s" % (os.getpid(), uuid.uuid4().hex[:8]))
    d.mkdir()
    try:
        _set_quota(version, d, 150000)
        yield d, None
    finally:
        _rmdir_retry(d)


def _nspid(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    return []


@pytest.mark.timeout(90)
def test_pid1_in_cgroup_with_tiny_dev_shm(tmp_path, cgroup_dir):
    why = _unshare_works()
    if why:
        pytest.skip(why)
    cg, no_cgroup_reason = cgroup_dir
    errlog = tmp_path / "stderr.log"
    with open(errlog, "wb") as err:
        proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount", "--mount-proc", "sh", "-c",
                                 SCRIPT, "sh", str(cg or ""), LAGLESS_BIN],
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    master = None
    try:
        assert wait_until(lambda: "listening on" in errlog.read_text(), 10), errlog.read_text()
        text = errlog.read_text()
        port = int(re.search(r"listening on [0-9.]+:(\d+)", text).group(1))
        assert wait_until(lambda: children_of(proc.pid), 5)
        master = children_of(proc.pid)[0][0]
        assert _nspid(master)[-1] == 1, "lagless is not PID 1 of its namespace"
        sizing = re.search(r"sizing: (\{.*\})", text).group(1)
        if cg is not None:
            assert '"quota":1.5' in sizing and '"budget":1' in sizing, sizing
        assert wait_until(lambda: _ping(port), 10)
        assert get(port, "/heavy?iterations=100000").status == 200
        body = os.urandom(256 * 1024)  # four times the size of /dev/shm
        assert request(port, "POST", "/compress", body=body).status == 200
        # A dead child is reaped by PID 1 (no zombie) and replaced.
        computes = [p for p, comm, st, _ in children_of(master) if comm == "lagless-compute"]
        os.kill(computes[0], signal.SIGKILL)
        assert wait_until(lambda: all(st != "Z" for _, _, st, _ in children_of(master)) and
                          len([1 for _, c, _, _ in children_of(master) if c == "lagless-compute"])
                          == len(computes), 5), children_of(master)
        kids = [p for p, _, _, _ in children_of(master)]
        os.kill(master, signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, errlog.read_text()
        assert not [p for p in kids if os.path.exists("/proc/%d" % p)]
    finally:
        if proc.poll() is None:
            if master:
                os.kill(master, signal.SIGKILL)
            proc.kill()
            proc.wait(timeout=10)
    if no_cgroup_reason:
        pytest.skip("ran as PID 1 with a tiny /dev/shm, but without a CPU quota: %s"
                    % no_cgroup_reason)


def _ping(port):
    try:
        return get(port, "/ping", timeout=2).status == 200
    except OSError:
        return False
