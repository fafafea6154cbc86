"""Deployment artefacts: make install, the systemd units, the man page and the Dockerfile."""
import glob
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import LAGLESS_BIN, REPO_ROOT, free_port

DEPLOY = os.path.join(REPO_ROOT, "deploy")


@pytest.mark.timeout(120)
def test_make_install_layout(tmp_path):
    dest = tmp_path / "root"
    r = subprocess.run(["make", "-s", "install", "DESTDIR=%s" % dest, "PREFIX=/usr",
                        "BIN=%s" % LAGLESS_BIN], cwd=REPO_ROOT, capture_output=True, text=True,
                       timeout=100)
    assert r.returncode == 0, r.stderr
    for rel in ("usr/bin/lagless", "usr/share/man/man8/lagless.8",
                "usr/lib/systemd/system/lagless.service", "usr/lib/systemd/system/lagless.socket",
                "etc/lagless/lagless.conf"):
        assert (dest / rel).is_file(), rel
    # every job module the image ships (deploy/Dockerfile copies build/modules/), not only
    # python.so (issue 39, section 6)
    shipped = sorted(os.path.basename(f) for f in
                     glob.glob(os.path.join(REPO_ROOT, "build", "modules", "*.so")))
    assert {"upper.so", "thumbnail.so"} <= set(shipped), shipped
    installed = sorted(os.listdir(dest / "usr/lib/lagless/modules"))
    assert installed == shipped, (installed, shipped)
    unit = (dest / "usr/lib/systemd/system/lagless.service").read_text()
    assert "ExecStart=/usr/bin/lagless " in unit and "/usr/local" not in unit
    v = subprocess.run([str(dest / "usr/bin/lagless"), "--version"], capture_output=True,
                       text=True, timeout=10)
    assert v.returncode == 0 and v.stdout.startswith("lagless ")
    # An existing configuration is never overwritten.
    (dest / "etc/lagless/lagless.conf").write_text("queue = 1\n")
    subprocess.run(["make", "-s", "install", "DESTDIR=%s" % dest, "PREFIX=/usr",
                    "BIN=%s" % LAGLESS_BIN], cwd=REPO_ROOT, check=True, capture_output=True,
                   timeout=100)
    assert (dest / "etc/lagless/lagless.conf").read_text() == "queue = 1\n"


@pytest.mark.timeout(60)
def test_units_pass_systemd_analyze_verify(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    unit = open(os.path.join(DEPLOY, "lagless.service")).read()
    for key in ("Type=notify", "ExecStartPre=", " -t ", "ExecReload=/usr/local/bin/lagless ", " -s reload\n",
                "--pid-file /run/lagless/lagless.pid", "RuntimeDirectory=lagless",
                "KillMode=mixed", "Restart=on-failure", "TimeoutStopSec=", "WatchdogSec=",
                "LimitNOFILE=", "NoNewPrivileges=yes", "ProtectSystem=strict",
                "ProtectHome=yes", "PrivateTmp=yes", "DynamicUser=yes", "CapabilityBoundingSet=\n"):
        assert key in unit, key
    stop = int(re.search(r"TimeoutStopSec=(\d+)", unit).group(1))
    assert stop * 1000 > 30000, "TimeoutStopSec must exceed the default drain timeout"
    # a deferred reload waits for the oldest generation's drain before READY=1
    start = int(re.search(r"TimeoutStartSec=(\d+)", unit).group(1))
    assert start * 1000 > 30000, "TimeoutStartSec must exceed the default drain timeout"
    # verify checks that ExecStart points at an executable: use the binary under test.
    (tmp_path / "lagless.service").write_text(unit.replace("/usr/local/bin/lagless", LAGLESS_BIN))
    shutil.copy(os.path.join(DEPLOY, "lagless.socket"), tmp_path / "lagless.socket")
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "lagless.service"),
                        str(tmp_path / "lagless.socket")], capture_output=True, text=True,
                       timeout=50)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr


