"""The kinds shipped with lagless, end to end through the real server: /hash and /verify
(argon2id, reproduced by the `argon2` command from the salt in the PHC string), /compress and
/decompress (both directions against the `zstd` and `gzip` commands, decompression bombs
answered 413), /heavy's JSON produced by the kind, and route settings from the configuration."""

import base64
import json
import os
import re
import subprocess

import pytest

from conftest import LAGLESS_BIN, Server, get, heavy_result, request

PHC_RE = re.compile(r"^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$")

CONFIG = """\
[route /hash-light]
methods = POST
kind = hash
memory_kib = 1024
iterations = 1
lanes = 2

[route /verify-strict]
methods = POST
kind = verify
max_memory_kib = 2048
max_iterations = 1
max_lanes = 2

[route /decompress-small]
methods = POST
kind = decompress
max_output = 1M
"""


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    if LAGLESS_BIN is None:
        pytest.skip("lagless binary missing")
    work = tmp_path_factory.mktemp("kinds")
    conf = work / "lagless.conf"
    conf.write_text(CONFIG)
    s = Server(["--compute-workers", "2", "-c", str(conf)], workdir=str(work))
    yield s
    s.kill_all()
    crashes = s.crash_reports()
    assert not crashes, "server log shows a crash or sanitizer report: %r" % crashes[:10]


def post(port, path, body, timeout=60):
    return request(port, "POST", path, body=body,
                   headers={"Content-Type": "application/octet-stream",
                            "Content-Length": str(len(body))}, timeout=timeout)


def ctype(r):
    return (r.header("content-type") or "").split(";")[0].strip()


# ------------------------------------------------------------------------------ /hash, /verify


def b64decode_phc(s):
    """PHC strings use standard base64 without padding."""
    return base64.b64decode(s + "=" * (-len(s) % 4))


def hash_without_nul_salt(port, path, password, tries=40):
    """POSTs password to path until the random salt has no NUL byte (the argon2 command takes
    the salt as an argument); a 16-byte salt has one with probability 6 %, so 40 tries fail
    together with probability 1e-49. Returns (phc, m, t, p, salt)."""
    for _ in range(tries):
        r = post(port, path, password)
        assert r.status == 200, r
        assert ctype(r) == "text/plain", r.headers
        assert r.body.endswith(b"\n"), r.body
        phc = r.body[:-1].decode("ascii")
        m = PHC_RE.match(phc)
        assert m, phc
        salt = b64decode_phc(m.group(4))
        assert len(salt) == 16, salt
        assert len(b64decode_phc(m.group(5))) == 32, phc
        if b"\0" not in salt:
            return phc, int(m.group(1)), int(m.group(2)), int(m.group(3)), salt
    pytest.fail("every salt held a NUL byte")


def argon2_cli(password, salt, m, t, p):
    """The reference command: argon2 SALT -id -t T -k M -p P -l 32 -e, password on stdin."""
    out = subprocess.run(["argon2", salt, "-id", "-t", str(t), "-k", str(m), "-p", str(p),
                          "-l", "32", "-e"], input=password, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=60, check=True)
    return out.stdout.decode("ascii").strip()


@pytest.mark.timeout(120)
def test_hash_default_parameters_match_the_argon2_command(srv):
    password = b"correct horse battery staple"
    phc, m, t, p, salt = hash_without_nul_salt(srv.port, "/hash", password)
    # OWASP Password Storage Cheat Sheet: 19 MiB, 2 iterations, 1 lane.
    assert (m, t, p) == (19456, 2, 1), phc
    assert argon2_cli(password, salt, m, t, p) == phc


@pytest.mark.timeout(120)
def test_hash_route_parameters_match_the_argon2_command(srv):
    password = bytes(range(1, 127))  # every byte the command accepts on stdin but NUL
    phc, m, t, p, salt = hash_without_nul_salt(srv.port, "/hash-light", password)
    assert (m, t, p) == (1024, 1, 2), phc
    assert argon2_cli(password, salt, m, t, p) == phc


@pytest.mark.timeout(60)
def test_hash_salts_differ(srv):
    a = post(srv.port, "/hash-light", b"same").body
    b = post(srv.port, "/hash-light", b"same").body
    assert a != b and PHC_RE.match(a[:-1].decode()) and PHC_RE.match(b[:-1].decode())


