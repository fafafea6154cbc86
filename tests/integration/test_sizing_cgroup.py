"""`lagless --print-sizing` against fixture trees and, where the machine allows, a real cgroup.

The binary comes from LAGLESS_BIN (set by `make integration`). --print-sizing prints the
lg_sizing_json object on stdout and exits 0; LAGLESS_SYSROOT points the reader at a fixture tree.
The real-cgroup test creates a uniquely named child cgroup with a quota of 1.5 CPUs (quota 150000 us
per 100000 us period, Documentation/scheduler/sched-bwc.rst and cgroup-v2.rst "cpu.max"), runs the
binary inside it and removes it afterwards; it skips, saying why, where no cgroup can be created.
"""
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "sizing"


@pytest.fixture(scope="module")
def lagless_bin():
    path = os.environ.get("LAGLESS_BIN")
    if not path:
        pytest.skip("LAGLESS_BIN is not set")
    if not os.access(path, os.X_OK):
        pytest.skip(f"LAGLESS_BIN={path} is not an executable file")
    return path


def _env(sysroot=None):
    env = {k: v for k, v in os.environ.items() if k != "LAGLESS_SYSROOT"}
    if sysroot is not None:
        env["LAGLESS_SYSROOT"] = str(sysroot)
    return env


def _parse(proc):
    assert proc.returncode == 0, f"exit {proc.returncode}, stderr:\n{proc.stderr}"
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one JSON line on stdout, got:\n{proc.stdout}"
    obj = json.loads(lines[0])
    assert isinstance(obj, dict)
    return obj


def print_sizing(binary, sysroot=None):
    proc = subprocess.run([binary, "--print-sizing"], env=_env(sysroot), capture_output=True,
                          text=True, timeout=20)
    return _parse(proc)


def check_defaults(s):
    c = max(1, s["budget"] - 1)
    assert s["loop_workers"] == s["budget"]
    assert s["compute_workers"] == c
    assert s["queue_capacity"] == 2 * c