@pytest.mark.timeout(30)
def test_man_page_lists_every_option():
    helptext = subprocess.run([LAGLESS_BIN, "--help"], capture_output=True, text=True,
                              timeout=10).stdout
    flags = set(re.findall(r"--([a-z][a-z-]+)", helptext))
    assert len(flags) > 10
    man = open(os.path.join(REPO_ROOT, "man", "lagless.8")).read().replace("\\-", "-")
    missing = sorted(f for f in flags if "--" + f not in man)
    assert not missing, "lagless.8 lacks: %s" % missing
    readme = open(os.path.join(REPO_ROOT, "README.md")).read()
    missing = sorted(f for f in flags if "--" + f not in readme)
    assert not missing, "README.md lacks: %s" % missing


@pytest.mark.timeout(60)
def test_dockerfile_lint_and_practices():
    text = open(os.path.join(DEPLOY, "Dockerfile")).read()
    # The official best-practice points that matter here, checked by hand-written rules.
    assert text.count("FROM ") >= 2, "multi-stage build"
    assert "USER lagless" in text and "useradd" in text, "non-root user"
    for key in ("EXPOSE 8080", "STOPSIGNAL SIGTERM", "HEALTHCHECK", "/health",
                "--no-install-recommends", "rm -rf /var/lib/apt/lists/*"):
        assert key in text, key
    assert "tini" not in text and "dumb-init" not in text, "lagless is PID 1 itself"
    assert '"/usr/local/bin/lagless"' in text, "exec form, so signals reach lagless"
    lint = os.path.join(REPO_ROOT, "build", "tools", "node_modules", ".bin", "dockerfilelint")
    if not os.path.exists(lint):
        pytest.skip("dockerfilelint not installed (.ci/run installs it from npm into build/tools)")
    r = subprocess.run([lint, os.path.join(DEPLOY, "Dockerfile")], capture_output=True,
                       text=True, timeout=50)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.timeout(120)