@pytest.mark.timeout(120)
def test_verify_yes_and_no(srv):
    password = b"pass\nword with a line break"
    r = post(srv.port, "/hash", password)
    assert r.status == 200, r
    # the /hash answer (PHC string and its '\n') followed by the password is a /verify body
    yes = post(srv.port, "/verify", r.body + password)
    assert yes.status == 200 and yes.json() == {"match": True}, yes
    assert ctype(yes) == "application/json"
    no = post(srv.port, "/verify", r.body + password + b"x")
    assert no.status == 200 and no.json() == {"match": False}, no
    # a hash made by the argon2 command verifies too
    cli = argon2_cli(b"from the cli", "somesalt", 64, 1, 1).encode()
    r = post(srv.port, "/verify", cli + b"\nfrom the cli")
    assert r.json() == {"match": True}, r


@pytest.mark.timeout(60)
@pytest.mark.parametrize("body", [
    b"", b"no line break at all", b"$argon2i$v=19$m=64,t=1,p=1$c29tZXNhbHQ$AAAA\npw",
    b"$argon2id$v=19$m=64,t=1,p=1$!!!$???\npw", b"\xff\xfe\npw",
])
def test_verify_malformed_400(srv, body):
    r = post(srv.port, "/verify", body)
    assert r.status == 400, (body, r)


@pytest.mark.timeout(60)
def test_verify_refuses_parameters_over_the_route_limits(srv):
    heavy = argon2_cli(b"pw", "somesalt", 4096, 1, 1).encode()
    r = post(srv.port, "/verify-strict", heavy + b"\npw")
    assert r.status == 400 and b"limits" in r.body, r
    light = argon2_cli(b"pw", "somesalt", 2048, 1, 2).encode()
    r = post(srv.port, "/verify-strict", light + b"\npw")
    assert r.status == 200 and r.json() == {"match": True}, r
    # a stored hash asking for 4 GiB is refused by the default route before any allocation
    huge = b"$argon2id$v=19$m=4194304,t=1,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
    r = post(srv.port, "/verify", huge + b"\npw")
    assert r.status == 400, r


# -------------------------------------------------------------------- /compress, /decompress


def corpus(n):
    """n bytes of real text (licenses) and a little noise: compressible, not trivial."""
    out = bytearray()
    for name in sorted(os.listdir("/usr/share/common-licenses")):
        path = os.path.join("/usr/share/common-licenses", name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                out += f.read()
    assert out
    while len(out) < n:
        out += out[:n - len(out)] + os.urandom(16)
    return bytes(out[:n])


def cli(argv, data):
    p = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    assert p.returncode == 0, (argv, p.stderr)
    return p.stdout


DECODE = {"zstd": ["zstd", "-d", "-q", "-c"], "gzip": ["gzip", "-d", "-c"]}
ENCODE = {"zstd": ["zstd", "-q", "-c"], "gzip": ["gzip", "-c"]}
MAGIC = {"zstd": b"\x28\xb5\x2f\xfd", "gzip": b"\x1f\x8b"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec,level", [("zstd", 1), ("zstd", 19), ("gzip", 1), ("gzip", 9),
                                         ("gzip", None)])
def test_compress_decoded_by_the_command(srv, codec, level):
    data = corpus(700 * 1024)
    q = "?codec=%s" % codec + ("&level=%d" % level if level else "")
    r = post(srv.port, "/compress" + q, data)
    assert r.status == 200, r
    assert ctype(r) == "application/" + codec, r.headers
    assert r.body.startswith(MAGIC[codec])
    assert len(r.body) < len(data) // 2
    assert cli(DECODE[codec], r.body) == data


@pytest.mark.timeout(60)
def test_compress_without_codec_is_zstd(srv):
    r = post(srv.port, "/compress", b"hello " * 1000)
    assert r.status == 200 and ctype(r) == "application/zstd", r
    assert cli(DECODE["zstd"], r.body) == b"hello " * 1000


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec", ["zstd", "gzip"])
def test_decompress_what_the_command_wrote(srv, codec):
    data = corpus(900 * 1024)
    packed = cli(ENCODE[codec], data)
    # two members / frames back to back, as the commands produce with cat
    both = packed + cli(ENCODE[codec], b"tail")
    for body, want in ((packed, data), (both, data + b"tail")):
        path = "/decompress" + ("?codec=gzip" if codec == "gzip" else "")
        r = post(srv.port, path, body)
        assert r.status == 200, r
        assert r.body == want


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path,body", [
    ("/compress?codec=brotli", b"x"), ("/compress?codec=gzip&level=10", b"x"),
    ("/compress?codec=gzip&level=0", b"x"), ("/compress?codec=zstd&level=20", b"x"),
    ("/decompress?codec=lz4", b"x"), ("/decompress", b"not zstd data"),
    ("/decompress?codec=gzip", b"\x1f\x8b\x08\x00 truncated"), ("/decompress", b""),
])
def test_codec_bad_input_400(srv, path, body):
    r = post(srv.port, path, body)
    assert r.status == 400, (path, r)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec", ["zstd", "gzip"])
