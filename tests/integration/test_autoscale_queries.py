"""The autoscaling manifests' PromQL against a real Prometheus (Debian's /usr/bin/prometheus,
loopback, its own storage directory, scrape_interval 1s) scraping three replicas while the
offered load steps 0.5x -> 1x -> 3x their capacity (issue 21): the KEDA query rises >= 2.5x
from the second step to the third while utilisation stays <= 1, and the HPA formula asks for
>= 3x the replicas. The job kind is test-sleep (no CPU): capacity is 1 process / 100 ms."""
import concurrent.futures
import json
import math
import os
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from conftest import REPO_ROOT, free_port, get, wait_until
from haproxy_rig import Replica

PROMETHEUS = "/usr/bin/prometheus"
JOB_MS = 100
CAPACITY = 1000 / JOB_MS  # jobs/s of a replica with one compute process

pytestmark = pytest.mark.skipif(not os.access(PROMETHEUS, os.X_OK), reason="no prometheus")


def manifests():
    """The KEDA ScaledObject, the HPA of deploy/kubernetes.yaml and the prometheus-adapter
    rule (a comment block of deploy/prometheus-adapter.yaml)."""
    keda = yaml.safe_load(open(os.path.join(REPO_ROOT, "deploy", "keda", "scaledobject.yaml")))
    with open(os.path.join(REPO_ROOT, "deploy", "kubernetes.yaml")) as f:
        (hpa,) = [d for d in yaml.safe_load_all(f) if d and d["kind"] == "HorizontalPodAutoscaler"]
    return keda, hpa, adapter_rule()


def adapter_rule():
    text = open(os.path.join(REPO_ROOT, "deploy", "prometheus-adapter.yaml")).read()
    rule = yaml.safe_load("\n".join(line[1:] for line in text.splitlines()
                                    if line.startswith("#   ") or line.startswith("#     ")))
    return rule[0]


class Prometheus:
    def __init__(self, tmp, ports):
        self.port = free_port()
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: lagless\n    static_configs:\n"
                    "      - targets: [%s]\n" % ", ".join("'127.0.0.1:%d'" % p for p in ports))
        self.log = open(os.path.join(tmp, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file", cfg, "--storage.tsdb.path", os.path.join(tmp, "data"),
             "--web.listen-address", "127.0.0.1:%d" % self.port],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

    def query(self, q):
        """The instant vector of q as a list of floats ([] when empty)."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (self.port, urllib.parse.urlencode({"query": q}))
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return [float(s["value"][1]) for s in doc["data"]["result"]]

    def up(self, n):
        try:
            return len([v for v in self.query("up") if v == 1]) == n
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


class OpenLoop(threading.Thread):
    """Sends GET /test/sleep?ms=JOB_MS to every port at `rate` requests/s each (open loop: on a
    schedule, whatever the answers), from a pool of threads."""

    def __init__(self, ports):
        super().__init__(daemon=True)
        self.ports, self.rate, self.halt = ports, 0.0, threading.Event()
        self.pool = concurrent.futures.ThreadPoolExecutor(64)

    def one(self, port):
        try:
            get(port, "/test/sleep?ms=%d" % JOB_MS, timeout=10)
        except OSError:
            pass

    def run(self):
        t = time.monotonic()
        while not self.halt.is_set():
            if self.rate <= 0:
                time.sleep(0.05)
                t = time.monotonic()
                continue
            t += 1.0 / self.rate
            delay = t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            for p in self.ports:
                self.pool.submit(self.one, p)

    def stop(self):
        self.halt.set()
        self.join(10)
        self.pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.timeout(180)
def test_scaler_queries_rise_past_saturation(tmp_path):
    keda, hpa, rule = manifests()
    offered_q = keda["spec"]["triggers"][0]["metadata"]["query"]
    threshold = float(keda["spec"]["triggers"][0]["metadata"]["threshold"])
    shed_q = keda["spec"]["triggers"][1]["metadata"]["query"]
    target = float(hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"].rstrip("m")) / 1000
    adapter_q = (rule["metricsQuery"].replace("<<.Series>>", "lagless_offered_load")
                 .replace("<<.LabelMatchers>>", 'job="lagless"').replace("<<.GroupBy>>", "instance"))
    utilisation_q = ('sum(lagless_pool_processes{pool="default",state="active"}) / '
                     'sum(lagless_pool_processes{pool="default"})')
    reps = [Replica(str(tmp_path / ("r%d" % i)), compute=1, queue=1, agent=False)
            for i in range(3)]
    prom, load = None, None
    try:
        for r in reps:
            r.start()
        prom = Prometheus(str(tmp_path), [r.port for r in reps])
        assert wait_until(lambda: prom.up(3), 60), "prometheus never scraped the replicas"
        load = OpenLoop([r.port for r in reps])
        load.start()
        seen = {}
        for step, factor in (("half", 0.5), ("full", 1.0), ("triple", 3.0)):
            load.rate = factor * CAPACITY
            time.sleep(10)  # three time constants of the smoothing, plus scrapes
            seen[step] = sum(prom.query(offered_q))
            if step == "triple":
                util = prom.query(utilisation_q)
                shed = prom.query(shed_q)
                adapter = prom.query(adapter_q)
                busy_metrics = min(timed_metrics(reps[0].port) for _ in range(5))
        assert 0.8 < seen["full"] / (3 * 1.0) < 1.5, seen
        assert seen["triple"] >= 2.5 * seen["full"], seen
        assert seen["full"] > 1.3 * seen["half"], seen
        assert util and util[0] <= 1.0, util
        assert shed and shed[0] > 0.2, shed  # two thirds refused at 3x
        desired = math.ceil(seen["triple"] / threshold)
        assert desired >= 3 * len(reps), (desired, seen)
        assert len(adapter) == 3
        assert math.ceil(sum(adapter) / target) >= 3 * len(reps), adapter
        assert busy_metrics < 0.05, busy_metrics
    finally:
        if load is not None:
            load.stop()
        if prom is not None:
            prom.stop()
        for r in reps:
            r.stop()


def timed_metrics(port):
    t0 = time.monotonic()
    assert get(port, "/metrics").status == 200
    return time.monotonic() - t0
