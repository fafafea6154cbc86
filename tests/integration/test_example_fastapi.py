"""examples/fastapi/: the background article's FastAPI app behind lagless, started by the real
binary from the example's own configuration (lagless.conf, way c; its paths made absolute, a
test port, the CPU route's deadline shortened): lagless starts uvicorn and is ready once the
app is, /health is the app's (proxied), the CPU route runs the app's execute_cpu_workload in
the compute pool (the app's executor never sees it), and a call past its deadline is a 504
whose compute process is killed, not left computing. Way b's configuration passes `lagless -t`,
and the Kubernetes manifest runs the image's configuration (issue 38)."""

import os
import re
import subprocess

import pytest

from conftest import (LAGLESS_BIN, REPO_ROOT, Server, children_of, get, pid_alive, request,
                      sched_slice_of, wait_until)

MODULES = os.environ.get("LAGLESS_MODULES") or os.path.join(REPO_ROOT, "build", "modules")
EXAMPLE = os.path.join(REPO_ROOT, "examples", "fastapi")
DEADLINE_MS = 1500


def need_app():
    if LAGLESS_BIN is None:
        pytest.skip("lagless binary missing")
    if subprocess.run(["/usr/bin/python3", "-c", "import fastapi, uvicorn"],
                      capture_output=True).returncode:
        pytest.skip("python3-fastapi or python3-uvicorn missing (make deps)")


def example_conf(name, so=None):
    """The example's configuration text with absolute paths (lagless resolves relative ones
    against its working directory, the repository root in the README)."""
    text = open(os.path.join(EXAMPLE, name)).read()
    text = re.sub(r"(?m)^cwd = examples/fastapi$", "cwd = " + EXAMPLE, text)
    text = re.sub(r"(?m)^python_path = examples/fastapi$", "python_path = " + EXAMPLE, text)
    if so:
        text = re.sub(r"(?m)^path = build/modules/python.so$", "path = " + so, text)
    return text


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    need_app()
    so = os.path.join(MODULES, "python.so")
    if not os.path.isfile(so):
        if os.environ.get("LAGLESS_MODULES"):
            pytest.fail("%s missing although LAGLESS_MODULES is set" % so)
        pytest.skip("python.so not built")
    text = example_conf("lagless.conf", so)
    # the CPU route's deadline, the article's 10 s timeout, shortened for the test
    head, sep, tail = text.partition("[route /compute-non-blocking]")
    assert sep, "the example has no CPU route"
    tail, n = re.subn(r"(?m)^deadline_ms = 10000$", "deadline_ms = %d" % DEADLINE_MS, tail)
    assert n == 1, tail
    work = tmp_path_factory.mktemp("fastapi")
    conf = work / "lagless.conf"
    conf.write_text(head + sep + tail)
    s = Server(["--compute-workers", "1", "-c", str(conf)], workdir=str(work), start_timeout=60)
    try:
        # /ready waits for the app's readiness probe (its /health through uvicorn)
        assert wait_until(lambda: get(s.port, "/ready", timeout=5).status == 200, 60), \
            s.log()[-3000:]
    except BaseException:
        s.kill_all()
        raise
    yield s
    s.kill_all()
    crashes = s.crash_reports()
    assert not crashes, crashes[:10]


def app_pid(srv):
    (pid,) = [p for p, comm, state, _ in children_of(srv.pid)
              if comm.startswith("python") and state not in ("Z", "X")]
    return pid


def post(port, path, timeout=30):
    return request(port, "POST", path, body=b"", headers={"Content-Length": "0"},
                   timeout=timeout)


@pytest.mark.timeout(60)
def test_health_is_the_apps(srv):
    r = get(srv.port, "/health")
    # the app's answer ({"status": "healthy", "timestamp": ...}), not lagless's own /health
    assert r.status == 200 and r.json()["status"] == "healthy", r
    assert "timestamp" in r.json() and r.header("x-run-ms") is None, r
    assert re.search(r"app web\[0\] pid=\d+ started on unix:", srv.log()), srv.log()[-2000:]
    # the app's other routes are proxied too
    r = get(srv.port, "/pool")
    assert r.status == 200 and r.json()["workers"] == 1, r


@pytest.mark.timeout(60)
def test_cpu_route_runs_in_the_pool(srv):
    n = 200_000
    r = post(srv.port, "/compute-non-blocking?iterations=%d" % n)
    assert r.status == 200 and r.header("content-type") == "application/json", r
    assert r.json()["result"] == (n - 1) * n * (2 * n - 1) // 6, r.body
    # a pool job's answer: lagless's queue and run times
    assert r.header("x-run-ms") is not None and r.header("x-queue-ms") is not None, r
    # the app's executor never saw it: no call submitted, no executor process made
    assert get(srv.port, "/pool").json()["max_pending"] == 0
    assert children_of(app_pid(srv)) == [], children_of(app_pid(srv))
    assert request(srv.port, "GET", "/compute-non-blocking").status == 405


