"""Regression (issue 18, section 3): a rule without query= keyed a kind's own parameters away
(/compress?codec=gzip returned the zstd body cached for codec=zstd, /heavy?iterations=7 got
iterations=5's answer), a header field the route hands the kind was not in the key either
(one user's answer for another), and Proxy-Authorization was not taken for a credential. The
key now holds every query parameter the kind reads (a module kind's rule must name them) and
every field of the route; lagless -t prints what each key is made of."""
import os
import subprocess

import pytest

from conftest import LAGLESS_BIN, get, request

ZSTD_MAGIC, GZIP_MAGIC = b"\x28\xb5\x2f\xfd", b"\x1f\x8b"


def check(*args):
    p = subprocess.run([LAGLESS_BIN, "-t"] + list(args), capture_output=True, text=True,
                       timeout=30)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.timeout(60)
def test_builtin_kinds_parameters_are_in_the_key(start_server):
    srv = start_server("--compute-workers", "1", "--cache-jitter-pct", "0", "--coalesce",
                       "/compress ttl=60000; /heavy ttl=60000")
    body = b"lagless " * 512
    z = request(srv.port, "POST", "/compress?codec=zstd", body=body)
    assert z.status == 200 and z.body.startswith(ZSTD_MAGIC), z
    g = request(srv.port, "POST", "/compress?codec=gzip", body=body)
    assert g.status == 200 and g.body.startswith(GZIP_MAGIC), g
    assert g.header("X-Cache") == "miss", g
    l1 = request(srv.port, "POST", "/compress?codec=gzip&level=1", body=body)
    assert l1.header("X-Cache") == "miss", l1
    assert request(srv.port, "POST", "/compress?codec=gzip", body=body).header("X-Cache") == "hit"
    five = get(srv.port, "/heavy?iterations=5")
    seven = get(srv.port, "/heavy?iterations=7")
    assert five.json()["iterations"] == 5 and seven.json()["iterations"] == 7, (five, seven)
    # a parameter the kind does not read still does not split the key
    assert get(srv.port, "/heavy?iterations=7&utm=x").header("X-Cache") == "hit"


@pytest.mark.timeout(60)
def test_route_fields_are_in_the_key(start_server, tmp_path):
    conf = tmp_path / "site.conf"
    conf.write_text("[route /who]\nkind = test-sleep\nmethods = GET\nfields = x-user\n"
                    "ttl_ms = 60000\n")
    srv = start_server("-c", str(conf), "--enable-test-jobs", "1", "--cache-jitter-pct", "0")
    a = request(srv.port, "GET", "/who?ms=1&echo=1", headers={"X-User": "alice"})
    b = request(srv.port, "GET", "/who?ms=1&echo=1", headers={"X-User": "bob"})
    assert a.status == 200 and a.body.endswith(b"x-user=alice\n"), a
    assert b.status == 200 and b.body.endswith(b"x-user=bob\n"), b
    again = request(srv.port, "GET", "/who?ms=1&echo=1", headers={"X-User": "alice"})
    assert again.header("X-Cache") == "hit" and again.body == a.body, again


@pytest.mark.timeout(60)
def test_proxy_authorization_is_a_credential(start_server):
    srv = start_server("--compute-workers", "1", "--cache-jitter-pct", "0", "--coalesce",
                       "/heavy ttl=60000")
    path = "/heavy?iterations=1000"
    assert get(srv.port, path).header("X-Cache") == "miss"
    r = request(srv.port, "GET", path, headers={"Proxy-Authorization": "Basic YTpi"})
    assert r.status == 200 and r.header("X-Cache") == "bypass", r
    # with credentials=key, two users never share
    srv = start_server("--compute-workers", "1", "--cache-jitter-pct", "0", "--coalesce",
                       "/heavy ttl=60000 credentials=key")
    a = request(srv.port, "GET", path, headers={"Proxy-Authorization": "Basic YTpi"})
    b = request(srv.port, "GET", path, headers={"Proxy-Authorization": "Basic Yzpk"})
    assert a.header("X-Cache") == "miss" and b.header("X-Cache") == "miss", (a, b)


@pytest.mark.timeout(60)
def test_module_kind_rule_must_name_its_query_and_t_shows_keys(tmp_path):
    # a module of ABI 1.0: its kind cannot declare its query arguments (a 1.1 kind that does,
    # modules/upper, needs no key_query: tests/integration/test_abi11.py)
    mods = os.environ.get("LAGLESS_TEST_MODULES", "")
    upper = os.path.join(mods, "abi10_upper.so")
    if not os.path.exists(upper):
        pytest.skip("test modules not built")
    conf = tmp_path / "site.conf"
    head = "[module abi10]\npath = %s\n\n[route /up]\nkind = abi10.upper\nmethods = POST\n" % upper
    conf.write_text(head + "ttl_ms = 1000\n")
    rc, out = check("-c", str(conf))
    assert rc != 0 and "%s:7: route /up: kind abi10.upper is a module's" % conf in out, out
    assert "key_query" in out, out
    conf.write_text(head + "fields = x-lang\nttl_ms = 1000\nkey_query = skip\n")
    rc, out = check("-c", str(conf), "--coalesce", "/compress; /heavy headers=accept")
    assert rc == 0, out
    lines = out.splitlines()

    def key_of(route):
        i = [n for n, l in enumerate(lines) if l.startswith(route + " ")][0]
        assert lines[i + 1].startswith("    key: "), lines[i:i + 2]
        return lines[i + 1]

    assert "query skip, headers x-lang" in key_of("/up"), key_of("/up")
    assert "query codec,level" in key_of("/compress"), key_of("/compress")
    assert "query iterations, headers accept" in key_of("/heavy"), key_of("/heavy")