# name, cgroup, budget (floor), quota, quota_source, warnings
FIXTURE_CASES = [
    ("v2_quota_1.5", "v2", 1, 1.5, "/sys/fs/cgroup/system.slice/lagless.service/cpu.max", 0),
    ("cpuset_quota", "v2", 2, 2.0, "/sys/fs/cgroup/system.slice/lagless.service/cpu.max", 0),
    ("nested_v2", "v2", 1, 1.0, "/sys/fs/cgroup/system.slice/cpu.max", 0),
    ("v1_docker", "v1", 1, 1.5, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", 0),
    ("cpuset_8-15", "v2", 8, None, None, 0),
    ("hybrid_this_vm", "hybrid", 2, None, None, 0),
    ("corrupt_v2_garbage", "v2", 16, None, None, 1),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name,cgroup,budget,quota,source,warnings", FIXTURE_CASES,
                         ids=[c[0] for c in FIXTURE_CASES])
def test_print_sizing_fixture(lagless_bin, name, cgroup, budget, quota, source, warnings):
    s = print_sizing(lagless_bin, FIXTURES / name)
    assert s["cgroup"] == cgroup
    assert s["affinity"] == -1, "sched_getaffinity must not be read under a sysroot"
    assert s["budget"] == budget
    if quota is None:
        assert s["quota"] is None
    else:
        assert s["quota"] == pytest.approx(quota)
    assert s["quota_source"] == source
    assert s["warnings"] == warnings
    assert s["rounding"] == "floor"
    assert s["cpus_override"] is None
    check_defaults(s)


@pytest.mark.timeout(30)
def test_print_sizing_real_root(lagless_bin):
    s = print_sizing(lagless_bin)
    assert s["online"] >= 1 and s["affinity"] >= 1
    assert 1 <= s["budget"] <= min(s["online"], s["affinity"])
    check_defaults(s)


# ---- a real cgroup ----

def _own_cgroups():
    """{controller or "" for v2: path} from /proc/self/cgroup (cgroups(7))."""
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            hid, ctls, path = line.rstrip("\n").split(":", 2)
            if hid == "0" and ctls == "":
                out[""] = path
            for c in ctls.split(","):
                if c:
                    out[c] = path
    return out


def _mounts():
    """(root, mount point, fstype, super options) per mountinfo line (proc(5))."""
    def unescape(s):
        return s.encode().decode("unicode_escape") if "\\" in s else s
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.rstrip("\n").split(" - ", 1)
            fields, tail = left.split(), right.split()
            yield unescape(fields[3]), unescape(fields[4]), tail[0], tail[2] if len(tail) > 2 else ""


def _own_dir(root, mnt, path):
    """The process's cgroup directory: mount point + (path - mount root), as sizing/sizing.c."""
    if root == "/":
        rel = path
    elif path == root or path.startswith(root + "/"):
        rel = path[len(root):]
    else:
        rel = ""
    return Path(mnt + rel.rstrip("/"))


def _writable_parent():
    """(version, parent dir) under which a child cgroup with a CPU quota can be made, or a reason."""
    own = _own_cgroups()
    mounts = list(_mounts())
    if "cpu" in own:
        for root, mnt, fstype, opts in mounts:
            if fstype == "cgroup" and "cpu" in opts.split(","):
                d = _own_dir(root, mnt, own["cpu"])
                if os.access(d, os.W_OK) and (d / "cpu.cfs_quota_us").exists():
                    return "v1", d
                return None, f"cgroup v1 cpu directory {d} is not writable"
        return None, "the cpu controller is on a v1 hierarchy that is not mounted"
    if "" in own:
        for root, mnt, fstype, _ in mounts:
            if fstype == "cgroup2":
                d = _own_dir(root, mnt, own[""])
                try:
                    enabled = (d / "cgroup.subtree_control").read_text().split()
                except OSError as e:
                    return None, f"cannot read {d}/cgroup.subtree_control: {e}"
                if "cpu" not in enabled:
                    return None, f"cpu controller not delegated below {d} (subtree_control: {enabled})"
                if not os.access(d, os.W_OK):
                    return None, f"cgroup v2 directory {d} is not writable"
                return "v2", d
        return None, "cgroup2 is not mounted"
    return None, "no cgroup hierarchy in /proc/self/cgroup"


def _rmdir_retry(d):
    # The last task has been reaped when subprocess.run returns, but the kernel can report the
    # cgroup busy for a moment while it finishes the exit.
    for _ in range(50):
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    d.rmdir()


def _set_quota(version, d, quota_us):
    """quota_us per 100000 us period, or None for no limit."""
    if version == "v1":
        (d / "cpu.cfs_period_us").write_text("100000")
        (d / "cpu.cfs_quota_us").write_text(str(quota_us) if quota_us else "-1")
        return d / "cpu.cfs_quota_us"
    (d / "cpu.max").write_text(f"{quota_us or 'max'} 100000")
    return d / "cpu.max"


def _run_inside(binary, d):
    script = 'echo $$ > "$1/cgroup.procs" && exec "$2" --print-sizing'
    proc = subprocess.run(["sh", "-c", script, "sh", str(d), binary], env=_env(),
                          capture_output=True, text=True, timeout=20)
    return _parse(proc)


@pytest.fixture
def real_cgroup(lagless_bin):
    """(version, new empty cgroup dir) made under our own cgroup; removed afterwards."""
    version, parent = _writable_parent()
    if version is None:
        pytest.skip(parent)
    baseline = print_sizing(lagless_bin)
    if baseline["quota"] is not None and baseline["quota"] < 1.5:
        pytest.skip(f"an enclosing cgroup already limits us to {baseline['quota']} CPUs")
    top = parent / f"lagless-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        top.mkdir()
    except OSError as e:
        pytest.skip(f"cannot create a cgroup under {parent}: {e}")
    made = [top]
    try:
        yield version, top, made
    finally:
        for d in reversed(made):
            _rmdir_retry(d)
    assert not top.exists()


@pytest.mark.timeout(30)
def test_print_sizing_in_real_cgroup(lagless_bin, real_cgroup):
    version, d, _ = real_cgroup
    source = _set_quota(version, d, 150000)
    s = _run_inside(lagless_bin, d)
    assert s["quota"] == pytest.approx(1.5)
    assert s["budget"] == 1
    assert s["quota_source"] == str(source)
    check_defaults(s)


@pytest.mark.timeout(30)
def test_print_sizing_parent_limit_real_cgroup(lagless_bin, real_cgroup):
    """The limit sits on the parent: the walk up from our own cgroup must find it. cgroup v1
    refuses a child quota above the parent's (sched-bwc.rst, "max(c_i) <= C"), so there the child
    is unlimited; v2 accepts a looser child and applies the minimum."""
    version, parent, made = real_cgroup
    child = parent / "child"
    child.mkdir()
    made.append(child)
    source = _set_quota(version, parent, 150000)
    _set_quota(version, child, None if version == "v1" else 400000)
    s = _run_inside(lagless_bin, child)
    assert s["quota"] == pytest.approx(1.5)
    assert s["budget"] == 1
    assert s["quota_source"] == str(source)
