"""Memory pressure in a real memory cgroup (cgroup v1 memory controller, a child of the test's own
cgroup): a compute process that allocates without bound is OOM-killed and costs only its request
(503, reason memory: an OOM kill is the cgroup's memory running out, not charged to the kind),
and shared memory that cannot be backed is a 503 instead of SIGBUS or a hung loop. The memory
budget (test_memory_budget.py) keeps uploads from reaching the limit at all.

Skipped with the reason when no writable v1 memory hierarchy is available (cgroup v2 only, or
no permission to create a child cgroup)."""

import itertools
import os
import random
import re
import subprocess
import sys
import threading
import time

import pytest

from conftest import connect, get, heavy_result, peer_closed, read_response, wait_until

MIB = 1 << 20
_seq = itertools.count()


def v1_memory_cgroup():
    """Directory of this process's own v1 memory cgroup, or None."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                if "memory" in ctrls.split(","):
                    d = "/sys/fs/cgroup/memory" + path
                    return d if os.path.isdir(d) else None
    except OSError:
        return None
    return None


class MemCgroup:
    """A child memory cgroup with a limit; processes are moved in by pid."""

    def __init__(self, limit, oom_kill_disable=False):
        parent = v1_memory_cgroup()
        if parent is None:
            pytest.skip("no cgroup v1 memory controller for this process")
        self.path = os.path.join(parent, "lagless-test-%d-%d" % (os.getpid(), next(_seq)))
        try:
            os.mkdir(self.path)
        except OSError as e:
            pytest.skip("cannot create a memory cgroup: %s" % e)
        try:
            self.write("memory.limit_in_bytes", limit)
            if os.path.exists(os.path.join(self.path, "memory.memsw.limit_in_bytes")):
                self.write("memory.memsw.limit_in_bytes", limit)  # no swap escape
            self.write("memory.swappiness", 0)
            if oom_kill_disable:
                self.write("memory.oom_control", 1)
        except OSError as e:
            self.remove()
            pytest.skip("cannot configure the memory cgroup: %s" % e)

    def write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(str(value))

    def read(self, name):
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    def add(self, pid):
        self.write("cgroup.procs", pid)

    def remove(self):
        """Removes the cgroup; processes still in it (the server outlives this fixture, whose
        teardown runs first) move back to the parent, or the rmdir fails and the cgroup stays
        behind."""
        parent = os.path.dirname(self.path)

        def gone():
            try:
                for pid in self.read("cgroup.procs").split():
                    try:
                        with open(os.path.join(parent, "cgroup.procs"), "w") as f:
                            f.write(pid)
                    except OSError:
                        pass  # exited meanwhile
            except OSError:
                pass
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                return False
        wait_until(gone, 5, 0.1)


@pytest.fixture
def memcg():
    made = []

    def _make(limit, oom_kill_disable=False):
        cg = MemCgroup(limit, oom_kill_disable)
        made.append(cg)
        return cg

    yield _make
    for cg in made:
        cg.remove()


def move_server(cg, srv):
    """The master first (later respawns inherit its cgroup), then its children."""
    cg.add(srv.pid)
    for pid in srv.children():
        cg.add(pid)


@pytest.mark.timeout(90)
def test_oom_killed_compute_gives_503_and_is_replaced(start_server, memcg):
    cg = memcg(256 * MIB)
    srv = start_server("--enable-test-jobs", "1", "--compute-workers", "2", "--deadline-ms", "60000")
    before = srv.wait_children("compute", 2)
    # every loop worker the sizing asked for: /ping is answered once one runs, and a process
    # just forked still carries the master's name, so counting the named ones then may miss one
    nloops = get(srv.port, "/status").json()["sizing"]["loop_workers"]
    loops = srv.wait_children("loop", nloops)
    assert len(loops) == nloops, (nloops, loops)
    move_server(cg, srv)
    t0 = time.monotonic()
    r = get(srv.port, "/test/alloc", timeout=60)  # without bound
    elapsed = time.monotonic() - t0
    # told from a crash by the cgroup's oom_kill counter (the server was moved into the cgroup
    # after start-up: the master looks its cgroup up again at the death)
    assert r.status == 503, r
    assert r.header("retry-after") == "1", r.headers
    assert elapsed < 30, elapsed
    assert re.search(r"oom_kill [1-9]", cg.read("memory.oom_control")), cg.read("memory.oom_control")
    # the OOM killer chose a compute process (oom_score_adj 1000), not a loop or the master
    assert srv.running()
    assert srv.children("loop") == loops
    after = srv.wait_children("compute", 2, timeout=5)
    assert len(after) == 2 and len(set(after) - set(before)) == 1, (before, after)
    assert re.search(r"compute\[\d\] pid=\d+ killed by signal 9\b", srv.log()), srv.log()
    assert re.search(r"compute\[\d\] pid=\d+ was killed by the OOM killer", srv.log()), srv.log()
    assert get(srv.port, "/ping", timeout=5).status == 200
    r = get(srv.port, "/heavy?iterations=1000", timeout=10)
    assert r.status == 200 and r.json()["result"] == heavy_result(1000), r


@pytest.mark.timeout(90)
def test_shared_memory_pressure_is_503_not_sigbus(start_server, memcg):
    # The OOM killer is off in this cgroup: a page fault past the limit would block the faulting
    # process until memory frees up, so a loop that read a body into unbacked shared memory would
    # hang; fallocate(2) fails with ENOMEM instead, and that must become a 503.
    cg = memcg(128 * MIB, oom_kill_disable=True)
    # A memory budget far above the limit, so the refusal below is fallocate(2)'s: the last
    # line of defence when the budget is set wrong (--shm-budget) or something else in the
    # cgroup took the memory. The budget's own refusals: test_memory_budget.py.
    srv = start_server("--compute-workers", "1", "--max-body", "256M", "--deadline-ms", "20000",
                       "--shm-budget", "1G")
    if asan_shadow_faults(srv.pid, 1):
        # The refused upload leaves the cgroup at its limit until the master trims it; with the
        # OOM killer off, any page fault there waits. An ASan build faults on nearly every
        # allocation (its quarantine hands out fresh pages, its shadow is mapped lazily), so a
        # loop answering /metrics, or the master itself, can wait there: a timeout seen once
        # in a clean CI-style run, never in the normal build, which tests this contract.
        pytest.skip("ASan's own page faults block at a cgroup limit with the OOM killer off")
    move_server(cg, srv)

    # 1. input larger than the memory left: 503 while the body arrives. Input is backed one
    #    1 MiB window ahead of what was received (backing 200 MiB at once would stall the loop
    #    for tens of ms), so the refusal comes when a window cannot be backed, never SIGBUS.
    with connect(srv.port, timeout=10) as s:
        t0 = time.monotonic()
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (200 * MIB))
        sender = threading.Thread(target=send_quietly, args=(s, 200 * MIB), daemon=True)
        sender.start()
        r = read_response(s)
        assert r.status == 503, r
        assert r.header("retry-after") == "1", r.headers
        assert time.monotonic() - t0 < 10
        assert peer_closed(s, 5), "connection left open with an unread body"
        sender.join(10)
    assert re.search(r"cannot back \d+ bytes of input for slot \d+: Cannot allocate memory",
                     srv.log()), srv.log()

    # The refused upload backed pages before the refusal; the master punches them once the slot
    # has been idle for a whole trim pass (1-2 s). The gauge is refreshed once a second, so
    # first let it see the upload.
    time.sleep(1.5)
    assert wait_until(lambda: shm_in_use(srv.port) < 8 * MIB, 10), shm_in_use(srv.port)

    # 2. the input fits but input + output do not: the compute side refuses before running
    body = random.Random(1).randbytes(80 * MIB)
    with connect(srv.port, timeout=30) as s:
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body))
        s.sendall(body)
        r = read_response(s)
    assert r.status == 503, r
    assert r.header("retry-after") == "1", r.headers
    assert re.search(r"compute\[0\] pid=\d+ \S+: cannot back \d+ output bytes", srv.log()), srv.log()

    # 3. nothing crashed, nothing hangs, and small requests work once the pages are trimmed
    assert srv.running() and len(srv.children()) >= 2
    small = b"lagless " * 8192
    ok = None
    for _ in range(30):
        ok = get_compress(srv.port, small)
        if ok.status == 200:
            break
        time.sleep(0.2)
    assert ok.status == 200, ok
    out = subprocess.run(["zstd", "-d", "-c"], input=ok.body, capture_output=True, timeout=10)
    assert out.returncode == 0 and out.stdout == small
    assert "SIGBUS" not in srv.log() and "signal 7" not in srv.log()


def shm_in_use(port):
    text = get(port, "/metrics").body.decode()
    return float(re.search(r"^lagless_shm_bytes_in_use (\S+)$", text, re.M).group(1))


def send_quietly(sock, n):
    """Sends n bytes until the server stops taking them (it refuses the body mid-way)."""
    chunk = b"x" * MIB
    try:
        while n > 0:
            sock.sendall(chunk[:min(n, MIB)])
            n -= MIB
    except OSError:
        pass


def get_compress(port, body, timeout=10):
    with connect(port, timeout=timeout) as s:
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body)
                  + body)
        return read_response(s)


def thread_faults(pid):
    """{tid: minor page faults so far} of each thread of pid (proc(5), /proc/PID/task/TID/stat
    field 10)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                data = f.read()
        except FileNotFoundError:
            continue
        out[int(tid)] = int(data[data.rfind(")") + 2:].split()[7])
    return out


