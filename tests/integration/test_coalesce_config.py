"""Coalescing rules as keys of [route] sections (docs/CACHE.md): the same rule as a --coalesce
rule, from the configuration file, with errors naming the file, line and key. Key equality is
seen through the TTL cache (a repeat is a hit exactly when its key is equal)."""

import os
import subprocess

import pytest

from conftest import LAGLESS_BIN, metric, request


def check(*args):
    p = subprocess.run([LAGLESS_BIN, "-t"] + list(args), capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.timeout(60)
def test_route_keys_make_the_rule(start_server, tmp_path):
    conf = tmp_path / "site.conf"
    conf.write_text("""
[route /echo]
kind = test-sleep
methods = POST
fields = content-type
coalesce = on
ttl_ms = 60000
key_query = ms, echo
key_headers = X-Tenant
key_body_max = 4K
""")
    srv = start_server("-c", str(conf), "--enable-test-jobs", "1", "--cache-jitter-pct", "0")

    def post(path, body=b"b", tenant="a"):
        return request(srv.port, "POST", path, body=body,
                       headers={"Content-Type": "text/plain", "X-Tenant": tenant})

    a = post("/echo?ms=1&echo=1")
    assert a.status == 200 and a.header("X-Cache") == "miss", a
    assert a.body.endswith(b"content-type=text/plain\nb"), a
    # a parameter not in key_query does not split the key; one in it does
    assert post("/echo?ms=1&echo=1&other=2").header("X-Cache") == "hit"
    assert post("/echo?ms=2&echo=1").header("X-Cache") == "miss"
    # a header in key_headers splits it
    assert post("/echo?ms=1&echo=1", tenant="b").header("X-Cache") == "miss"
    assert post("/echo?ms=1&echo=1", tenant="b").header("X-Cache") == "hit"
    # key_body_max: 4 KiB is keyed, one byte more runs alone, uncached
    assert post("/echo?ms=1", body=b"z" * 4096).header("X-Cache") == "miss"
    assert post("/echo?ms=1", body=b"z" * 4096).header("X-Cache") == "hit"
    assert post("/echo?ms=1", body=b"z" * 4097).header("X-Cache") == "bypass"
    assert metric(srv.port, "lagless_cache_hits_total") == 3


@pytest.mark.timeout(60)
def test_route_keys_are_not_given_to_the_kind_and_show_in_t(tmp_path):
    # the decompress kind's check hook refuses keys it does not know: ttl_ms must not reach it
    conf = tmp_path / "dec.conf"
    conf.write_text("[route /decompress]\nkind = decompress\nttl_ms = 1000\nstale_ms = 500\n")
    rc, out = check("-c", str(conf))
    assert rc == 0, out
    line = [l for l in out.splitlines() if l.startswith("/decompress ")][0]
    assert "coalesce on, ttl_ms 1000, stale_ms 500" in line, line
    conf.write_text("[route /decompress]\nkind = decompress\nmax_output = 8K\nnot_a_key = 1\n")
    rc, out = check("-c", str(conf))
    assert rc != 0 and "not_a_key" in out, out


BAD = [
    ("[route /heavy]\nkind = heavy\nttl_ms = soon\n", 3, "ttl_ms", "milliseconds"),
    ("[route /heavy]\nkind = heavy\n\ncoalesce = maybe\n", 4, "coalesce",
     "yes, no, true, false, on, off, 1 or 0"),
    ("[route /heavy]\nkind = heavy\ncredentials = share\n", 3, "credentials", "bypass or key"),
    ("[route /heavy]\nkind = heavy\nkey_body_max = 1G\n", 3, "key_body_max", "at most 64M"),
    ("[route /heavy]\nkind = heavy\nkey_query = " + ",".join("p%d" % i for i in range(9)) + "\n",
     3, "key_query", "at most 8"),
    ("[route /p]\nhandler = ping\nttl_ms = 100\n", 3, "ttl_ms", "loop handler"),
    ("[route /heavy]\nkind = heavy\nwhere = loop\nstale_ms = 100\n", 4, "stale_ms", "where = loop"),
    # an upstream route's key holds the whole query string and no body (docs/CACHE.md)
    ("[upstream app]\nserver = 127.0.0.1:9\n\n[route /api*]\nupstream = app\nttl_ms = 10\n"
     "key_query = a\n", 7, "key_query", "whole query string"),
    ("[upstream app]\nserver = 127.0.0.1:9\n\n[route /api*]\nupstream = app\n"
     "key_body_max = 1K\n", 6, "key_body_max", "GET and HEAD only"),
    # path_share: a whole percent of the cache's entries, 0 to 100
    ("[route /heavy]\nkind = heavy\npath_share = 101\n", 3, "path_share", "0 (no bound) to 100"),
    ("[route /heavy]\nkind = heavy\npath_share = -1\n", 3, "path_share", "whole percent"),
    ("[upstream app]\nserver = 127.0.0.1:9\n\n[route /api*]\nupstream = app\n"
     "path_share = 25%\n", 6, "path_share", "whole percent"),
]


@pytest.mark.timeout(30)
def test_upstream_route_rule_shows_its_key_in_t(tmp_path):
    conf = tmp_path / "up.conf"
    conf.write_text("[upstream app]\nserver = 127.0.0.1:9\n\n[route /api*]\nupstream = app\n"
                    "ttl_ms = 5000\nnegative_ttl_ms = 1000\nkey_headers = Accept\n")
    rc, out = check("-c", str(conf))
    assert rc == 0, out
    lines = out.splitlines()
    i = [n for n, l in enumerate(lines) if l.startswith("/api* ")][0]
    assert "coalesce on, ttl_ms 5000" in lines[i], lines[i]
    assert lines[i + 1].strip().startswith(
        "key: method (HEAD as GET), path, the whole query string, headers accept"), lines[i + 1]
    assert "other methods: not coalesced" in lines[i + 1], lines[i + 1]


@pytest.mark.timeout(30)
def test_upstream_route_takes_the_cluster_scope(tmp_path):
    # scope = cluster on an upstream route (issue 37 item 5): taken, printed by -t, and warned
    # as local without --redis, as for a kind's rule
    conf = tmp_path / "up.conf"
    conf.write_text("[upstream app]\nserver = 127.0.0.1:9\n\n[route /api*]\nupstream = app\n"
                    "ttl_ms = 5000\nscope = cluster\n")
    rc, out = check("-c", str(conf))
    assert rc == 0, out
    line = [l for l in out.splitlines() if l.startswith("/api* ")][0]
    assert "coalesce on, ttl_ms 5000" in line and ", scope cluster" in line, line
    assert "has scope = cluster and no --redis is set" in out, out


@pytest.mark.timeout(30)
def test_path_share_defaults_and_shows_in_t(tmp_path):
    # an upstream route's keys hold any query string: 25 by default; a kind route's only its
    # declared parameters: 0 (no bound); either takes the key, and the --coalesce word
    conf = tmp_path / "share.conf"
    conf.write_text("[upstream app]\nserver = 127.0.0.1:9\n\n[route /api*]\nupstream = app\n"
                    "ttl_ms = 5000\n\n[route /up2*]\nupstream = app\nttl_ms = 5000\n"
                    "path_share = 0\n\n[route /heavy]\nkind = heavy\nmethods = GET\n"
                    "ttl_ms = 1000\n\n[route /compress]\nkind = compress\nttl_ms = 1000\n"
                    "path_share = 100\n")
    rc, out = check("-c", str(conf))
    assert rc == 0, out

    def line(prefix):
        return [l for l in out.splitlines() if l.startswith(prefix + " ")][0]
    assert "stale_ms 0, path_share 25" in line("/api*"), out
    assert "path_share 0" in line("/up2*"), out
    assert "path_share 0" in line("/heavy"), out
    assert "path_share 100" in line("/compress"), out
    rc, out = check("--coalesce", "/heavy ttl=5 path-share=10")
    assert rc == 0 and "path_share 10" in line("/heavy"), out
    rc, out = check("--coalesce", "/heavy ttl=5 path-share=200")
    assert rc != 0 and "path-share=200" in out, out


@pytest.mark.parametrize("text,line,key,why", BAD)
def test_bad_route_keys_name_file_line_and_key(tmp_path, text, line, key, why):
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    rc, out = check("-c", str(conf))
    assert rc != 0, out
    assert "%s:%d: key '%s'" % (conf, line, key) in out and why in out, out


@pytest.mark.timeout(30)
def test_coalesce_flag_and_route_keys_are_one_table(tmp_path):
    conf = tmp_path / "site.conf"
    conf.write_text("[route /heavy]\nkind = heavy\nmethods = GET\nttl_ms = 1000\n")
    # one route, one rule, from one place
    rc, out = check("-c", str(conf), "--coalesce", "/heavy ttl=5")
    assert rc != 0 and "has coalescing keys of its own (%s:4)" % conf in out, out
    # a rule must name a route that runs a kind
    rc, out = check("--coalesce", "/nowhere ttl=5")
    assert rc != 0 and "coalesce rule /nowhere" in out, out
    rc, out = check("--coalesce", "/ping ttl=5")
    assert rc != 0 and "coalesce rule /ping" in out, out
    # the flag still works, and -t shows the rule it gave the route
    rc, out = check("--coalesce", "/heavy ttl=5 stale=7")
    assert rc == 0, out
    assert "coalesce on, ttl_ms 5, stale_ms 7" in [l for l in out.splitlines()
                                                   if l.startswith("/heavy ")][0], out
    env = dict(os.environ, LAGLESS_COALESCE="/compress coalesce=off")
    p = subprocess.run([LAGLESS_BIN, "-t"], capture_output=True, text=True, timeout=30, env=env)
    assert p.returncode == 0 and "coalesce off" in [l for l in p.stdout.splitlines()
                                                     if l.startswith("/compress ")][0], p.stdout
