"""deploy/kubernetes.yaml: a pod that stops without refusing a connection, that the "restricted"
Pod Security Standard admits, that disruptions and node loss leave served, whose memory limit
holds what its settings can back, and whose settings the binary accepts; across deploy/*.yaml,
one autoscaler per workload, every ConfigMap a pod references shipped, and a scrape that gives
the prometheus-adapter rule the series and labels it matches (issue 39, sections 3 and 4)."""
import collections
import glob
import os
import re
import subprocess
import sys

import pytest

from conftest import LAGLESS_BIN, REPO_ROOT, get

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


def all_docs(pattern="*.yaml"):
    """[(file name, object)] of every object in deploy/<pattern>."""
    out = []
    for path in sorted(glob.glob(os.path.join(REPO_ROOT, "deploy", pattern))):
        with open(path) as f:
            out += [(os.path.relpath(path, REPO_ROOT), d) for d in yaml.safe_load_all(f) if d]
    return out


def config_dir(tmp_path):
    """The ConfigMaps the pod mounts, written out as the kubelet would: {mountPath: directory}."""
    dep, pod, c = pod_and_container()
    maps = {d["metadata"]["name"]: d for _, d in all_docs() if d["kind"] == "ConfigMap"}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    out = {}
    for m in c.get("volumeMounts", []):
        cm = vols[m["name"]].get("configMap")
        if cm:
            d = tmp_path / m["name"]
            for item in cm.get("items") or [{"key": k, "path": k}
                                            for k in maps[cm["name"]]["data"]]:
                (d / item["path"]).parent.mkdir(parents=True, exist_ok=True)
                (d / item["path"]).write_text(maps[cm["name"]]["data"][item["key"]])
            out[m["mountPath"]] = str(d)
    return out


def run_check(c, tmp_path):
    """`lagless -t` with the container's environment and arguments, and the ConfigMap's files
    where the pod mounts them."""
    mounts = config_dir(tmp_path)
    args = list(c.get("args", []))
    for where, d in mounts.items():
        args = [a.replace(where + "/", d + "/") for a in args]
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
        # a preference: DoNotSchedule leaves pods Pending once the HPA wants more pods than
        # there are nodes (or zones)
        assert t["whenUnsatisfiable"] == "ScheduleAnyway", t


@pytest.mark.timeout(60)
def test_memory_limit_holds_what_the_settings_can_back(tmp_path):
    """The formula of docs/OPERATIONS.md ("Kubernetes"): transit buffers x (max_body +
    max_output) + cache_bytes + compute x the largest job's own memory + 32 MiB of processes
    must fit the limit, with a quarter of it to spare; and the binary accepts the settings."""
    dep, pod, c = pod_and_container()
    r = run_check(c, tmp_path)
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


def workload(kind, ref):
    return (ref.get("kind", "Deployment"), ref["name"])


def autoscalers(objs):
    """{(kind, name) of a workload: [the autoscalers that scale it]}."""
    out = collections.defaultdict(list)
    for f, d in objs:
        if d["kind"] in ("HorizontalPodAutoscaler", "ScaledObject"):
            out[workload(d["kind"], d["spec"]["scaleTargetRef"])].append(
                "%s %s (%s)" % (d["kind"], d["metadata"]["name"], f))
    return out


@pytest.mark.timeout(30)
def test_one_autoscaler_per_workload():
    """KEDA refuses a workload an HPA already scales, and two HPAs on one Deployment undo each
    other's decisions: deploy/*.yaml (what `kubectl apply -f deploy/` applies) has one
    autoscaler per workload, on offered load, not CPU (a saturated pod answers the excess with
    fast 503s: 50% CPU while refusing 43%); deploy/keda/ replaces the HPA, not adds to it."""
    objs = all_docs()
    found = autoscalers(objs)
    workloads = {(d["kind"], d["metadata"]["name"]) for _, d in objs
                 if d["kind"] in ("Deployment", "StatefulSet")}
    assert found.keys() == workloads, (found, workloads)
    for w, which in found.items():
        assert len(which) == 1, (w, which)
    hpa = docs()["HorizontalPodAutoscaler"]
    (m,) = hpa["spec"]["metrics"]
    assert m["type"] == "Pods" and m["pods"]["metric"]["name"] == "lagless_offered_load", m
    # the KEDA set: deploy/*.yaml without its HPA, plus deploy/keda/
    keda = [o for o in objs if o[1]["kind"] != "HorizontalPodAutoscaler"] + \
        all_docs(os.path.join("keda", "*.yaml"))
    found = autoscalers(keda)
    assert found.keys() == workloads and all(len(v) == 1 for v in found.values()), found
    assert all("ScaledObject" in v[0] for v in found.values()), found


def configmap_refs(pod):
    """The ConfigMap names a pod spec references: volumes (projected too), envFrom, env."""
    refs = set()
    for v in pod.get("volumes", []):
        if "configMap" in v:
            refs.add(v["configMap"]["name"])
        for src in v.get("projected", {}).get("sources", []):
            if "configMap" in src:
                refs.add(src["configMap"]["name"])
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        refs |= {e["configMapRef"]["name"] for e in c.get("envFrom", []) if "configMapRef" in e}
        refs |= {e["valueFrom"]["configMapKeyRef"]["name"] for e in c.get("env", [])
                 if "configMapKeyRef" in e.get("valueFrom", {})}
    return refs