def process_faults(pid):
    """Minor page faults so far of every thread pid has had, those that ended included (proc(5),
    /proc/PID/stat field 10 sums the thread group): the backing helper thread ends when idle
    (worker/job/backing.h), so its faults are read here, not per thread."""
    with open("/proc/%d/stat" % pid) as f:
        data = f.read()
    return int(data[data.rfind(")") + 2:].split()[7])


def helper_faults(pid, before, pbefore):
    """(faults of pid's other threads, faults of its main thread) since thread_faults(pid) gave
    before and process_faults(pid) gave pbefore."""
    on_loop = thread_faults(pid)[pid] - before[pid]
    return process_faults(pid) - pbefore - on_loop, on_loop


def asan_shadow_faults(pid, nbytes):
    """Faults AddressSanitizer's own checks of nbytes cost (it reads one shadow byte per 8, a
    page of shadow per 32 KiB, on a send or copy), when pid runs an ASan build; else 0."""
    with open("/proc/%d/maps" % pid) as f:
        return nbytes // 8 // 4096 + 16 if "libasan" in f.read() else 0


@pytest.mark.timeout(60)
def test_loop_thread_does_not_fault_in_uploaded_body(start_server):
    """Issue 10 item 2: the loop's first write to each page of a body faulted, and at a memory
    cgroup's limit the page tables those faults allocate put the loop itself into the cgroup's
    OOM path for up to 1.8 s. The helper thread that backs each window now also maps it, so the
    loop thread's faults stay far below one per body page while the helper's reach it. Fault
    counts do not depend on timing, so this holds on a loaded machine."""
    srv = start_server("--loop-workers", "1", "--compute-workers", "1")
    loop = srv.wait_children("loop", 1)[0]
    body = bytes(32 * MIB)  # zeros: the answer is a few bytes, so writing it faults little
    pages = len(body) // 4096
    before, pbefore = thread_faults(loop), process_faults(loop)
    r = get_compress(srv.port, body, timeout=30)
    helpers, on_loop = helper_faults(loop, before, pbefore)
    assert r.status == 200, r
    assert helpers >= pages * 0.9, (helpers, on_loop, pages)
    assert on_loop < asan_shadow_faults(loop, len(body)) + pages // 3, (helpers, on_loop, pages)