def test_decompression_bomb_is_413(srv, codec):
    """256 MiB of zeros in a few hundred KiB: over the default limit (the output region) and
    over the route's max_output; the compute process stays up and the next request works."""
    bomb = cli(["sh", "-c", "head -c 268435456 /dev/zero | %s" % " ".join(ENCODE[codec])], b"")
    assert len(bomb) < 1024 * 1024
    q = "?codec=gzip" if codec == "gzip" else ""
    computes = srv.children("compute")
    r = post(srv.port, "/decompress" + q, bomb, timeout=120)
    assert r.status == 413, r
    # the route's own limit: 1 MiB exactly passes, one byte more is a 413
    exact = cli(ENCODE[codec], b"\0" * (1 << 20))
    assert post(srv.port, "/decompress-small" + q, exact).status == 200
    over = cli(ENCODE[codec], b"\0" * ((1 << 20) + 1))
    r = post(srv.port, "/decompress-small" + q, over)
    assert r.status == 413, r
    assert srv.children("compute") == computes, "a compute process was replaced"
    assert post(srv.port, "/decompress" + q, exact).body == b"\0" * (1 << 20)


# ------------------------------------------------------------------------------------ /heavy


@pytest.mark.timeout(60)
def test_heavy_json_from_the_kind(srv):
    r = get(srv.port, "/heavy?iterations=2000000")
    assert r.status == 200 and ctype(r) == "application/json", r
    body = r.json()
    assert set(body) == {"iterations", "result", "queue_ms", "run_ms"}, body
    assert body["iterations"] == 2000000
    assert body["result"] == heavy_result(2000000)
    assert body["queue_ms"] >= 0 and body["run_ms"] > 0
    # the kind's own run time is inside the host's measurement of the job
    assert body["run_ms"] <= float(r.header("x-run-ms")) + 0.001, (body, r.headers)
    assert float(r.header("x-queue-ms")) >= 0


# ---------------------------------------------------------------------------- configuration


@pytest.mark.timeout(30)
def test_example_route_sections_are_valid_uncommented(tmp_path):
    """The example configuration's commented [route] sections of the built-in kinds, once
    uncommented, pass lagless -t: every key and default they show is one the kind accepts."""
    example = subprocess.run([LAGLESS_BIN, "--print-example-config"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    lines = example.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("; Routes."))
    lines = lines[:start] + [l[1:] if re.match(r";(\[route |[a-z_]+ = )", l) else l
                             for l in lines[start:]]
    assert sum(l.startswith("[route ") for l in lines) == 5, example
    conf = tmp_path / "routes.conf"
    conf.write_text("\n".join(lines) + "\n")
    r = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 0, r.stderr
    # and a wrong value in one of them is refused with the file, the line and the key
    bad = conf.read_text().replace("memory_kib = 19456", "memory_kib = 4")
    conf.write_text(bad)
    r = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 1, r.stderr
    # the kind's declared keys are parsed by the host: the error names the file, the route,
    # the key's own line and the key with its range
    line = bad.splitlines().index("memory_kib = 4") + 1
    assert re.search(re.escape(str(conf)) + r":\d+:.*route /hash", r.stderr), r.stderr
    assert "line %d: key memory_kib: expected a whole number from 8 to 4194304" % line \
        in r.stderr, r.stderr


@pytest.mark.timeout(60)
@pytest.mark.skipif("/san/" in (LAGLESS_BIN or ""),
                    reason="ASan's shadow mappings count against RLIMIT_DATA")
def test_argon2_memory_over_the_process_limit_is_500(start_server, tmp_path):
    """libargon2 allocates memory_kib itself (malloc) in the compute process: under
    --compute-memory a cost above the limit is a 500 for that request, the process survives
    and the next hash works."""
    conf = tmp_path / "big.conf"
    conf.write_text("[route /hash-big]\nmethods = POST\nkind = hash\nmemory_kib = 262144\n")
    srv = start_server("-c", str(conf), "--compute-workers", "1", "--compute-memory", "128M")
    before = srv.wait_children("compute", 1)
    r = post(srv.port, "/hash-big", b"pw")
    assert r.status == 500 and b"Memory allocation error" in r.body, r
    r = post(srv.port, "/hash", b"pw")
    assert r.status == 200 and PHC_RE.match(r.body[:-1].decode()), r
    assert srv.children("compute") == before, "the compute process was replaced"
