"""Fault injection on the real binary: a job that aborts, a job that never ends (and ignores
SIGTERM), a loop worker that blocks, clients that leave while their job waits or runs, a loop
worker killed with a finished job's completion still in its channel, and a role that keeps
dying. The /test/* routes exist only with --enable-test-jobs."""

import json
import os
import re
import signal
import socket
import time

import pytest

from conftest import (Call, connect, get, heavy_iterations_for, heavy_result, pid_alive,
                      proc_cpu_ticks, proc_stat, read_response, wait_until)

ENDLESS = 100_000_000_000  # minutes of CPU: only a kill or a deadline ends it
TEST_JOBS = ("--enable-test-jobs", "1")


def health(port):
    return get(port, "/health", timeout=5).json()


def slots_all_free(port):
    doc = health(port)
    return all(doc[k]["free"] == doc[k]["total"] for k in ("slots", "transit_buffers"))


def send_get(port, path):
    """Opens a connection and sends one GET without reading the answer."""
    s = connect(port, timeout=10)
    s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path).encode())
    return s


def wait_log(srv, pattern, timeout):
    return wait_until(lambda: re.search(pattern, srv.log()), timeout)


def socket_owner(srv, sock, role="loop"):
    """Pid of the child of srv (of role) holding the server side of the client socket sock,
    found through the socket inode in /proc/net/tcp and the children's /proc/<pid>/fd."""
    cport = sock.getsockname()[1]
    inode = None
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            lport = int(fields[1].split(":")[1], 16)
            rport = int(fields[2].split(":")[1], 16)
            if lport == srv.port and rport == cport and fields[9] != "0":
                inode = fields[9]
    if inode is None:
        return None  # not accepted yet (a queued connection has inode 0): the caller polls
    target = "socket:[%s]" % inode
    for pid in srv.children(role):
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:
                    if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == target:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    raise AssertionError("no %s process holds %s" % (role, target))


@pytest.mark.timeout(60)
def test_abort_in_job_gives_502_only_for_that_job(start_server):
    srv = start_server(*TEST_JOBS, "--compute-workers", "2", "--deadline-ms", "60000")
    srv.expected_crash_re = r"compute\[\d+\] pid=\d+ killed by signal 6\b"
    before = srv.wait_children("compute", 2)
    n = heavy_iterations_for(srv.port, 1.5)
    other = Call(get, srv.port, "/heavy?iterations=%d" % n, timeout=30)
    other.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    r = get(srv.port, "/test/crash", timeout=10)
    elapsed = time.monotonic() - t0
    assert r.status == 502, r
    assert elapsed < 2.0, "502 after %.2f s" % elapsed
    assert get(srv.port, "/ping", timeout=5).status == 200
    ro = other.get(30)
    assert ro.status == 200 and ro.json()["result"] == heavy_result(n), ro
    after = srv.wait_children("compute", 2, timeout=5, exclude=())
    assert len(after) == 2 and len(set(after) - set(before)) == 1, (before, after)
    assert re.search(r"compute\[\d+\] pid=\d+ killed by signal 6\b", srv.log())
    assert wait_until(lambda: slots_all_free(srv.port), 3), health(srv.port)
    r = get(srv.port, "/heavy?iterations=1000", timeout=10)
    assert r.status == 200 and r.json()["result"] == heavy_result(1000), r


@pytest.mark.timeout(60)
def test_test_routes_absent_without_flag(start_server):
    srv = start_server("--compute-workers", "1")
    for path in ("/test/crash", "/test/spin", "/test/alloc?mib=1", "/test/block?ms=1"):
        assert get(srv.port, path, timeout=5).status == 404, path
    assert len(srv.wait_children("compute", 1)) == 1  # (may still be starting, under ASan)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ignore_term", [0, 1])