@pytest.mark.timeout(60)
def test_body_after_the_helper_ended_is_backed_by_a_new_one(start_server):
    """The backing helper thread ends after LG_BACKING_IDLE_MS (1 s) without work, so a loop
    serving inline routes is a process of one thread (worker/job/backing.h). A body that comes
    after that starts a new helper: it is backed and mapped off the loop thread as before."""
    srv = start_server("--loop-workers", "1", "--compute-workers", "1")
    loop = srv.wait_children("loop", 1)[0]
    assert wait_until(lambda: len(os.listdir("/proc/%d/task" % loop)) == 1, 10), \
        "the helper thread did not end when idle"
    body = bytes(16 * MIB)
    pages = len(body) // 4096
    for _ in range(2):
        before, pbefore = thread_faults(loop), process_faults(loop)
        r = get_compress(srv.port, body, timeout=30)
        helpers, on_loop = helper_faults(loop, before, pbefore)
        assert r.status == 200, r
        assert helpers >= pages * 0.9, (helpers, on_loop, pages)
        assert on_loop < asan_shadow_faults(loop, len(body)) + pages // 3, \
            (helpers, on_loop, pages)
        assert wait_until(lambda: len(os.listdir("/proc/%d/task" % loop)) == 1, 10)


@pytest.mark.timeout(30)
def test_a_loop_that_served_only_inline_routes_never_had_a_second_thread(start_server):
    """The request views are mapped on the loop thread before the loop serves
    (worker/job/offload.h lg_offload_map_views), not by a helper thread started for it: a thread
    once started leaves the process multi-threaded for glibc for good, and every recv and send
    of it then pays the cancellation-point bookkeeping. So a loop that served /ping from its
    start has had one thread all along (before, the helper lived for its first second)."""
    srv = start_server("--loop-workers", "1", "--compute-workers", "1")
    loop = srv.wait_children("loop", 1)[0]
    for _ in range(3):
        assert get(srv.port, "/ping").status == 200
        assert len(os.listdir("/proc/%d/task" % loop)) == 1
    with open("/proc/%d/stat" % loop) as f:
        assert int(f.read().rsplit(")", 1)[1].split()[17]) == 1  # num_threads, proc(5)


