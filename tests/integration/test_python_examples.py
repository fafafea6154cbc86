"""The Python examples (examples/python/), served by the real server from their own
configuration (examples/python/lagless.conf with the built module's and the example package's
absolute paths): the background article's CPU workload, a Pillow thumbnail, a CSV and a JSON
aggregation."""

import io
import json
import os
import re

import pytest

from conftest import LAGLESS_BIN, REPO_ROOT, Server, request

MODULES = os.environ.get("LAGLESS_MODULES") or os.path.join(REPO_ROOT, "build", "modules")
EXAMPLES = os.path.join(REPO_ROOT, "examples", "python")


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    if LAGLESS_BIN is None:
        pytest.skip("lagless binary missing")
    so = os.path.join(MODULES, "python.so")
    if not os.path.isfile(so):
        if os.environ.get("LAGLESS_MODULES"):
            pytest.fail("%s missing although LAGLESS_MODULES is set" % so)
        pytest.skip("python.so not built")
    text = open(os.path.join(EXAMPLES, "lagless.conf")).read()
    text = re.sub(r"(?m)^path = .*$", "path = " + so, text)
    text = re.sub(r"(?m)^python_path = .*$", "python_path = " + EXAMPLES, text)
    work = tmp_path_factory.mktemp("pyexamples")
    conf = work / "lagless.conf"
    conf.write_text(text)
    s = Server(["--compute-workers", "1", "-c", str(conf)], workdir=str(work), start_timeout=30)
    yield s
    s.kill_all()
    crashes = s.crash_reports()
    assert not crashes, crashes[:10]


def post(port, path, body=b"", timeout=60):
    return request(port, "POST", path, body=body,
                   headers={"Content-Length": str(len(body))}, timeout=timeout)


@pytest.mark.timeout(60)
def test_cpu_workload(srv):
    n = 100_000
    r = post(srv.port, "/compute?iterations=%d" % n)
    assert r.status == 200 and r.header("content-type") == "application/json", r
    doc = r.json()
    assert doc["result"] == (n - 1) * n * (2 * n - 1) // 6 and doc["duration_ms"] >= 0, doc
    assert post(srv.port, "/compute?iterations=x").status == 400
    assert post(srv.port, "/compute?iterations=-1").status == 400


@pytest.mark.timeout(60)
def test_pillow_thumbnail(srv):
    Image = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    Image.new("RGB", (640, 480), (200, 30, 30)).save(buf, "PNG")
    r = post(srv.port, "/thumbnail?width=160", buf.getvalue())
    assert r.status == 200 and r.header("content-type") == "image/jpeg", r
    img = Image.open(io.BytesIO(r.body))
    assert img.format == "JPEG" and img.size == (160, 120), (img.format, img.size)
    r = post(srv.port, "/thumbnail", b"not an image")
    assert r.status == 400 and r.body.startswith(b"not an image this route takes"), r
    assert post(srv.port, "/thumbnail?width=0", buf.getvalue()).status == 400


@pytest.mark.timeout(60)
def test_csv_and_json_aggregation(srv):
    csv = b"region,amount\nnorth,2\nsouth,3.5\nnorth,5\n"
    r = post(srv.port, "/report?by=region&sum=amount", csv)
    assert r.status == 200, r
    assert r.json()["groups"] == {"north": {"count": 2, "sum": 7.0},
                                  "south": {"count": 1, "sum": 3.5}}, r.body
    r = post(srv.port, "/report?by=city&sum=amount", csv)
    assert r.status == 400 and b"no column 'city'" in r.body, r
    r = post(srv.port, "/summary", json.dumps([1, 2, 3.5]).encode())
    assert r.status == 200 and r.json() == {"count": 3, "sum": 6.5, "min": 1, "max": 3.5,
                                            "mean": 6.5 / 3}, r.body
    assert post(srv.port, "/summary", b"[1, \"two\"]").status == 400
