"""The example modules of modules/, loaded by the real server from a configuration: upper (the
docs/MODULES.md worked example) and thumbnail (libvips). Images are generated here (a PPM
written by Python, converted by the `vips` command), and answers decoded with `vipsheader`."""

import os
import subprocess

import pytest

from conftest import LAGLESS_BIN, REPO_ROOT, Server, request

MODULES = os.environ.get("LAGLESS_MODULES") or os.path.join(REPO_ROOT, "build", "modules")


def module(name):
    """The built module's path; a test run by make (LAGLESS_MODULES set) fails without it, a
    hand-run one is skipped."""
    path = os.path.join(MODULES, name + ".so")
    if not os.path.isfile(path):
        if os.environ.get("LAGLESS_MODULES"):
            pytest.fail("%s missing although LAGLESS_MODULES is set" % path)
        pytest.skip("%s not built (make modules)" % path)
    return path


def config(extra=""):
    return """\
[module upper]
path = %s

[module thumbnail]
path = %s

[route /upper]
methods = POST
kind = upper.upper
max_len = 64K

[route /lower]
methods = POST
kind = upper.lower

[route /thumbnail]
methods = POST
kind = thumbnail.thumbnail
width = 160

[route /thumb-webp]
methods = POST
kind = thumbnail.thumbnail
width = 50
height = 40
format = webp
max_pixels = 1000000
%s""" % (module("upper"), module("thumbnail"), extra)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    if LAGLESS_BIN is None:
        pytest.skip("lagless binary missing")
    work = tmp_path_factory.mktemp("modules")
    conf = work / "lagless.conf"
    conf.write_text(config())
    s = Server(["--compute-workers", "2", "-c", str(conf)], workdir=str(work))
    yield s
    s.kill_all()
    crashes = s.crash_reports()
    assert not crashes, "server log shows a crash or sanitizer report: %r" % crashes[:10]


def post(port, path, body, timeout=60):
    return request(port, "POST", path, body=body,
                   headers={"Content-Length": str(len(body))}, timeout=timeout)


def ctype(r):
    return (r.header("content-type") or "").split(";")[0].strip()


# ------------------------------------------------------------------------------------ upper


@pytest.mark.timeout(30)
def test_upper_and_lower(srv):
    r = post(srv.port, "/upper", b"hello, World 42")
    assert r.status == 200 and r.body == b"HELLO, WORLD 42", r
    assert ctype(r) == "text/plain"
    assert post(srv.port, "/upper?skip=7", b"hello, world").body == b"hello, WORLD"
    assert post(srv.port, "/lower", b"MiXeD \xff BYTES").body == b"mixed \xff bytes"
    assert post(srv.port, "/upper", b"").body == b""


@pytest.mark.timeout(30)
def test_upper_refusals(srv):
    r = post(srv.port, "/upper?skip=99", b"short")
    assert r.status == 400 and b"skip must be an integer" in r.body, r
    r = post(srv.port, "/upper", b"x" * (64 * 1024 + 1))  # over the route's max_len
    assert r.status == 413, r
    assert post(srv.port, "/upper", b"x" * (64 * 1024)).status == 200


@pytest.mark.timeout(30)
def test_check_refuses_an_unknown_route_key(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text(config("\n[route /typo]\nmethods = POST\nkind = upper.upper\nmax_lem = 1K\n"))
    p = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=20)
    assert p.returncode == 1, p
    err = p.stderr.decode() + p.stdout.decode()
    assert "max_lem" in err and str(conf) in err, err


# -------------------------------------------------------------------------------- thumbnail


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """A 640x480 gradient as JPEG, PNG and WebP, plus a 2000x1000 JPEG and a TIFF (a format
    libvips reads but the kind refuses)."""
    d = tmp_path_factory.mktemp("images")

    def ppm(path, w, h):
        rows = bytearray()
        for y in range(h):
            for x in range(w):
                rows += bytes((x * 255 // w, y * 255 // h, (x + y) * 127 // (w + h)))
        path.write_bytes(b"P6 %d %d 255\n" % (w, h) + bytes(rows))

    ppm(d / "src.ppm", 640, 480)
    ppm(d / "wide.ppm", 2000, 1000)
    out = {}
    for name, src in (("jpg", "src"), ("png", "src"), ("webp", "src"), ("tif", "src"),
                      ("wide.jpg", "wide")):
        dst = d / ("img." + name)
        subprocess.run(["vips", "copy", str(d / (src + ".ppm")), str(dst)], check=True,
                       timeout=60)
        out[name] = dst.read_bytes()
    return out


def header(data, tmp_path, name):
    """(width, height, loader) of an image, read back by vipsheader."""
    path = tmp_path / name
    path.write_bytes(data)
    fields = []
    for f in ("width", "height", "vips-loader"):
        p = subprocess.run(["vipsheader", "-f", f, str(path)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        assert p.returncode == 0, p.stderr
        fields.append(p.stdout.decode().strip())
    return int(fields[0]), int(fields[1]), fields[2]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fmt", ["jpg", "png", "webp"])
def test_thumbnail_from_each_format(srv, images, tmp_path, fmt):
    r = post(srv.port, "/thumbnail", images[fmt])
    assert r.status == 200, r
    assert ctype(r) == "image/jpeg"
    # 640x480 fitted into the route's 160 wide box (height defaults to the width)
    assert header(r.body, tmp_path, "t.jpg") == (160, 120, "jpegload")


@pytest.mark.timeout(60)
def test_thumbnail_query_over_route(srv, images, tmp_path):
    r = post(srv.port, "/thumbnail?width=64&height=64&format=webp", images["wide.jpg"])
    assert r.status == 200 and ctype(r) == "image/webp", r
    assert header(r.body, tmp_path, "q.webp") == (64, 32, "webpload")
    r = post(srv.port, "/thumb-webp", images["png"])
    assert r.status == 200 and ctype(r) == "image/webp", r
    assert header(r.body, tmp_path, "r.webp") == (50, 38, "webpload")


@pytest.mark.timeout(60)
def test_thumbnail_never_enlarges(srv, images, tmp_path):
    """Regression (hostile trial): a 640x480 image asked for 16384x16384 came back enlarged to
    16384x12288 (a 1x1 PNG to 268 megapixels, past max_pixels, holding a compute process for
    seconds). A thumbnail only shrinks."""
    r = post(srv.port, "/thumbnail?width=16384&height=16384", images["png"])
    assert r.status == 200, r
    assert header(r.body, tmp_path, "big.jpg") == (640, 480, "jpegload")


@pytest.mark.timeout(60)
def test_thumbnail_refusals(srv, images):
    assert post(srv.port, "/thumbnail", b"not an image at all").status == 400
    assert post(srv.port, "/thumbnail", images["tif"]).status == 400
    assert post(srv.port, "/thumbnail", images["jpg"][:200]).status == 400
    assert post(srv.port, "/thumbnail?format=gif", images["jpg"]).status == 400
    assert post(srv.port, "/thumbnail?width=0", images["jpg"]).status == 400
    # 2000x1000 is over /thumb-webp's max_pixels of a million, refused from the header
    r = post(srv.port, "/thumb-webp", images["wide.jpg"])
    assert r.status == 413 and b"pixels" in r.body, r
    assert post(srv.port, "/thumbnail", images["jpg"]).status == 200
