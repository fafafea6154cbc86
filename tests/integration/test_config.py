"""Configuration: file, environment and flags, `lagless -t`, and the shipped example file."""
import os
import re
import socket
import subprocess

import pytest

from conftest import LAGLESS_BIN, REPO_ROOT, get


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([LAGLESS_BIN, *args], capture_output=True, text=True, timeout=20, env=e)


@pytest.mark.timeout(30)
def test_shipped_example_is_current_and_valid():
    shipped = open(os.path.join(REPO_ROOT, "deploy", "lagless.conf")).read()
    generated = run("--print-example-config").stdout
    assert shipped == generated, "deploy/lagless.conf is stale: regenerate with --print-example-config"
    r = run("-t", "-c", os.path.join(REPO_ROOT, "deploy", "lagless.conf"))
    assert r.returncode == 0, r.stderr
    assert '"budget"' in r.stdout
    # a deployed server leaves the demonstrations out (/hash: 19 MiB and 40 ms a request),
    # and so do the examples a team copies
    for routes in (r.stdout, run("-t", "-c", os.path.join(REPO_ROOT, "examples", "python",
                                                          "lagless.conf")).stdout):
        for demo in ("/heavy", "/compress", "/decompress", "/hash", "/verify"):
            assert not re.search(r"^\s*%s\b" % re.escape(demo), routes, re.M), (demo, routes)


