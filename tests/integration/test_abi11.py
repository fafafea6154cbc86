"""Module ABI 1.1: declared query arguments are checked on the loop worker before the job takes
a slot (a bad one is a 400 at once, whatever the pool's state), declared route keys are parsed
once at start-up / -t (errors name the file, line and key), and a module of ABI 1.0 still loads
and runs unchanged."""

import os
import subprocess
import time

import pytest

from conftest import (LAGLESS_BIN, Call, get, heavy_iterations_for, heavy_result, job_slots,
                      request, wait_jobs)

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")
LONG_JOB_S = 3.0
# A 400 from the loop takes microseconds; this bound only says "not queued behind a job of
# LONG_JOB_S seconds", with room for ASan and a loaded 2-core machine.
QUICK_S = 1.5


def mod(name):
    path = os.path.join(MODS, name + ".so")
    if not os.path.isfile(path):
        pytest.skip("%s not built (make integration builds the test modules)" % path)
    return path


def check_400(r, word):
    assert r.status == 400, r
    assert word.encode() in r.body, r.body
    assert r.header("retry-after") is None, r.headers


@pytest.mark.timeout(150)
def test_bad_query_is_400_at_once_while_the_pool_and_queue_are_full(start_server):
    srv = start_server("--compute-workers", "1", "--queue", "1", "--deadline-ms", "120000")
    n = heavy_iterations_for(srv.port, LONG_JOB_S)
    url = "/heavy?iterations=%d" % n
    a = Call(get, srv.port, url, timeout=120)
    a.start()
    assert wait_jobs(srv.port, running=1, queued=0, timeout=30), job_slots(srv.port)
    b = Call(get, srv.port, url, timeout=120)
    b.start()
    assert wait_jobs(srv.port, running=1, queued=1, timeout=30), job_slots(srv.port)

    for path, word in (("/heavy?iterations=abc", "iterations"),
                       ("/heavy?iterations=-1", "iterations"),
                       ("/heavy?iterations=1000000000001", "iterations"),   # over 10^12
                       ("/heavy?iterations=%41", "iterations")):   # "A"
        t0 = time.monotonic()
        r = get(srv.port, path, timeout=30)
        elapsed = time.monotonic() - t0
        check_400(r, word)
        assert elapsed < QUICK_S, "400 for %s took %.3f s" % (path, elapsed)
    # a body is read and dropped; the connection stays usable
    r = request(srv.port, "POST", "/compress?codec=brotli", body=b"x" * 1000, timeout=30)
    check_400(r, "codec")
    check_400(request(srv.port, "POST", "/compress?level=99", body=b"x", timeout=30), "level")
    check_400(request(srv.port, "POST", "/decompress?codec=lz4", body=b"x", timeout=30), "codec")

    # still full: a good request is still refused (the check above ran before admission)
    assert a.is_alive() or b.is_alive(), "long jobs finished during the checks"
    assert get(srv.port, "/heavy?iterations=1", timeout=30).status == 503
    for c in (a.get(110), b.get(110)):
        assert c.status == 200 and c.json()["result"] == heavy_result(n), c
    # a declared argument in range, percent-encoded digits included, runs
    r = get(srv.port, "/heavy?iterations=%31%30", timeout=30)
    assert r.status == 200 and r.json()["iterations"] == 10, r


@pytest.mark.timeout(60)
def test_bad_query_on_a_loop_route_and_a_good_one(start_server):
    srv = start_server("--compute-workers", "1", "--inline-heavy")
    check_400(get(srv.port, "/heavy?iterations=1e6"), "iterations")
    r = get(srv.port, "/heavy?iterations=1000&other=anything")   # undeclared: passed through
    assert r.status == 200 and r.json()["result"] == heavy_result(1000), r


ABI10_CONF = """
[module abi10]
path = {path}

[route /a10]
methods = POST
kind = abi10.upper
prefix = >

[route /a10-loop]
methods = POST
kind = abi10.upper
where = loop
"""


# abi10_upper: the 1.0 source built against the frozen 1.0 header (a 1.0 binary loads);
# src10_upper: the same source against today's header (a 1.0 source, with ABI 1.0's positional
# LAGLESS_MODULE_HOOKS, still compiles: ABI 1.2).
@pytest.mark.timeout(60)
@pytest.mark.parametrize("built", ["abi10_upper", "src10_upper"])
def test_a_module_of_abi_1_0_loads_and_runs(start_server, tmp_path, built):
    conf = tmp_path / "a10.conf"
    conf.write_text(ABI10_CONF.format(path=mod(built)))
    p = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert b"module abi10 1.0.0" in p.stdout, p.stdout
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    r = request(srv.port, "POST", "/a10?skip=2", body=b"hello")
    assert r.status == 200 and r.body == b">heLLO", r
    r = request(srv.port, "POST", "/a10-loop", body=b"abc")
    assert r.status == 200 and r.body == b"ABC", r
    # no declaration: the host passes the query through and the kind's own 400 answers
    r = request(srv.port, "POST", "/a10?skip=x", body=b"abc")
    assert r.status == 400 and b"abi10: skip must be" in r.body, r
    # its check hook still sees the route keys the host does not know
    bad = tmp_path / "bad.conf"
    bad.write_text(ABI10_CONF.format(path=mod(built)) + "typo = 1\n")
    p = subprocess.run([LAGLESS_BIN, "-t", "-c", str(bad)], capture_output=True, timeout=30)
    assert p.returncode == 1 and b"unknown key typo" in p.stderr, p.stderr


EXAMPLES = os.environ.get("LAGLESS_MODULES", "")


def example(name):
    path = os.path.join(EXAMPLES, name + ".so")
    if not os.path.isfile(path):
        pytest.skip("%s not built (make modules)" % path)
    return path