def test_endless_job_504_then_term_then_kill(start_server, ignore_term):
    srv = start_server(*TEST_JOBS, "--compute-workers", "1", "--deadline-ms", "500",
                       "--kill-grace-ms", "300")
    old = srv.wait_children("compute", 1)
    assert len(old) == 1, old
    t0 = time.monotonic()
    r = get(srv.port, "/test/spin?ignore_term=%d" % ignore_term, timeout=10)
    elapsed = time.monotonic() - t0
    assert r.status == 504, r
    assert 0.4 <= elapsed < 2.5, "504 after %.2f s with a 500 ms deadline" % elapsed
    new = srv.wait_children("compute", 1, timeout=5, exclude=old)
    assert len(new) == 1 and new != old, (old, new)
    log = srv.log()
    pat = r"compute\[0\] pid=%d killed by signal %d\b" % (old[0], 9 if ignore_term else 15)
    assert re.search(pat, log), log
    escalated = re.search(r"compute\[0\] pid=%d ignored SIGTERM; SIGKILL" % old[0], log)
    assert bool(escalated) == bool(ignore_term), log
    r = get(srv.port, "/heavy?iterations=1000", timeout=10)
    assert r.status == 200 and r.json()["result"] == heavy_result(1000), r


@pytest.mark.timeout(60)
def test_alloc_job_bounded_returns(start_server):
    srv = start_server(*TEST_JOBS, "--compute-workers", "1")
    r = get(srv.port, "/test/alloc?mib=16", timeout=10)
    assert r.status == 200, r
    assert get(srv.port, "/test/alloc?mib=99999999", timeout=5).status == 400


@pytest.mark.timeout(60)
def test_stuck_loop_is_killed_and_replaced(start_server):
    srv = start_server(*TEST_JOBS, "--loop-workers", "2", "--compute-workers", "1",
                       "--stuck-loop-ms", "1000")
    before = srv.wait_children("loop", 2)
    assert len(before) == 2, before
    s = send_get(srv.port, "/test/block?ms=60000")
    victim = wait_until(lambda: re.search(r"loop\[\d+\] pid=(\d+) \S+: blocking the loop",
                                          srv.log()), 5)
    assert victim, srv.log()
    victim = int(victim.group(1))
    t0 = time.monotonic()
    # meanwhile the other loop worker serves
    assert get(srv.port, "/ping", timeout=5).status == 200
    # the blocked connection ends when its loop is killed: EOF or reset, never an answer
    s.settimeout(10)
    try:
        data = s.recv(100)
    except ConnectionError:
        data = b""
    s.close()
    waited = time.monotonic() - t0
    assert data == b"", data
    assert waited < 6.0, "the stuck loop was killed only after %.1f s" % waited
    line = wait_log(srv, r"loop\[\d+\] pid=%d is stuck: no heartbeat for \d+ ms" % victim, 3)
    assert line, srv.log()
    after = srv.wait_children("loop", 2, timeout=5, exclude=[victim])
    assert len(after) == 2 and victim not in after, (before, after)
    for _ in range(20):
        assert get(srv.port, "/ping", timeout=5).status == 200


@pytest.mark.timeout(60)
def test_stuck_detection_quiet_under_heavy_load(start_server):
    srv = start_server("--loop-workers", "2", "--compute-workers", "2", "--queue", "8",
                       "--stuck-loop-ms", "2000")
    loops = srv.wait_children("loop", 2)
    n = heavy_iterations_for(srv.port, 0.2)
    end = time.monotonic() + 4.0
    heavy = [Call(lambda: [get(srv.port, "/heavy?iterations=%d" % n, timeout=30)
                           for _ in range(1000) if time.monotonic() < end]) for _ in range(4)]
    for c in heavy:
        c.start()
    pings = 0
    while time.monotonic() < end:
        assert get(srv.port, "/ping", timeout=5).status == 200
        pings += 1
    for c in heavy:
        c.get(60)
    assert pings > 50, pings
    assert "is stuck" not in srv.log(), srv.log()
    assert srv.children("loop") == loops