@pytest.mark.timeout(30)
def test_t_names_file_line_and_key(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("[lagless]\nqueue = 2\nqeueu = 3\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode == 1
    assert "%s:3:" % conf in r.stderr and "qeueu" in r.stderr
    conf.write_text("deadline_ms = soon\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode == 1 and ":1:" in r.stderr and "deadline_ms" in r.stderr
    # inih's own syntax errors: named as such at their line, not blamed on the next key (a
    # new-user probe got "f:1: key 'kind' = 'heavy': unknown key" for an unclosed header)
    for text, line in (("[route /x\nkind = heavy\n", 1), ("queue = 2\njunk line\nnope = 1\n", 2)):
        conf.write_text(text)
        r = run("-t", "-c", str(conf))
        assert r.returncode == 1 and "%s:%d: syntax error" % (conf, line) in r.stderr, r.stderr
        assert "kind" not in r.stderr and "nope" not in r.stderr, r.stderr
    # a key is given once at the top level (with [lagless], and '-' as '_') and in [pool], as
    # in [route]: the last one no longer wins in silence
    for text, key in (("deadline_ms = 100\n[lagless]\ndeadline-ms = 200\n", "deadline-ms"),
                      ("[pool p]\ncompute = 1\ncompute = 2\n", "compute")):
        conf.write_text(text)
        r = run("-t", "-c", str(conf), "--cpus", "4")
        assert r.returncode == 1 and "%s:3: key '%s' given twice" % (conf, key) in r.stderr \
            and "(line " in r.stderr, r.stderr
    # an unknown section is refused at its header, with keys or without: [poolx] with no
    # keys used to pass in silence (inih calls the handler only for a key)
    for text, line, section in (("queue = 2\n[poolx]\n", 2, "[poolx]"),
                                ("[bogus]\nqueue = 2\n", 1, "[bogus]"),
                                ("[lagless]\n[ lagless ]\n", 2, "[ lagless ]")):
        conf.write_text(text)
        r = run("-t", "-c", str(conf))
        assert r.returncode == 1 and "%s:%d: section %s: unknown section" % (conf, line, section) \
            in r.stderr, r.stderr
    conf.write_text("[lagless]\n[pool default]\n[route /x]\nkind = heavy\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode == 0, r.stderr
    # a known section without keys does nothing, so it is refused at its header with what it
    # lacks ([lagless] and [pool default], the defaults, may be empty): a hostile trial found
    # [pool p], [route /zz] and [module m] passing in silence
    for text, line, why in (("[lagless]\n[pool p]\n[route /x]\nkind = heavy\n", 2,
                             "[pool p]: compute = N or P% is required"),
                            ("[route /x]\nkind = heavy\n[module m]\n", 3,
                             "module m: no 'path' key"),
                            ("[route /zz]\n; nothing yet\n", 1, "route /zz: needs kind")):
        conf.write_text(text)
        r = run("-t", "-c", str(conf))
        assert r.returncode == 1 and "%s:%d: %s" % (conf, line, why) in r.stderr, r.stderr
    # kind = and handler = in one route: the later one is refused (the handler was dropped)
    for text, key in (("[route /x]\nhandler = ping\nkind = heavy\n", "kind"),
                      ("[route /x]\nkind = heavy\nhandler = ping\n", "handler")):
        conf.write_text(text)
        r = run("-t", "-c", str(conf))
        assert r.returncode == 1 and "%s:3: key '%s'" % (conf, key) in r.stderr and \
            "exclude each other" in r.stderr, r.stderr
    # keys that would do nothing are refused at the key (a hostile trial found them taken in
    # silence): off = yes with others, a kind's keys on a loop handler route
    for text, key, why in (("[route /heavy]\noff = yes\nkind = heavy\n", "kind",
                            "off = yes removes the route"),
                           ("[route /p2]\nhandler = ping\nwhere = pool\n", "where",
                            "a loop handler route runs no job"),
                           ("[route /p2]\nhandler = ping\npool = default\n", "pool",
                            "a loop handler route runs no job"),
                           ("[route /heavy]\noff = 1\nttl_ms = 5\n", "ttl_ms",
                            "off = yes removes the route")):
        conf.write_text(text)
        r = run("-t", "-c", str(conf))
        assert r.returncode == 1 and "%s:3: key '%s'" % (conf, key) in r.stderr and \
            why in r.stderr, r.stderr
    # a route in two pools' routes lists: the first took it in silence
    conf.write_text("[pool a]\ncompute = 1\nroutes = /heavy\n[pool b]\ncompute = 1\n"
                    "routes = /hash /heavy\n")
    r = run("-t", "-c", str(conf), "--cpus", "4")
    assert r.returncode == 1 and "[pool b] routes: '/heavy' is in [pool a]'s routes too" in \
        r.stderr, r.stderr
    # ... nor by [pool default]'s list and a named pool's, nor for another pool than the one
    # the route's own pool = names (a later trial found both taken in silence)
    for text, want in (("[pool default]\nroutes = /heavy\n[pool a]\ncompute = 1\n"
                        "routes = /heavy\n", "[pool a] routes: '/heavy' is in [pool default]'s"),
                       ("[pool a]\ncompute = 1\nroutes = /heavy\n[pool b]\ncompute = 1\n"
                        "[route /heavy]\nkind = heavy\npool = b\n",
                        "[pool a] routes: '/heavy' says pool = b in its [route] section")):
        conf.write_text(text)
        r = run("-t", "-c", str(conf), "--cpus", "4")
        assert r.returncode == 1 and want in r.stderr, r.stderr
    conf.write_text("[pool a]\ncompute = 1\nroutes = /heavy\n[route /heavy]\nkind = heavy\n"
                    "pool = a\n")  # the same pool twice: agreed
    assert run("-t", "-c", str(conf), "--cpus", "4").returncode == 0
    # off = yes for a path that is no default route would remove nothing, in silence
    conf.write_text("[route /heavvy]\noff = yes\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode == 1 and "%s:2: key 'off'" % conf in r.stderr and \
        "removes a default route" in r.stderr, r.stderr
    conf.write_text("[route /heavy]\noff = yes\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode == 0 and "\n/heavy " not in r.stdout, r.stderr


@pytest.mark.timeout(60)
def test_server_uses_file_env_and_flags_in_order(start_server, tmp_path):
    conf = tmp_path / "lagless.conf"
    conf.write_text("compute_workers = 1\nqueue = 5\nmax_body = 1K\n")
    # env overrides the file's queue, the flag overrides env's; max_body comes from the file.
    srv = start_server("-c", str(conf), "--queue", "2", env={"LAGLESS_QUEUE": "4"})
    health = get(srv.port, "/health").json()
    assert health["slots"]["total"] == 1 + 2
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary",
                        "@-", "http://127.0.0.1:%d/compress" % srv.port],
                       input=b"x" * 2048, capture_output=True, timeout=20)
    assert r.stdout == b"413"


@pytest.mark.timeout(30)
def test_t_refuses_what_start_up_would(tmp_path):
    """-t must fail on settings the real start fails on (found by a new-user trial)."""
    for args in (["--listen", "bad!host:80"], ["--listen", "::1"],
                 ["--error-log", str(tmp_path / "missing" / "dir" / "x.log")],
                 ["-c", str(tmp_path)]):
        r = run("-t", *args)
        assert r.returncode == 1, (args, r.stderr)
        assert "configuration test failed" in r.stderr
    assert run("-t", "--listen", "[::1]:0", "--error-log", str(tmp_path / "new.log")).returncode == 0
    assert not (tmp_path / "new.log").exists()  # checked, not created


@pytest.mark.timeout(30)
def test_route_keys_take_dashes_like_every_file_key(tmp_path):
    """Regression (hostile trial): README says file keys may use '_' or '-', but a [route]
    section refused deadline-ms, max-body and key-query as unknown kind keys."""
    conf = tmp_path / "r.conf"
    conf.write_text("[route /x]\nkind = heavy\nmethods = GET\ndeadline-ms = 123\nmax-body = 4K\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode == 0, r.stderr
    row = [l for l in r.stdout.splitlines() + r.stderr.splitlines() if l.startswith("/x ")]
    assert row and " 123 " in row[0] and " 4096 " in row[0], row
    # and the two spellings are one key: given twice
    conf.write_text("[route /x]\nkind = heavy\ndeadline_ms = 100\ndeadline-ms = 200\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode != 0 and "r.conf:4: key 'deadline-ms' given twice" in r.stderr, r.stderr


@pytest.mark.timeout(30)
def test_route_methods_are_the_parsers_vocabulary(tmp_path):
    """One method vocabulary (http/method.h): `methods =` takes any method the parser knows
    (it took only GET HEAD POST PUT DELETE PATCH), exact case; an upstream route forwards
    OPTIONS by default, not TRACE or CONNECT (docs/HTTP.md); -t prints the sets from it."""
    conf = tmp_path / "m.conf"
    conf.write_text("[upstream app]\nserver = 127.0.0.1:9\n\n"
                    "[route /dav/*]\nupstream = app\nmethods = PROPFIND M-SEARCH, GET\n\n"
                    "[route /api/*]\nupstream = app\n\n"
                    "[route /k]\nkind = heavy\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode == 0, r.stderr
    rows = {l.split()[0]: l for l in r.stdout.splitlines() + r.stderr.splitlines()
            if l.startswith("/")}
    assert "GET, HEAD, PROPFIND, M-SEARCH " in rows["/dav/*"], rows
    assert "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS " in rows["/api/*"], rows
    assert " POST " in rows["/k"] and "OPTIONS" not in rows["/k"], rows
    conf.write_text("[route /x]\nkind = heavy\nmethods = get\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode != 0 and "expected a list of request methods" in r.stderr, r.stderr


@pytest.mark.timeout(30)
def test_an_upstream_route_cannot_name_connect(tmp_path):
    """Regression (hostile trial): `methods = GET, CONNECT` on an upstream route was taken,
    and every CONNECT it then routed was answered 431 (the head toward the app refused it:
    lagless offers no tunnel). Refused at -t instead, naming the line."""
    conf = tmp_path / "c.conf"
    conf.write_text("[upstream app]\nserver = 127.0.0.1:9\n\n"
                    "[route /t/*]\nupstream = app\nmethods = GET, CONNECT\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode != 0 and "c.conf:6:" in r.stderr and "CONNECT" in r.stderr, r.stderr
    conf.write_text("[upstream app]\nserver = 127.0.0.1:9\n\n"
                    "[route /t/*]\nupstream = app\nmethods = GET, TRACE, PROPFIND\n")
    assert run("-t", "-c", str(conf)).returncode == 0


@pytest.mark.timeout(60)
def test_an_arena_over_the_mappable_size_is_refused_and_frees_what_it_read():
    """An arena over the 16 TiB that can be mapped is refused at -t and at start-up, naming
    the settings; the refusal frees the configuration it had read (under ASan, LSan reported
    ~55 KB: the registry of kinds and routes)."""
    from conftest import CRASH_RE
    for args in (("-t",), ("--listen", "127.0.0.1:0")):
        r = run(*args, "--max-body", "1G", "--transit-buffers", "20000")
        assert r.returncode == 1, r
        assert "over the 16384 GiB that can be mapped" in r.stderr, r.stderr
        assert not CRASH_RE.search(r.stderr), r.stderr


@pytest.mark.timeout(30)
def test_t_refuses_what_the_start_up_could_not_bind_or_write(tmp_path):
    """-t used to pass listeners that clash (the same address twice, a port on an address and
    on its wildcard) and paths in a missing directory (pid file, unix socket), which the
    start-up then refused at bind(2) or open(2) (a hostile trial found five such configs)."""
    conf = tmp_path / "c.conf"
    nodir = tmp_path / "nodir"
    cases = (
        ("listen = 127.0.0.1:19113\nadmin_listen = 127.0.0.1:19113\n",
         "--admin-listen 127.0.0.1:19113 is taken by --listen 127.0.0.1:19113"),
        ("listen = 127.0.0.1:19113\nagent_listen = 127.0.0.1:19113\n",
         "--agent-listen 127.0.0.1:19113 is taken by --listen 127.0.0.1:19113"),
        ("listen = 127.0.0.1:19113 127.0.0.1:19113\n", "is taken by --listen"),
        ("listen = 19113\nadmin_listen = 127.0.0.1:19113\n",
         "--admin-listen 127.0.0.1:19113 overlaps --listen 0.0.0.0:19113"),
        # one address written two ways (a hostile trial found these compared as text)
        ("listen = [0:0:0:0:0:0:0:1]:19113\nadmin_listen = [::1]:19113\n",
         "--admin-listen [::1]:19113 overlaps --listen [0:0:0:0:0:0:0:1]:19113"),
        ("listen = 127.0.0.1:19113\nadmin_listen = [::ffff:127.0.0.1]:19113\n",
         "--admin-listen [::ffff:127.0.0.1]:19113 overlaps --listen 127.0.0.1:19113"),
        ("listen = 0.0.0.0:19113\nagent_listen = [::ffff:127.0.0.2]:19113\n",
         "--agent-listen [::ffff:127.0.0.2]:19113 overlaps --listen 0.0.0.0:19113"),
        ("listen = unix:%s/a.sock unix:%s/a.sock,mode=0660\n" % (tmp_path, tmp_path),
         "overlaps --listen unix:%s/a.sock" % tmp_path),
        # one socket file written two ways (a later trial found these compared as text)
        ("listen = unix:%s/a.sock unix:%s/./a.sock\n" % (tmp_path, tmp_path),
         "overlaps --listen unix:%s/a.sock" % tmp_path),
        ("listen = unix:%s/a.sock unix:%s//a.sock\n" % (tmp_path, tmp_path),
         "overlaps --listen unix:%s/a.sock" % tmp_path),
        ("pid_file = %s/p.pid\n" % nodir, "cannot write the pid file %s/p.pid" % nodir),
        ("listen = unix:%s/x.sock\n" % nodir, "cannot write the unix socket %s/x.sock" % nodir),
        # a directory, or a file that is not a socket, where start-up writes one (a hostile
        # trial found -t passing these and the start-up refusing them)
        ("pid_file = %s\n" % tmp_path, "cannot write the pid file %s: Is a directory" % tmp_path),
        ("error_log = %s\n" % tmp_path, "cannot write the error log %s: Is a directory"
         % tmp_path),
        ("listen = unix:%s\n" % conf, "cannot write the unix socket %s: File exists" % conf),
        ("listen = unix:%s\n" % tmp_path, "cannot write the unix socket %s: File exists"
         % tmp_path),
    )
    try:  # [::] takes IPv4 too where net.ipv6.bindv6only is 0 (ipv6(7)): it clashes with any
        with open("/proc/sys/net/ipv6/bindv6only") as f:  # IPv4 address on its port
            dual = f.read().strip() == "0"
    except OSError:
        dual = False
    if dual:
        cases += (("listen = [::]:19113\nadmin_listen = 127.0.0.1:19113\n",
                   "--admin-listen 127.0.0.1:19113 overlaps --listen [::]:19113"),
                  ("listen = 0.0.0.0:19113\nagent_listen = [::]:19113\n",
                   "--agent-listen [::]:19113 overlaps --listen 0.0.0.0:19113"),
                  ("listen = [::0]:19113\nadmin_listen = 127.0.0.1:19113\n",
                   "--admin-listen 127.0.0.1:19113 overlaps --listen [::0]:19113"))
    for text, want in cases:
        conf.write_text(text)
        r = run("-t", "-c", str(conf))
        assert r.returncode == 1 and want in r.stderr, (text, r.stderr)
    # port 0 picks a port per listener: no clash; other addresses and families pass, and so
    # does a stale socket file (the start-up replaces it)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(tmp_path / "stale.sock"))
    stale.close()
    conf.write_text("listen = 127.0.0.1:0 [::1]:19113 127.0.0.1:19113 unix:%s/ok.sock\n"
                    "admin_listen = 127.0.0.1:0\nagent_listen = 127.0.0.1:0\n"
                    "pid_file = %s/p.pid\n" % (tmp_path, tmp_path))
    r = run("-t", "-c", str(conf))
    assert r.returncode == 0, r.stderr
    conf.write_text("listen = unix:%s/stale.sock\n" % tmp_path)
    r = run("-t", "-c", str(conf))
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "ok.sock").exists() and not (tmp_path / "p.pid").exists()


@pytest.mark.timeout(60)
def test_a_long_line_gives_its_whole_value_to_any_key(tmp_path):
    """inih's line buffer is 200 bytes in Debian's libinih, and many keys have no flag or
    environment form: a user's 202-byte gunicorn command could not be written at all. A line
    up to 64 KiB now gives its whole value, in the main file and in conf.d."""
    words = ["/bin/echo", "{socket}"] + ["--opt-%03d=%s" % (i, "v" * 20) for i in range(32)]
    command = " ".join(words)
    assert 900 < len(command) < 1100
    conf = tmp_path / "lagless.conf"
    conf.write_text("[lagless]\ndemo_routes = no\n[app web]\ncommand = %s ; a comment\n"
                    "env = LONG=%s\n" % (command, "p" * 600))
    r = run("-t", "-c", str(conf))
    assert r.returncode == 0, r.stderr
    assert "app web: " in r.stdout and r.stdout.split("command: ", 1)[1].split("\n")[0] == \
        command, r.stdout
    # a key's own checks see the real value: an unclosed quote at its end is refused there
    conf.write_text("[lagless]\ndemo_routes = no\n[app web]\ncommand = %s 'open\n" % command)
    r = run("-t", "-c", str(conf))
    assert r.returncode == 1 and "%s:4: key 'command' = '/bin/echo" % conf in r.stderr and \
        "..." in r.stderr and "unclosed quote" in r.stderr, r.stderr
    # a long [pool] routes list, read to its end (a bad last path is named), here in conf.d
    paths = ["/job/r%02d" % i for i in range(40)]
    routes = "".join("[route %s]\nkind = heavy\n" % p for p in paths)
    conf.write_text("[lagless]\ndemo_routes = no\n")
    (tmp_path / "conf.d").mkdir()
    pool = tmp_path / "conf.d" / "10-pool.conf"
    for tail, ok in (("", True), (" /job/zz", False)):
        pool.write_text(routes + "[pool a]\ncompute = 1\nroutes = %s%s\n" % (" ".join(paths),
                                                                                tail))
        assert len(pool.read_text().splitlines()[-1]) > 300
        r = run("-t", "-c", str(conf), "--cpus", "4")
        if ok:
            assert r.returncode == 0, r.stderr
        else:
            assert r.returncode == 1 and "[pool a] routes: '/job/zz' is not a route" in \
                r.stderr, r.stderr
    pool.unlink()
    # over 64 KiB, or a NUL byte: refused at the file and line, with the reason
    conf.write_text("[lagless]\ndemo_routes = no\n[app web]\ncommand = /bin/echo %s\n" %
                    ("x" * (70 * 1024)))
    r = run("-t", "-c", str(conf))
    assert r.returncode == 1 and "%s:4: a line over 65536 bytes" % conf in r.stderr, r.stderr
    conf.write_bytes(b"[lagless]\ndemo_routes = no\n[app web]\ncommand = /bin/echo "
                     + b"y" * 300 + b"\x00 {socket}\n")
    r = run("-t", "-c", str(conf))
    assert r.returncode == 1 and "%s:4: a NUL byte in the line" % conf in r.stderr, r.stderr
    # only a value may be long: a long section header or a line without '=' is refused
    for text, line, why in (("[route /%s]\nkind = ping\n" % ("a" * 250), 1,
                              "a section header over"),
                             ("[lagless]\n%s\n" % ("b" * 250), 2, "that is not 'key = value'")):
        conf.write_text(text)
        r = run("-t", "-c", str(conf))
        assert r.returncode == 1 and "%s:%d: " % (conf, line) in r.stderr and why in r.stderr, \
            r.stderr