def test_install_module_header_and_pkgconfig(tmp_path):
    """make install ships lagless/module.h and lagless.pc; a module builds from them alone
    (C99, pedantic, hidden visibility) and exports one descriptor with the header's ABI."""
    import ctypes
    dest = tmp_path / "root"
    subprocess.run(["make", "-s", "install", "DESTDIR=%s" % dest, "PREFIX=/usr",
                    "BIN=%s" % LAGLESS_BIN], cwd=REPO_ROOT, check=True, capture_output=True,
                   timeout=100)
    pc = dest / "usr/share/pkgconfig/lagless.pc"
    assert (dest / "usr/include/lagless/module.h").is_file() and pc.is_file()
    env = dict(os.environ, PKG_CONFIG_PATH=str(pc.parent), PKG_CONFIG_SYSROOT_DIR=str(dest))
    cflags = subprocess.run(["pkg-config", "--cflags", "lagless"], env=env, check=True,
                            capture_output=True, text=True, timeout=10).stdout.split()
    assert cflags == ["-I%s/usr/include" % dest]
    so = tmp_path / "upper.so"
    subprocess.run(["cc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror",
                    "-fvisibility=hidden", "-shared", "-fPIC", *cflags, "-o", str(so),
                    os.path.join(REPO_ROOT, "tests/modules/abi_upper.c")],
                   check=True, capture_output=True, timeout=60)
    header = (dest / "usr/include/lagless/module.h").read_text()
    major = int(re.search(r"#define LAGLESS_ABI_MAJOR (\d+)", header).group(1))
    minor = int(re.search(r"#define LAGLESS_ABI_MINOR (\d+)", header).group(1))
    lib = ctypes.CDLL(str(so), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    words = (ctypes.c_uint32 * 6).in_dll(lib, "lagless_module")
    assert words[0] == 0x4c474d44 and (words[1], words[2]) == (major, minor)
    assert words[5] == 1  # nkinds


def cfg_sections(text):
    """{section header: [its lines, comments included]} of an HAProxy configuration."""
    out, cur = {}, None
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            cur = line.strip()
            out[cur] = []
        elif cur is not None:
            out[cur].append(line.strip())
    return out


@pytest.mark.timeout(60)
def test_haproxy_reference_states_its_limits():
    """deploy/haproxy.cfg says what its settings cost (issue 39, section 6): `retry-on 503`
    replays only a request that fits in one buffer (tune.bufsize, 16 KB), and `maxconn N`
    needs about 2N descriptors, a figure checked against what haproxy itself asks for."""
    text = open(os.path.join(DEPLOY, "haproxy.cfg")).read()
    sections = cfg_sections(text)
    retried = 0
    for name, lines in sections.items():
        for i, line in enumerate(lines):
            if line.startswith("retry-on") and "503" in line.split():
                retried += 1
                above = []
                for prev in reversed(lines[:i]):
                    if not prev.startswith("#"):
                        break
                    above.append(prev)
                note = " ".join(above)
                assert "buffer" in note, "%s: retry-on 503 without its buffer limit" % name
                if "tune.bufsize" not in note:
                    assert "be_lagless" in note, note  # points at the full comment
    assert retried == 2, retried
    full = " ".join(sections["backend be_lagless"])
    assert "tune.bufsize" in full and "16384" in full, "be_lagless states the buffer size"
    glob_lines = sections["global"]
    maxconn = int(next(l.split()[1] for l in glob_lines if l.startswith("maxconn ")))
    note = " ".join(l for l in glob_lines if l.startswith("#"))
    stated = int(re.search(r"RLIMIT_NOFILE of (\d+)", note).group(1))
    advised = int(re.search(r"LimitNOFILE=(\d+)", note).group(1))
    assert 2 * maxconn <= stated <= advised, (maxconn, stated, advised)
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not os.access(haproxy, os.X_OK) or shutil.which("prlimit") is None:
        pytest.skip("haproxy or prlimit (util-linux) missing")
    # haproxy under a hard limit of 1024 it cannot raise (root could: run it as nobody, with
    # the configuration where nobody can read it)
    tmp = tempfile.mkdtemp(prefix="lagless-haproxy-")
    os.chmod(tmp, 0o755)
    cfg = os.path.join(tmp, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(re.sub(r"(?m)^\s*bind .*$", "    bind 127.0.0.1:%d" % free_port(), text))
    os.chmod(cfg, 0o644)
    argv = ["prlimit", "--nofile=1024:1024", haproxy, "-db", "-f", cfg]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) missing")
        argv = argv[:2] + ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + \
            argv[2:]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)
    m = re.search(r"Cannot raise FD limit to (\d+)", out)
    assert m and proc.returncode != 0, out
    assert int(m.group(1)) == stated, (m.group(1), stated)


@pytest.mark.timeout(30)
def test_haproxy_per_client_refusal_limit_is_valid():
    """The commented per-client limit of deploy/haproxy.cfg's frontend (docs/OPERATIONS.md "A
    client that ignores Retry-After"), uncommented, is a configuration haproxy accepts."""
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not os.access(haproxy, os.X_OK):
        pytest.skip("haproxy missing")
    text = open(os.path.join(DEPLOY, "haproxy.cfg")).read()
    lines = [l for l in text.splitlines()
             if re.match(r"\s*#\s+(stick-table|http-request (track-sc0|deny)) ", l)]
    assert len(lines) == 3, lines
    for l in lines:
        text = text.replace(l + "\n", l.replace("#", "", 1) + "\n")
    assert "sc_http_fail_rate" in text and "deny_status 429" in text
    tmp = tempfile.mkdtemp(prefix="lagless-haproxy-")
    try:
        cfg = os.path.join(tmp, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(text)
        r = subprocess.run([haproxy, "-c", "-f", cfg], capture_output=True, text=True,
                           timeout=20)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "http-request" not in r.stdout + r.stderr, r.stdout + r.stderr