@pytest.mark.timeout(60)
def test_client_gone_queued_job_never_runs(start_server):
    srv = start_server("--compute-workers", "1", "--queue", "2", "--deadline-ms", "60000")
    comp = srv.wait_children("compute", 1)[0]
    n = heavy_iterations_for(srv.port, 1.5)
    a = Call(get, srv.port, "/heavy?iterations=%d" % n, timeout=30)
    a.start()
    # A runs before B is sent (a sleep let B, which never ends, take the compute process first)
    assert wait_until(lambda: health(srv.port)["slots"]["running"] == 1, 10), health(srv.port)
    b = send_get(srv.port, "/heavy?iterations=%d" % ENDLESS)
    assert wait_until(lambda: health(srv.port)["slots"]["queued"] == 1, 3), health(srv.port)
    b.close()
    # the slot is free at once, while A still runs
    assert wait_until(lambda: health(srv.port)["slots"]["queued"] == 0, 2), health(srv.port)
    assert a.is_alive(), "job A ended too early to test the cancellation"
    assert health(srv.port)["slots"]["running"] == 1
    assert wait_log(srv, r"client gone; job on slot \d+ cancelled before it ran", 3), srv.log()
    ra = a.get(30)
    assert ra.status == 200 and ra.json()["result"] == heavy_result(n), ra
    # B never runs: the compute process goes idle and stays idle
    time.sleep(0.3)
    t0 = proc_cpu_ticks(comp)
    time.sleep(0.6)
    assert proc_cpu_ticks(comp) - t0 <= 5, "the compute process is busy: the cancelled job ran"
    assert slots_all_free(srv.port), health(srv.port)
    assert srv.children("compute") == [comp]


@pytest.mark.timeout(60)
def test_client_gone_running_job_finishes_under_finish(start_server):
    srv = start_server("--compute-workers", "1", "--deadline-ms", "60000",
                       "--on-client-gone", "finish")
    comp = srv.wait_children("compute", 1)[0]
    n = heavy_iterations_for(srv.port, 1.0)
    s = send_get(srv.port, "/heavy?iterations=%d" % n)
    assert wait_until(lambda: health(srv.port)["slots"]["running"] == 1, 3)
    s.close()
    assert wait_log(srv, r"client gone while its job on slot \d+ runs: letting it finish", 3)
    # it finishes (the slot comes back) on the same compute process, which is not killed
    assert wait_until(lambda: slots_all_free(srv.port), 10), health(srv.port)
    assert srv.children("compute") == [comp]
    assert "killing compute" not in srv.log()
    r = get(srv.port, "/heavy?iterations=1000", timeout=10)
    assert r.status == 200 and r.json()["result"] == heavy_result(1000), r


@pytest.mark.timeout(60)
def test_client_gone_running_job_killed_by_default(start_server):
    """A client that leaves (a caller's timeout, asyncio.wait_for's) stops the work it asked
    for when nobody else waits on it: the default since issue 39 (it was finish)."""
    srv = start_server("--compute-workers", "1", "--deadline-ms", "60000")
    old = srv.wait_children("compute", 1)
    s = send_get(srv.port, "/heavy?iterations=%d" % ENDLESS)
    assert wait_until(lambda: health(srv.port)["slots"]["running"] == 1, 3)
    t0 = time.monotonic()
    s.close()
    new = srv.wait_children("compute", 1, timeout=5, exclude=old)
    assert len(new) == 1 and new != old, (old, new)
    assert time.monotonic() - t0 < 3.0
    assert re.search(r"client gone while its job on slot \d+ runs: asking the master to kill",
                     srv.log()), srv.log()
    assert wait_until(lambda: slots_all_free(srv.port), 3), health(srv.port)
    r = get(srv.port, "/heavy?iterations=1000", timeout=10)
    assert r.status == 200 and r.json()["result"] == heavy_result(1000), r


def test_on_client_gone_rejects_bad_value():
    import subprocess
    from conftest import LAGLESS_BIN
    p = subprocess.run([LAGLESS_BIN, "--on-client-gone", "maybe"], capture_output=True,
                       timeout=10)
    assert p.returncode == 2 and b"on-client-gone" in p.stderr, p
    p = subprocess.run([LAGLESS_BIN, "--stuck-loop-ms", "10"], capture_output=True, timeout=10)
    assert p.returncode == 2 and b"stuck-loop-ms" in p.stderr, p