UPPER_CONF = """[module upper]
path = {path}

[route /u]
methods = POST
kind = upper.upper
{key}
"""


@pytest.mark.timeout(60)
def test_declared_route_keys_are_parsed_once_at_t_with_file_line_and_key(tmp_path):
    cases = (("max_len = 1X", 7, "max_len", "K, M or G suffix"),
             ("max_len = 0", 7, "max_len", "from 1"),
             ("max_lem = 1K", 7, "max_lem", "unknown key"))
    for key, line, name, why in cases:
        conf = tmp_path / "u.conf"
        conf.write_text(UPPER_CONF.format(path=example("upper"), key=key))
        p = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=30)
        err = p.stderr.decode()
        assert p.returncode == 1, (key, err)
        assert str(conf) in err and "line %d" % line in err and name in err and why in err, err
    conf = tmp_path / "ok.conf"
    conf.write_text(UPPER_CONF.format(path=example("upper"), key="max_len = 16k"))
    p = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr


@pytest.mark.timeout(60)
def test_builtin_kinds_route_keys_are_declared_refused_at_t_with_file_line_and_key(tmp_path):
    """The built-in kinds' route keys go through the same declarations as a module's: a bad
    value, a key the kind does not take, and hash's memory under 8 KiB a lane are refused at
    -t with the file, the key's line and the key; good values pass."""
    cases = (("decompress", "max_output = 0", "max_output", "from 1"),
             ("decompress", "max_output = lots", "max_output", "K, M or G suffix"),
             ("decompress", "max_outptu = 1M", "max_outptu", "it takes: max_output"),
             ("hash", "memory_kib = 4", "memory_kib", "from 8 to 4194304"),
             ("hash", "iterations = 1001", "iterations", "from 1 to 1000"),
             ("hash", "memory_kib = 8\nlanes = 2", "memory_kib", "8 KiB a lane"),
             ("verify", "max_lanes = 65", "max_lanes", "from 1 to 64"),
             ("verify", "lanes = 2", "lanes", "it takes: max_memory_kib"),
             ("heavy", "iterations = 5", "iterations", "it takes: none"),
             ("compress", "level = 3", "level", "it takes: none"))
    conf = tmp_path / "b.conf"
    for kind, keys, name, why in cases:
        conf.write_text("[route /b]\nmethods = POST\nkind = %s\n\n%s\n" % (kind, keys))
        p = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=30)
        err = p.stderr.decode()
        assert p.returncode == 1, (kind, keys, err)
        assert str(conf) in err and "kind %s: line 5: key %s:" % (kind, name) in err, err
        assert why in err, err
    conf.write_text("[route /d]\nmethods = POST\nkind = decompress\nmax_output = 16M\n"
                    "[route /h]\nmethods = POST\nkind = hash\nmemory_kib = 64\nlanes = 8\n"
                    "[route /v]\nmethods = POST\nkind = verify\nmax_lanes = 2\n")
    p = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr


@pytest.mark.timeout(60)
def test_a_module_kinds_declared_query_and_route_keys_at_run_time(start_server, tmp_path):
    conf = tmp_path / "u.conf"
    conf.write_text(UPPER_CONF.format(path=example("upper"), key="max_len = 4"))
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    # the host's declared check: the reason names the argument
    check_400(request(srv.port, "POST", "/u?skip=abc", body=b"ab"), "skip: expected")
    # valid for the host, refused by the kind (more than the input)
    r = request(srv.port, "POST", "/u?skip=9", body=b"ab")
    assert r.status == 400 and b"skip must be" in r.body, r
    # the route struct reached the kind: max_len = 4
    assert request(srv.port, "POST", "/u?skip=1", body=b"abcd").body == b"aBCD"
    assert request(srv.port, "POST", "/u", body=b"abcde").status == 413


@pytest.mark.timeout(30)
def test_a_descriptor_string_outside_the_image_is_refused(tmp_path):
    conf = tmp_path / "l.conf"
    conf.write_text("[module liar]\npath = %s\n" % mod("liar_string"))
    p = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=20)
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert mod("liar_string") in err and "does not lie inside the module's loaded image" in err


@pytest.mark.timeout(30)
def test_a_declared_query_argument_joins_the_coalescing_key(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text(UPPER_CONF.format(path=example("upper"), key="ttl_ms = 1000"))
    p = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=20)
    assert p.returncode == 0, p.stderr   # a 1.0 module kind would need key_query = ...
    keys = [line for line in p.stdout.decode().splitlines() if line.strip().startswith("key:")]
    assert any("skip" in line for line in keys), p.stdout


@pytest.mark.timeout(60)
def test_run_kind_checks_the_declared_query_and_fills_route_defaults(tmp_path):
    def run(*args, query="", stdin=b""):
        env = dict(os.environ, LAGLESS_RUN_QUERY=query)
        return subprocess.run([LAGLESS_BIN, *args], capture_output=True, timeout=30, env=env,
                              input=stdin)
    r = run("--run-kind", "heavy", query="iterations=abc")
    assert r.returncode == 1 and b"iterations: expected a whole number" in r.stderr, r.stderr
    r = run("--run-kind", "heavy", query="iterations=1000")
    assert r.returncode == 0 and b'"iterations":1000' in r.stdout, r.stderr
    # a module kind with declared route keys and no route for it: the declared defaults
    conf = tmp_path / "k.conf"
    conf.write_text("[module upper]\npath = %s\n" % example("upper"))
    r = run("-c", str(conf), "--run-kind", "upper.upper", query="skip=1", stdin=b"abc")
    assert r.returncode == 0 and r.stdout == b"aBC", r.stderr