@pytest.mark.timeout(60)
def test_configmap_mounted_shipped_and_checksummed(tmp_path):
    """The configuration is a ConfigMap mounted at /etc/lagless (not baked into the image), every
    ConfigMap a pod references is shipped, the binary accepts it, and the pod template's
    checksum/config annotation is current (deploy/config-checksum --check), so changing the
    ConfigMap rolls the pods."""
    objs = all_docs()
    shipped = {d["metadata"]["name"] for _, d in objs if d["kind"] == "ConfigMap"}
    for f, d in objs:
        if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
            missing = configmap_refs(d["spec"]["template"]["spec"]) - shipped
            assert not missing, "%s references ConfigMaps it does not ship: %s" % (f, missing)
    dep, pod, c = pod_and_container()
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    assert "configMap" in vols[mounts["/etc/lagless"]["name"]], mounts
    assert "subPath" not in mounts["/etc/lagless"], "a subPath mount never sees an update"
    assert c["args"][c["args"].index("-c") + 1] == "/etc/lagless/lagless.conf"
    assert os.path.isfile(os.path.join(config_dir(tmp_path)["/etc/lagless"], "lagless.conf"))
    tool = os.path.join(REPO_ROOT, "deploy", "config-checksum")
    r = subprocess.run([sys.executable, tool, "--check", MANIFEST], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    ann = dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    assert re.fullmatch(r"[0-9a-f]{64}", ann), ann
    # a change to the ConfigMap makes the annotation stale; the tool rewrites it, and only it
    copy = tmp_path / "kubernetes.yaml"
    text = open(MANIFEST).read()
    copy.write_text(text.replace("log_level = info", "log_level = warn"))
    assert subprocess.run([sys.executable, tool, "--check", str(copy)], capture_output=True,
                          timeout=30).returncode == 1
    r = subprocess.run([sys.executable, tool, str(copy)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and r.stdout.strip() != ann, r
    new = copy.read_text()
    assert new.replace(r.stdout.strip(), ann) == text.replace("log_level = info",
                                                              "log_level = warn")


@pytest.mark.timeout(30)
def test_read_only_root_has_a_writable_tmp():
    """readOnlyRootFilesystem, and /tmp an emptyDir: Python's tempfile (a python.call kind)
    needs a writable directory."""
    dep, pod, c = pod_and_container()
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    assert "/tmp" in mounts and "emptyDir" in vols[mounts["/tmp"]], (mounts, vols)


# Labels Prometheus gives every series of a target: a PodMonitor's (the Prometheus operator
# adds namespace, pod, container, endpoint, job and instance), and the prometheus-community
# chart's annotation job ("kubernetes-pods": namespace, pod, node, job, instance).
PODMONITOR_LABELS = {"namespace", "pod", "container", "endpoint", "job", "instance"}
ANNOTATION_JOB_LABELS = {"namespace", "pod", "node", "job", "instance"}


@pytest.mark.timeout(30)
def test_scrape_gives_the_adapter_rule_its_series_and_labels(server):
    """The HPA's metric exists only if Prometheus scrapes the admin port (the public one does
    not answer /metrics) with the labels the prometheus-adapter rule matches and maps to
    resources, and the rule serves the metric under the name the HPA asks for."""
    from test_autoscale_queries import adapter_rule
    rule = adapter_rule()
    dep, pod, c = pod_and_container()
    labels = dep["spec"]["template"]["metadata"]["labels"]
    admin = c["args"][c["args"].index("--admin-listen") + 1]
    admin_port = int(admin.rsplit(":", 1)[1])
    (port,) = [p for p in c["ports"] if p["containerPort"] == admin_port]
    # the annotations
    ann = dep["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true"
    assert int(ann["prometheus.io/port"]) == admin_port, (ann, admin)
    assert ann.get("prometheus.io/path", "/metrics") == "/metrics"
    # the PodMonitor
    pms = [d for _, d in all_docs() if d["kind"] == "PodMonitor"]
    assert pms, "no PodMonitor in deploy/*.yaml"
    for pm in pms:
        assert pm["spec"]["selector"]["matchLabels"].items() <= labels.items()
        (ep,) = pm["spec"]["podMetricsEndpoints"]
        assert ep["port"] == port["name"] and ep.get("path", "/metrics") == "/metrics", ep
    # the rule: its series, the labels it needs, the name it serves
    m = re.fullmatch(r"(\w+)\{(.*)\}", rule["seriesQuery"])
    assert m, rule["seriesQuery"]
    needed = set(re.findall(r"(\w+)!?=~?", m.group(2))) | set(rule["resources"]["overrides"])
    assert needed <= PODMONITOR_LABELS and needed <= ANNOTATION_JOB_LABELS, needed
    assert {"namespace", "pod"} <= set(rule["resources"]["overrides"])
    hpa = docs()["HorizontalPodAutoscaler"]
    served = re.sub(rule["name"]["matches"], rule["name"]["as"], m.group(1))
    assert served == hpa["spec"]["metrics"][0]["pods"]["metric"]["name"], served
    # the series exists under that name, with the pool the metricsQuery selects
    assert 'pool="default"' in rule["metricsQuery"]
    text = get(server.port, "/metrics").body.decode()
    assert re.search(r'^%s\{pool="default"\} [0-9.]+$' % m.group(1), text, re.M), m.group(1)