@pytest.mark.timeout(60)
def test_compute_process_asks_long_slices_the_app_keeps_the_default(srv):
    """The example's compute_slice_ms = 20 (docs/OPERATIONS.md, Scheduling): its compute
    process asks the scheduler for 20 ms slices, uvicorn and the loops keep the kernel's, so
    that they preempt a running call when they wake (Linux 6.12 and later)."""
    release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
    if release < (6, 12) or sched_slice_of(os.getpid()) is None:
        pytest.skip("custom time slices need Linux 6.12 (this is %s)" % os.uname().release)
    (compute,) = srv.wait_children("compute", 1, timeout=20)
    assert wait_until(lambda: sched_slice_of(compute) == 20_000_000, 10), sched_slice_of(compute)
    default = sched_slice_of(os.getpid())
    for pid in [app_pid(srv)] + srv.children("loop"):
        assert sched_slice_of(pid) == default, pid


@pytest.mark.timeout(90)
def test_past_the_deadline_504_and_the_call_is_killed(srv):
    (before,) = srv.wait_children("compute", 1, timeout=20)
    start = dict((p, s) for p, _, _, s in children_of(srv.pid))[before]
    # a call of minutes: only the kill ends it within the test's bounds
    r = post(srv.port, "/compute-non-blocking?iterations=%d" % 10**10, timeout=30)
    assert r.status == 504, r
    assert float(r.header("x-run-ms")) < DEADLINE_MS + 1000, r
    # the process that ran it is gone (killed and replaced), not computing on
    assert wait_until(lambda: not pid_alive(before, start), 10), "compute process still runs"
    (after,) = srv.wait_children("compute", 1, timeout=30, exclude=(before,))
    assert after != before
    # and the pool serves the next call
    assert wait_until(lambda: post(srv.port, "/compute-non-blocking?iterations=1000")
                      .status == 200, 30)


@pytest.mark.timeout(90)
def test_way_b_runs_the_call_in_the_apps_executor(tmp_path):
    """Way b (lagless-proxy.conf): every route proxied, the call in the app's own
    ProcessPoolExecutor (made by the lifespan; FastAPI 0.92 ignored lifespan= and the route
    answered 500)."""
    need_app()
    conf = tmp_path / "lagless-proxy.conf"
    conf.write_text(example_conf("lagless-proxy.conf"))
    s = Server(["-c", str(conf)], workdir=str(tmp_path), start_timeout=60)
    try:
        assert wait_until(lambda: get(s.port, "/ready", timeout=5).status == 200, 60), \
            s.log()[-3000:]
        n = 100_000
        r = post(s.port, "/compute-non-blocking?iterations=%d" % n)
        assert r.status == 200 and r.json()["result"] == (n - 1) * n * (2 * n - 1) // 6, r
        assert r.json()["active_workers"] >= 1 and r.header("x-run-ms") is None, r
        assert get(s.port, "/pool").json()["max_pending"] == 1
    finally:
        s.kill_all()
    assert not s.crash_reports(), s.crash_reports()[:10]


@pytest.mark.timeout(60)
def test_proxy_config_passes_t():
    """Way b as the README gives it: lagless -t from the repository root."""
    need_app()
    r = subprocess.run([LAGLESS_BIN, "-t", "-c", "examples/fastapi/lagless-proxy.conf"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "app web: 1 process(es), upstream web" in r.stdout + r.stderr, r.stdout


@pytest.mark.timeout(60)
def test_kubernetes_manifest_runs_the_image_configuration(tmp_path):
    """examples/fastapi/kubernetes.yaml: one container, the example's image, probes on
    lagless's /health and /ready on the admin port the Service does not expose, and its
    arguments and environment accepted by `lagless -t` with the example's configuration."""
    yaml = pytest.importorskip("yaml", reason="PyYAML missing (Debian package python3-yaml)")
    with open(os.path.join(EXAMPLE, "kubernetes.yaml")) as f:
        docs = {d["kind"]: d for d in yaml.safe_load_all(f) if d}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"].startswith("lagless-fastapi-example:"), c["image"]
    svc = {p["targetPort"] for p in docs["Service"]["spec"]["ports"]}
    for probe, path in (("livenessProbe", "/health"), ("readinessProbe", "/ready")):
        assert c[probe]["httpGet"]["path"] == path and c[probe]["httpGet"]["port"] not in svc
    admin = [p["containerPort"] for p in c["ports"] if p["name"] == "admin"]
    assert c["args"][c["args"].index("--admin-listen") + 1].endswith(":%d" % admin[0])
    so = os.path.join(MODULES, "python.so")
    if not os.path.isfile(so):
        pytest.skip("python.so not built")
    conf = tmp_path / "lagless.conf"
    conf.write_text(example_conf("lagless.conf", so))
    args = [a.replace("/etc/lagless/lagless.conf", str(conf)) for a in c["args"]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAGLESS_")}
    env.update({e["name"]: e["value"] for e in c["env"]},
               LAGLESS_CPUS=str(c["resources"]["limits"]["cpu"]))
    r = subprocess.run([LAGLESS_BIN, "-t", *args], capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode == 0, r.stderr