def stop_owner_while_job_runs(srv, seconds):
    """Sends a /heavy job of about `seconds`, SIGSTOPs the loop worker that owns its connection
    and returns (socket, owner pid) once the job was seen still queued or running on compute
    AFTER the stop: its completion then reaches a loop that cannot read it. On a loaded machine
    the job can end before the test finds and stops its loop (the loop then answers it); that
    attempt is let go (SIGCONT, its answer read) and retried with a job four times longer."""
    n = heavy_iterations_for(srv.port, seconds)
    for _ in range(4):
        s = send_get(srv.port, "/heavy?iterations=%d" % n)
        owner = wait_until(lambda: socket_owner(srv, s), 3)
        assert owner, "no loop worker accepted the connection within 3 s"
        os.kill(owner, signal.SIGSTOP)
        doc = health(srv.port)["slots"]
        if doc["running"] + doc["queued"] == 1:
            return s, owner
        os.kill(owner, signal.SIGCONT)  # lost the race: the job was done (or not yet sent)
        s.settimeout(30)
        assert read_response(s).status == 200
        s.close()
        assert wait_until(lambda: slots_all_free(srv.port), 10), health(srv.port)
        n *= 4
    raise AssertionError("the job always ended before its loop worker was stopped")


@pytest.mark.timeout(90)
def test_loop_death_reclaims_and_drops_stale_completion(start_server):
    srv = start_server("--loop-workers", "2", "--compute-workers", "1", "--log-level", "debug",
                       "--stuck-loop-ms", "60000", "--deadline-ms", "60000")
    loops = srv.wait_children("loop", 2)
    s, owner = stop_owner_while_job_runs(srv, 0.8)
    try:
        # the job finishes while its loop cannot read the completion: it stays in the channel
        assert wait_until(lambda: health(srv.port)["slots"]["running"] == 0, 30)
    finally:
        os.kill(owner, signal.SIGKILL)
    s.settimeout(5)
    try:
        data = s.recv(100)
    except ConnectionError:
        data = b""
    s.close()
    assert data == b"", "the killed loop's client got %r" % data
    after = srv.wait_children("loop", 2, timeout=5, exclude=[owner])
    assert len(after) == 2 and owner not in after, (loops, after)
    new = (set(after) - set(loops)).pop()
    assert wait_log(srv, r"reclaimed 1 slot\(s\) of loop\[\d+\]", 3), srv.log()
    # the new incarnation inherits the channel, reads the old completion and drops it
    assert wait_log(srv, r"loop\[\d+\] pid=%d \S+: stale completion for slot" % new, 3), srv.log()
    assert wait_until(lambda: slots_all_free(srv.port), 3), health(srv.port)
    for _ in range(6):  # both loops answer jobs (new connections spread across them)
        r = get(srv.port, "/heavy?iterations=1000", timeout=10)
        assert r.status == 200 and r.json()["result"] == heavy_result(1000), r


@pytest.mark.timeout(90)
def test_crash_loop_backs_off_then_gives_up(start_server):
    srv = start_server("--compute-workers", "1", "--loop-workers", "1")
    loop = srv.wait_children("loop", 1)[0]
    loop_start = proc_stat(loop)[3]
    killed = []
    seen_at = []
    for i in range(10):
        pids = srv.wait_children("compute", 1, timeout=8, exclude=killed)
        if srv.proc.poll() is not None:
            break
        assert len(pids) == 1 and pids[0] not in killed, (i, pids, srv.log())
        seen_at.append(time.monotonic())
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])
    try:
        rc = srv.proc.wait(10)
    except Exception:
        rc = None
    assert rc == 1, "master exit code %r after a crash loop\n%s" % (rc, srv.log())
    assert re.search(r"compute\[0\] died 10 times in a row within \d+ ms of starting, before taking any job; giving up",
                     srv.log()), srv.log()
    gaps = [b - a for a, b in zip(seen_at, seen_at[1:])]
    assert len(gaps) == 9, gaps
    # exponential back-off: the respawn gap grows (100 ms doubling, capped at 5 s)
    assert gaps[-1] > 4 * gaps[0] and gaps[-1] > 2.0, gaps
    assert all(g < 8.0 for g in gaps), gaps
    assert wait_until(lambda: not pid_alive(loop, loop_start), 2), "loop outlived the master"
