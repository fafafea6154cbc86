"""deploy/kubernetes.yaml: a pod that stops without refusing a connection, that the "restricted"
Pod Security Standard admits, that disruptions and node loss leave served, whose memory limit
holds what its settings can back, and whose settings the binary accepts."""
import os
import re
import subprocess

import pytest

from conftest import LAGLESS_BIN, REPO_ROOT

yaml = pytest.importorskip("yaml", reason="PyYAML missing (Debian package python3-yaml)")

MANIFEST = os.path.join(REPO_ROOT, "deploy", "kubernetes.yaml")
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}


def docs():
    with open(MANIFEST) as f:
        return {d["kind"]: d for d in yaml.safe_load_all(f) if d}


def pod_and_container():
    dep = docs()["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    return dep, pod, c


def env_of(c):
    return {e["name"]: e["value"] for e in c.get("env", [])}


def size(v):
    m = re.fullmatch(r"(\d+)([KMG]i?)?", str(v))
    assert m, v
    return int(m.group(1)) * UNITS.get(m.group(2) or "", 1)


def run_check(c):
    """`lagless -t` with the container's environment and arguments (the shipped file for -c)."""
    args = [a.replace("/etc/lagless/lagless.conf", os.path.join(REPO_ROOT, "deploy",
                                                               "lagless.conf"))
            for a in c.get("args", [])]
    cpus = c["resources"]["limits"]["cpu"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAGLESS_")}
    env.update(env_of(c), LAGLESS_CPUS=str(cpus))
    return subprocess.run([LAGLESS_BIN, "-t", *args], capture_output=True, text=True, env=env,
                          timeout=30)


@pytest.mark.timeout(30)
def test_stop_is_covered_by_the_grace_period():
    dep, pod, c = pod_and_container()
    env = env_of(c)
    delay = int(env.get("LAGLESS_DRAIN_DELAY_MS", "0"))
    drain = int(env.get("LAGLESS_DRAIN_TIMEOUT_MS", "30000"))
    pre = c.get("lifecycle", {}).get("preStop")
    assert delay >= 5000 or pre, "no drain delay nor preStop: endpoints still route to the pod"
    grace = pod["terminationGracePeriodSeconds"] * 1000
    assert grace > delay + drain, (grace, delay, drain)
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    # probes (and scrapes) on the admin listener, a port the Service does not expose
    svc_ports = {p["targetPort"] for p in docs()["Service"]["spec"]["ports"]}
    assert c["readinessProbe"]["httpGet"]["port"] not in svc_ports
    admin = [p for p in c["ports"] if p["name"] == c["readinessProbe"]["httpGet"]["port"]]
    assert admin and "--admin-listen" in c["args"], c["args"]
    assert c["args"][c["args"].index("--admin-listen") + 1].endswith(
        ":%d" % admin[0]["containerPort"])


@pytest.mark.timeout(30)
def test_restricted_pod_security_standard():
    """The checks of the "restricted" profile (kubernetes.io/docs/concepts/security/
    pod-security-standards) that a manifest decides."""
    dep, pod, c = pod_and_container()
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    seccomp = (csc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    assert seccomp in ("RuntimeDefault", "Localhost"), seccomp
    assert csc.get("allowPrivilegeEscalation") is False
    assert csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True
    assert csc.get("capabilities", {}).get("drop") == ["ALL"]
    assert not csc.get("capabilities", {}).get("add")
    assert not csc.get("privileged") and not pod.get("hostNetwork") and not pod.get("hostPID")
    assert (csc.get("runAsUser") or psc.get("runAsUser")) != 0


@pytest.mark.timeout(30)
def test_disruption_budget_and_topology_spread():
    d = docs()
    dep, pod, c = pod_and_container()
    labels = dep["spec"]["template"]["metadata"]["labels"]
    pdb = d["PodDisruptionBudget"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert 0 < pdb["spec"]["minAvailable"] < dep["spec"]["replicas"]
    assert d["HorizontalPodAutoscaler"]["spec"]["minReplicas"] > pdb["spec"]["minAvailable"]
    keys = {t["topologyKey"] for t in pod["topologySpreadConstraints"]}
    assert {"kubernetes.io/hostname", "topology.kubernetes.io/zone"} <= keys
    for t in pod["topologySpreadConstraints"]:
        assert t["labelSelector"]["matchLabels"].items() <= labels.items()


@pytest.mark.timeout(60)
def test_memory_limit_holds_what_the_settings_can_back():
    """The formula of docs/OPERATIONS.md ("Kubernetes"): transit buffers x (max_body +
    max_output) + cache_bytes + compute x the largest job's own memory + 32 MiB of processes
    must fit the limit, with a quarter of it to spare; and the binary accepts the settings."""
    dep, pod, c = pod_and_container()
    r = run_check(c)
    assert r.returncode == 0, r.stderr
    assert "unknown environment variable" not in r.stderr, r.stderr
    env = env_of(c)
    limit = size(c["resources"]["limits"]["memory"])
    assert size(c["resources"]["requests"]["memory"]) == limit, "Guaranteed QoS: requests = limits"
    body = size(env.get("LAGLESS_MAX_BODY", "64M"))
    out = size(env.get("LAGLESS_MAX_OUTPUT", "0")) or body + body // 256 + (128 << 10)
    sizing = r.stdout.splitlines()[0]
    compute = int(re.search(r'"compute_workers":(\d+)', sizing).group(1))
    queue = int(re.search(r'"queue_capacity":(\d+)', sizing).group(1))
    transit = int(env.get("LAGLESS_TRANSIT_BUFFERS", "0")) or 4 * (compute + queue)
    cache = size(env.get("LAGLESS_CACHE_BYTES", "64M"))
    need = transit * (body + out) + cache + compute * (19 << 20) + (32 << 20)
    assert need <= limit * 3 // 4, "settings can back %d MiB, limit %d MiB" % (
        need >> 20, limit >> 20)