@pytest.mark.timeout(60)
def test_chunked_body_is_backed_off_the_loop(start_server):
    """Issue 10 item 2: a chunked body (no Content-Length, so no window can be asked for ahead
    of the head) was backed by fallocate(2) on the loop thread, 1 MiB at a time, and faulted in
    by the loop. The parser is now fed no further than the helper thread has backed and mapped:
    the helper's faults reach one per body page, the loop thread's stay far below, and the body
    arrives whole across its windows."""
    srv = start_server("--loop-workers", "1", "--compute-workers", "1")
    loop = srv.wait_children("loop", 1)[0]
    size = 32 * MIB
    pages = size // 4096
    piece = b"%x\r\n%s\r\n" % (256 * 1024, bytes(256 * 1024))
    before, pbefore = thread_faults(loop), process_faults(loop)
    with connect(srv.port, timeout=30) as s:
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(size // (256 * 1024)):
            s.sendall(piece)
        s.sendall(b"0\r\n\r\n")
        r = read_response(s)
    helpers, on_loop = helper_faults(loop, before, pbefore)
    assert r.status == 200, r
    out = subprocess.run(["zstd", "-d", "-c"], input=r.body, capture_output=True, timeout=30)
    assert out.returncode == 0 and out.stdout == bytes(size), len(out.stdout)
    assert helpers >= pages * 0.9, (helpers, on_loop, pages)
    assert on_loop < asan_shadow_faults(loop, size) + pages // 3, (helpers, on_loop, pages)


@pytest.mark.timeout(60)
def test_loop_thread_does_not_fault_in_job_output(start_server):
    """Issue 10 item 2, the other direction: a compute process writes the answer, so the loop's
    sends faulted its pages in (one fault per 64 KiB of fault-around, a page table per 2 MiB,
    charged to the memory cgroup like the input's). The helper thread maps a large answer
    before the loop writes it: the helper's faults reach one per 64 KiB of the answer, the
    loop thread's stay far below."""
    srv = start_server("--loop-workers", "1", "--compute-workers", "1")
    loop = srv.wait_children("loop", 1)[0]
    size = 32 * MIB
    frame = subprocess.run(["zstd", "-c", "-1"], input=bytes(size), capture_output=True,
                           timeout=30, check=True).stdout
    arounds = size // (64 * 1024)
    before, pbefore = thread_faults(loop), process_faults(loop)
    with connect(srv.port, timeout=30) as s:
        s.sendall(b"POST /decompress HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n"
                  % len(frame) + frame)
        r = read_response(s)
    helpers, on_loop = helper_faults(loop, before, pbefore)
    assert r.status == 200 and r.body == bytes(size), (r.status, len(r.body))
    assert helpers >= arounds * 0.9, (helpers, on_loop, arounds)
    assert on_loop < asan_shadow_faults(loop, size) + arounds // 3, (helpers, on_loop, arounds)


@pytest.mark.timeout(120)
def test_oom_kills_in_a_row_never_stop_the_server(start_server, memcg):
    """Issue 10 item 1: with the OOM killer taking a compute process on every job, the master
    once counted each death as a crash loop and exited 1 after about 20 s. Deaths of processes
    that had a job are the jobs' failures: the server keeps respawning and serving. Issue 18:
    an OOM kill is the cgroup's memory running out, answered 503 and never charged to the kind
    (--quarantine-deaths stays at its default of 5 here: test-alloc is never quarantined)."""
    cg = memcg(160 * MIB)
    srv = start_server("--enable-test-jobs", "1", "--compute-workers", "2", "--deadline-ms",
                       "30000")
    move_server(cg, srv)
    statuses, lock, stop = [], threading.Lock(), threading.Event()

    def client():
        while not stop.is_set():
            try:
                st = get(srv.port, "/test/alloc", timeout=40).status
            except OSError as e:
                st = repr(e)
            with lock:
                statuses.append(st)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    end = time.monotonic() + 22
    while time.monotonic() < end and srv.running():
        assert get(srv.port, "/ping", timeout=5).status == 200
        time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(45)
    assert srv.running(), "the server exited under repeated OOM kills\n%s" % srv.log()[-3000:]
    assert statuses and set(statuses) <= {503}, statuses
    assert len(statuses) >= 10, statuses
    assert re.search(r"oom_kill [1-9]", cg.read("memory.oom_control"))
    text = get(srv.port, "/metrics").body.decode()
    m = re.search(r'^lagless_oom_kills_total (\d+)$', text, re.M)
    assert m and int(m.group(1)) >= 10, text
    assert not re.search(r'^lagless_job_process_deaths_total\{kind="test-alloc",route="[^"]*"\} [1-9]', text,
                         re.M), text
    assert srv.wait_children("compute", 2, timeout=10), srv.log()
    r = get(srv.port, "/heavy?iterations=1000", timeout=10)
    assert r.status == 200 and r.json()["result"] == heavy_result(1000), r


def loop_lag_summary(text):
    """One line from lagless_loop_lag_seconds: per bucket bound, the lag samples above it, summed
    over the loops (the loop's own delay, without the client's or the network's)."""
    counts = {}
    for le, n in re.findall(r'^lagless_loop_lag_seconds_bucket\{[^}]*le="([^"]+)"\} (\S+)$', text,
                            re.M):
        counts[le] = counts.get(le, 0) + float(n)
    total = counts.get("+Inf", 0)
    over = ", ".join("%s s: %d" % (le, total - n) for le, n in counts.items()
                     if le in ("0.005", "0.025", "0.1", "0.5", "1"))
    return "loop lag: %d samples; above %s" % (total, over)


# GET /ping on one keep-alive connection, 5 ms apart, until stdin closes; then the latencies in
# seconds, one a line. A process of its own: a thread beside nine uploading threads waited for
# the interpreter lock and measured that (p99 0.37 s while the loops' own lag stayed < 25 ms).
PINGER = r"""
import select, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
lat, buf = [], b""
while not select.select([sys.stdin], [], [], 0)[0]:
    t0 = time.monotonic()
    s.sendall(b"GET /ping HTTP/1.1\r\nHost: t\r\n\r\n")
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536) or sys.exit("closed")
    head, _, buf = buf.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    n = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(buf) < n:
        buf += s.recv(65536) or sys.exit("closed")
    buf = buf[n:]
    lat.append(time.monotonic() - t0)
    time.sleep(0.005)
print("\n".join("%.6f" % x for x in lat))
"""


class Pinger:
    """Measures /ping latency from a separate process while the caller loads the server."""

    def __init__(self, port):
        self.proc = subprocess.Popen([sys.executable, "-c", PINGER, str(port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def stop(self):
        """Sorted latencies in seconds; the pinger failing is an assertion error."""
        try:
            out, _ = self.proc.communicate(b"", timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        assert self.proc.returncode == 0, self.proc.returncode
        return sorted(float(x) for x in out.split())


@pytest.mark.timeout(300)
@pytest.mark.skipif(os.environ.get("LAGLESS_PRESSURE_TEST") != "1",
                    reason="pushes 576 MB through a 1 GiB cgroup (30-80 s): set "
                           "LAGLESS_PRESSURE_TEST=1 (docs/BENCHMARKS.md)")
def test_memory_pressure_does_not_stall_the_loops(start_server, memcg):
    """Issue 10 item 2: with a 1 GiB limit, 3 compute processes and nine parallel 64 MB uploads
    to /compress, loop workers sat in fallocate(2) for seconds (/ping p99 2.1 s, max 4.2 s).
    Backing now runs on each loop's helper thread: /ping stays fast, and every refusal for
    memory is a 503 counted as reason="memory"."""
    cg = memcg(1024 * MIB)
    srv = start_server("--compute-workers", "3", "--loop-workers", "2", "--deadline-ms", "60000")
    move_server(cg, srv)
    body = random.Random(5).randbytes(64 * MIB)
    statuses, lock = [], threading.Lock()

    def upload():
        try:
            with connect(srv.port, timeout=90) as s:
                s.sendall(b"POST /compress?level=1 HTTP/1.1\r\nHost: t\r\nContent-Length: %d"
                          b"\r\n\r\n" % len(body))
                try:
                    s.sendall(body)
                except OSError:
                    pass  # refused part-way (503 and close): the answer is still readable
                st = read_response(s).status
        except OSError as e:
            st = repr(e)
        with lock:
            statuses.append(st)

    pinger = Pinger(srv.port)
    ups = [threading.Thread(target=upload, daemon=True) for _ in range(9)]
    try:
        for t in ups:
            t.start()
        for t in ups:
            t.join(120)
    finally:
        lat = pinger.stop()
    p99 = lat[int(len(lat) * 0.99)] if lat else None
    worst = lat[-1] if lat else None
    print("ping: %d samples, p99 %.1f ms, max %.1f ms; uploads: %r; load average %s" %
          (len(lat), p99 * 1e3, worst * 1e3, sorted(statuses, key=str), os.getloadavg()))
    assert srv.running(), srv.log()[-3000:]
    print(loop_lag_summary(get(srv.port, "/metrics").body.decode()))
    slow = re.findall(r"slow callback: .*", srv.log())
    print("%d slow callbacks logged; longest: %s" % (len(slow), sorted(
        slow, key=lambda l: -float(re.search(r"ran ([\d.]+) ms", l).group(1)))[:3]))
    assert len(lat) > 50, len(lat)
    # generous for a shared 2-core machine: before the fix p99 was 1.1-2.1 s here
    assert p99 < 0.5, (p99, worst)
    assert set(statuses) <= {200, 502, 503}, statuses
    text = get(srv.port, "/metrics").body.decode()
    mem = int(float(re.search(r'^lagless_jobs_rejected_total\{reason="memory"\} (\S+)$', text,
                              re.M).group(1)))
    assert mem == statuses.count(503), (mem, statuses, text)
