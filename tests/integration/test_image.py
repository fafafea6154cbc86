"""The container image without a container engine: deploy/Dockerfile's two stages install the
Makefile's package lists (BUILD_PKGS, RUNTIME_PKGS), the build stage's packages provide every
header the build includes, the runtime stage's provide every shared library the built binaries
and modules link (readelf NEEDED, ldd, dpkg -S), and the runtime stage's root filesystem, built
for real from Debian's packages (mmdebstrap), runs lagless as PID 1 under a CPU quota.

The checks read the packages of the machine that built the binaries, so they hold for the image
when that machine runs the image's release (Debian 12); elsewhere they skip with the reason."""
import glob
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import uuid

import pytest

from conftest import LAGLESS_BIN, REPO_ROOT, Server, children_of, get, request, wait_until
from test_sizing_cgroup import _rmdir_retry, _set_quota, _writable_parent

DOCKERFILE = os.path.join(REPO_ROOT, "deploy", "Dockerfile")
BUILD_DIR = os.path.dirname(LAGLESS_BIN) if LAGLESS_BIN else ""
MODULES_DIR = os.environ.get("LAGLESS_MODULES") or os.path.join(BUILD_DIR, "modules")
RELEASE = "bookworm"


def plain_make_env():
    """The environment for a make of the tests' own: none of the outer make's flags, and not
    its command-line variables either (make exports SAN=1 of `make SAN=1 check` to every
    recipe, so a make run from the ASan pass built build/san/ targets: "No rule to make target
    'build/lagless'")."""
    return {k: v for k, v in os.environ.items()
            if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "SAN", "DEBUG")}


def make_print(target):
    # Under `make test` this make is a sub-make of a sub-make, which prints "Entering
    # directory" lines on stdout: --no-print-directory, and none of the outer make's flags.
    env = plain_make_env()
    r = subprocess.run(["make", "-s", "--no-print-directory", target], cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, "make %s: %s" % (target, r.stderr)
    return r.stdout.split()


def stages():
    """[(name, [packages apt-get installs])] of the Dockerfile's stages, $VARIABLES expanded
    from the ARG defaults."""
    text = open(DOCKERFILE).read().replace("\\\n", " ")
    args = dict(re.findall(r'^ARG (\w+)="([^"]*)"', text, re.M))
    out = []
    for block in re.split(r"^FROM ", text, flags=re.M)[1:]:
        name = block.split("\n", 1)[0].strip()
        pkgs = []
        for m in re.finditer(r"apt-get install ([^&\n]*)", block):
            for word in shlex.split(m.group(1)):
                if word.startswith("$"):
                    pkgs += args.get(word.strip("${}"), "").split()
                elif not word.startswith("-"):
                    pkgs.append(word)
        out.append((name, pkgs))
    return out


def debian_release_or_skip():
    try:
        text = open("/etc/os-release").read()
    except OSError:
        text = ""
    if "VERSION_CODENAME=%s" % RELEASE not in text or shutil.which("dpkg") is None:
        pytest.skip("the package checks need a Debian 12 (%s) machine with dpkg, the image's "
                    "release" % RELEASE)


_OWNERS = {}


def _aliases(path):
    real = os.path.realpath(path)
    cands = []
    for p in (path, real):
        cands += [p, p[4:] if p.startswith("/usr/") else "/usr" + p]
    return list(dict.fromkeys(cands))


def prime_owners(paths):
    """Looks up the packages of many paths in one dpkg -S call (it takes a list)."""
    todo = {a: p for p in paths if p and p not in _OWNERS for a in _aliases(p)}
    if not todo:
        return
    r = subprocess.run(["dpkg", "-S", *todo], capture_output=True, text=True, timeout=120)
    for line in r.stdout.splitlines():
        pkg, _, path = line.partition(": ")
        if path in todo and todo[path] not in _OWNERS:
            _OWNERS[todo[path]] = pkg.split(",")[0].split(":")[0].strip()
    for p in set(todo.values()):
        _OWNERS.setdefault(p, None)


def normal_build_or_skip():
    if any(n.startswith(("libasan", "libubsan")) for n in needed(LAGLESS_BIN)):
        pytest.skip("the image ships the normal build; this is the sanitizer one (libasan)")


def owner(path):
    """The Debian package that installed path (dpkg -S), trying its /usr-merged aliases."""
    prime_owners([path])
    return _OWNERS[path]


def closure(pkgs):
    """pkgs and everything they depend on (Depends and Pre-Depends, recursively), plus the
    Priority: required packages every debian:12-slim image has, with theirs."""
    base = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Priority}\n"],
                          capture_output=True, text=True, timeout=30).stdout
    roots = list(pkgs) + [line.split()[0] for line in base.splitlines()
                          if line.endswith(" required")]
    r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                        "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"] + roots,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    names = {line.strip() for line in r.stdout.splitlines() if line and not line[0].isspace()}
    return {n.split(":")[0] for n in names if not n.startswith("<")}


def shipped_elves():
    """The ELF files the image ships: the two binaries and every module."""
    files = [LAGLESS_BIN, os.path.join(BUILD_DIR, "lagless-load")]
    files += sorted(glob.glob(os.path.join(MODULES_DIR, "*.so")))
    return [f for f in files if os.path.isfile(f)]


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                         timeout=30).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def ldd(path):
    """{soname: resolved path} of every library path loads, directly or not."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30).stdout
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            libs[m.group(1)] = m.group(2)
        elif "not found" in line:
            libs[line.split()[0]] = None
    return libs


@pytest.mark.timeout(60)
def test_dockerfile_installs_the_makefiles_package_lists():
    build, runtime = make_print("print-build-pkgs"), make_print("print-runtime-pkgs")
    deps = set(make_print("print-deps"))
    assert set(build) <= deps, "CI installs DEB_PKGS: it must hold the build packages"
    st = stages()
    assert len(st) == 2, st
    assert sorted(st[0][1]) == sorted(build), "the build stage is not BUILD_PKGS: %r" % st[0][1]
    assert sorted(st[1][1]) == sorted(runtime), "the runtime stage is not RUNTIME_PKGS: %r" % \
        st[1][1]
    text = open(DOCKERFILE).read()
    assert "--build-arg BUILD_PKGS=" in open(os.path.join(REPO_ROOT, "Makefile")).read()
    # the runtime stage ships what the library check below covers
    for f in ("build/lagless", "build/lagless-load", "build/modules/"):
        assert f in text, f


@pytest.mark.timeout(300)
def test_runtime_stage_provides_every_linked_library():
    debian_release_or_skip()
    normal_build_or_skip()
    runtime = stages()[-1][1]
    have = closure(runtime)
    elves = shipped_elves()
    assert len(elves) >= 3, elves
    missing_direct, missing_any, unowned = [], [], []
    prime_owners([p for f in elves for p in ldd(f).values()])
    for f in elves:
        libs = ldd(f)
        for so in needed(f):
            pkg = owner(libs[so]) if libs.get(so) else None
            if pkg is None:
                unowned.append((os.path.basename(f), so))
            elif pkg not in runtime and pkg != "libc6":
                # linked by our code: the package must be named, not come by chance
                missing_direct.append((os.path.basename(f), so, pkg))
        for so, path in libs.items():
            pkg = owner(path) if path else None
            if pkg is None:
                unowned.append((os.path.basename(f), so))
            elif pkg not in have:
                missing_any.append((os.path.basename(f), so, pkg))
    assert not unowned, "libraries no package provides: %r" % unowned
    assert not missing_direct, "linked libraries whose package the runtime stage lacks: %r" % \
        missing_direct
    assert not missing_any, "libraries outside the runtime stage's packages: %r" % missing_any


@pytest.mark.timeout(120)
def test_build_stage_provides_every_included_header():
    debian_release_or_skip()
    build = stages()[0][1]
    have = closure(build)
    headers = set()
    srcs = [f for d in ("common", "shm", "http", "stats", "sizing", "redis", "master", "worker",
                                   "cpupool", "kinds", "load")
            for f in glob.glob(os.path.join(REPO_ROOT, d, "*.c"))]
    srcs += glob.glob(os.path.join(REPO_ROOT, "modules", "*", "*.c"))
    # the modules' own flags: libvips's, and the embeddable CPython's (modules/python)
    vips = [flag for pkg in ("vips", "python3-embed")
            for flag in subprocess.run(["pkg-config", "--cflags", pkg], capture_output=True,
                                       text=True, timeout=30).stdout.split()]
    for src in srcs:
        # -M lists system headers too (the build's -MMD leaves them out)
        r = subprocess.run(["cc", "-std=gnu11", "-D_GNU_SOURCE", "-I" + REPO_ROOT,
                            "-I" + os.path.join(REPO_ROOT, "include"), *vips, "-M", src],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        headers |= {w for w in r.stdout.replace("\\\n", " ").split()
                    if w.startswith("/usr/") and w.endswith(".h")}
    assert any(h.endswith("/ev.h") for h in headers), sorted(headers)[:20]
    prime_owners(headers)
    by_pkg = {}
    for h in sorted(headers):
        by_pkg.setdefault(owner(h), []).append(h)
    missing = {p: hs[:2] for p, hs in by_pkg.items() if p not in have}
    assert not missing, "headers from packages the build stage lacks: %r" % missing


# ---------------------------------------------------------------------------------------------
# The runtime stage's root filesystem, for real

def _mirror_reason():
    if shutil.which("mmdebstrap") is None:
        return "mmdebstrap is not installed (Debian package mmdebstrap, in DEB_PKGS)"
    if os.geteuid() != 0:
        return "building a root filesystem with chroot needs root"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    try:
        r = subprocess.run(["curl", "-sfI", "-m", "10",
                            "http://deb.debian.org/debian/dists/%s/InRelease" % RELEASE],
                           capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "no package mirror: %s" % e
    if r.returncode != 0:
        return "the Debian mirror deb.debian.org is not reachable (curl exit %d)" % r.returncode
    return None


def runtime_rootfs(runtime):
    """build/image-rootfs/<hash of the list>: the runtime stage's packages on Debian 12's
    essential set, built once by mmdebstrap and kept between runs."""
    key = hashlib.sha256((RELEASE + " " + " ".join(sorted(runtime))).encode()).hexdigest()[:16]
    root = os.path.join(REPO_ROOT, "build", "image-rootfs", key)
    if os.path.exists(os.path.join(root, ".complete")):
        return root
    why = _mirror_reason()
    if why:
        pytest.skip(why)
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(root), exist_ok=True)
    r = subprocess.run(["mmdebstrap", "--mode=root", "--variant=essential",
                        "--include=" + ",".join(runtime), RELEASE, tmp,
                        "http://deb.debian.org/debian"], capture_output=True, text=True,
                       timeout=480)
    assert r.returncode == 0, "mmdebstrap failed:\n" + r.stderr[-3000:]
    open(os.path.join(tmp, ".complete"), "w").close()
    shutil.rmtree(root, ignore_errors=True)
    os.rename(tmp, root)
    return root


# What a container engine does, by hand: a PID and mount namespace, /proc of the new namespace
# and the host's /sys (with its cgroup hierarchy) inside the root filesystem, a 64 KiB
# /dev/shm, a clean environment, chroot, then lagless as PID 1 (exec keeps the pid).
SCRIPT = r'''
set -e
if [ -n "$1" ]; then echo $$ > "$1/cgroup.procs"; fi
exec unshare --pid --fork --mount sh -c '
set -e
mount --make-rprivate /
mount -t proc proc "$0/proc"
mount --rbind /sys "$0/sys"
mkdir -p "$0/dev/shm" && mount -t tmpfs -o size=64k tmpfs "$0/dev/shm"
exec chroot "$0" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin /usr/local/bin/lagless \
    -c /etc/lagless/lagless.conf --listen 127.0.0.1:0 --drain-timeout-ms 5000 \
    --demo-routes=yes' "$2"
'''


@pytest.mark.timeout(600)
def test_runtime_rootfs_runs_lagless_as_pid1_under_a_cpu_quota(tmp_path):
    debian_release_or_skip()
    normal_build_or_skip()
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("chroot and mounts in a new namespace need root and unshare (util-linux)")
    root = runtime_rootfs(stages()[-1][1])
    # what the Dockerfile's COPY lines put there (the binaries under test, not a rebuild)
    os.makedirs(os.path.join(root, "usr/local/lib/lagless/modules"), exist_ok=True)
    os.makedirs(os.path.join(root, "etc/lagless"), exist_ok=True)
    for f in shipped_elves():
        dest = "usr/local/lib/lagless/modules" if f.endswith(".so") else "usr/local/bin"
        shutil.copy2(f, os.path.join(root, dest))
    shutil.copy2(os.path.join(REPO_ROOT, "deploy", "lagless.conf"),
                 os.path.join(root, "etc/lagless/lagless.conf"))
    for f in shipped_elves():  # the dynamic loader of the rootfs finds every library
        rel = "/usr/local/lib/lagless/modules/" if f.endswith(".so") else "/usr/local/bin/"
        r = subprocess.run(["chroot", root, "ldd", rel + os.path.basename(f)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and "not found" not in r.stdout, r.stdout + r.stderr
    version, parent = _writable_parent()
    cg = None
    if version is not None:
        cg = parent / ("lagless-img-%d-%s" % (os.getpid(), uuid.uuid4().hex[:8]))
        cg.mkdir()
        _set_quota(version, cg, 150000)
    errlog = tmp_path / "stderr.log"
    try:
        with open(errlog, "wb") as err:
            proc = subprocess.Popen(["sh", "-c", SCRIPT, "sh", str(cg or ""), root],
                                    stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True)
        try:
            assert wait_until(lambda: "listening on" in errlog.read_text(), 20), \
                errlog.read_text()
            text = errlog.read_text()
            assert re.search(r"master\[0\] pid=1 ", text), "not PID 1:\n" + text
            if cg is not None:
                assert '"quota":1.5' in text and '"budget":1' in text, text
            port = int(re.search(r"listening on [0-9.]+:(\d+)", text).group(1))
            assert wait_until(lambda: _ping(port), 15), errlog.read_text()
            r = get(port, "/ping", timeout=5)
            assert r.status == 200 and r.body == b"ok", r
            assert get(port, "/heavy?iterations=100000", timeout=10).status == 200
            # sh exec'd unshare, whose child is lagless: SIGTERM it from outside, exit 0
            kids = wait_until(lambda: children_of(proc.pid), 5)
            assert kids, "no child of unshare"
            os.kill(kids[0][0], signal.SIGTERM)
            assert proc.wait(timeout=20) == 0, errlog.read_text()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    finally:
        if cg is not None:
            _rmdir_retry(cg)
    if cg is None:
        pytest.skip("ran as PID 1 in the runtime root filesystem, without a CPU quota: %s"
                    % parent)


def _ping(port):
    try:
        return get(port, "/ping", timeout=2).status == 200
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# Adding an application: APP_PKGS, the build context, the example's image (issue 39, section 4)

EXAMPLE_DOCKERFILE = os.path.join(REPO_ROOT, "examples", "python", "Dockerfile")
FASTAPI_DOCKERFILE = os.path.join(REPO_ROOT, "examples", "fastapi", "Dockerfile")


def make_dry(*args):
    env = plain_make_env()
    r = subprocess.run(["make", "-n", "--no-print-directory", *args], cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.replace("\\\n", " ")


def build_args(command):
    """{NAME: value} of the --build-arg NAME=value of the (first) docker build command line."""
    (line,) = [x for x in command.splitlines() if x.startswith("docker build")][:1]
    words = shlex.split(line)
    return dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--build-arg")


def runtime_packages(dockerfile, given):
    """The packages the last stage of dockerfile installs when built with the build arguments
    given (the others at their ARG defaults), as `docker build --build-arg` would expand them."""
    text = open(dockerfile).read().replace("\\\n", " ")
    args = dict(re.findall(r'^ARG (\w+)(?:="([^"]*)")?', text, re.M))
    args.update(given)
    last = re.split(r"^FROM ", text, flags=re.M)[-1]
    declared = set(re.findall(r"^ARG (\w+)", last, re.M))
    pkgs = []
    for m in re.finditer(r"apt-get install ([^&\n]*)", last):
        for word in shlex.split(m.group(1)):
            if word.startswith("$"):
                name = word.strip("${}")
                # an ARG not declared in the stage (again) is empty in it
                pkgs += (args.get(name) or "").split() if name in declared else []
            elif not word.startswith("-"):
                pkgs.append(word)
    return pkgs


@pytest.mark.timeout(60)
def test_make_image_app_pkgs_reach_the_runtime_stage():
    """`make image` passes the Makefile's RUNTIME_PKGS, so a package added to the Dockerfile's
    default was silently dropped; APP_PKGS is the way in, added to the runtime stage."""
    runtime = make_print("print-runtime-pkgs")
    cmd = make_dry("image", "APP_PKGS=python3-pil python3-numpy")
    assert "-f deploy/Dockerfile" in cmd, cmd
    given = build_args(cmd)
    assert given.get("APP_PKGS") == "python3-pil python3-numpy", given
    pkgs = runtime_packages(DOCKERFILE, given)
    assert sorted(pkgs) == sorted(runtime + ["python3-pil", "python3-numpy"]), pkgs
    # and without it, exactly RUNTIME_PKGS
    assert sorted(runtime_packages(DOCKERFILE, build_args(make_dry("image")))) == \
        sorted(runtime)


def dockerignore():
    """[(regex, excluded?)] of .dockerignore's patterns, in order (moby/patternmatcher: `*`
    and `?` stay within a path element, `**` crosses them, `!` re-includes)."""
    rules = []
    for line in open(os.path.join(REPO_ROOT, ".dockerignore")).read().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        pat = os.path.normpath(line.lstrip("!").lstrip("/"))
        rx = ""
        i = 0
        while i < len(pat):
            if pat.startswith("**/", i):
                rx, i = rx + "(?:.*/)?", i + 3
            elif pat.startswith("**", i):
                rx, i = rx + ".*", i + 2
            elif pat[i] == "*":
                rx, i = rx + "[^/]*", i + 1
            elif pat[i] == "?":
                rx, i = rx + "[^/]", i + 1
            else:
                rx, i = rx + re.escape(pat[i]), i + 1
        rules.append((re.compile(rx + r"\Z"), not neg))
    return rules


def ignored(rel, rules):
    """Whether the context leaves rel out: the last rule matching it or a parent decides."""
    parts = rel.split("/")
    out = False
    for k in range(1, len(parts) + 1):
        prefix = "/".join(parts[:k])
        for rx, excl in rules:
            if rx.match(prefix):
                out = excl
        if out:
            return True
    return out


def context_files():
    """The files docker would send as the build context of the repository root."""
    rules, files = dockerignore(), []
    for d, dirs, names in os.walk(REPO_ROOT):
        reld = os.path.relpath(d, REPO_ROOT)
        reld = "" if reld == "." else reld + "/"
        dirs[:] = [x for x in dirs if not ignored(reld + x, rules)]
        files += [reld + n for n in names if not ignored(reld + n, rules)]
    return files


@pytest.mark.timeout(120)
def test_dockerignore_keeps_git_and_build_out_and_the_build_in(tmp_path):
    """`COPY . .` took .git and this machine's build/ into the image's build stage. The context
    now leaves them out, and the build stage's make still finds every file it needs: a dry run
    of its make in a copy of the context succeeds."""
    rules = dockerignore()
    for rel in (".git", ".git/HEAD", "build", "build/lagless", "build/modules/python.so",
                "examples/python/app/__pycache__/cpu.cpython-311.pyc"):
        assert ignored(rel, rules), rel
    files = context_files()
    assert "Makefile" in files and "deploy/lagless.conf" in files
    ctx = tmp_path / "ctx"
    for rel in files:
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(REPO_ROOT, rel), ctx / rel, follow_symlinks=False)
    # the build stage's RUN line, and the COPY sources of both Dockerfiles
    text = open(DOCKERFILE).read()
    run = re.search(r"^RUN (make clean && make .*)$", text, re.M).group(1)
    targets = run.split("&&", 1)[1].split()[2:]
    env = plain_make_env()
    r = subprocess.run(["make", "-n", "--no-print-directory", *targets], cwd=ctx,
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    for path in (DOCKERFILE, EXAMPLE_DOCKERFILE, FASTAPI_DOCKERFILE):
        for line in re.findall(r"^COPY (?!--from)(.*)$", open(path).read(), re.M):
            for src in line.split()[:-1]:  # every source, the destination last
                assert src == "." or os.path.exists(ctx / src), (path, src)


def third_party_imports(folder, own=("app",)):
    """Top-level modules the .py files under folder import that are neither the standard
    library nor the folder's own modules (own) nor the python module's `lagless`."""
    import sys
    own = set(own) | {"lagless"}
    names = set()
    for f in glob.glob(os.path.join(folder, "**", "*.py"), recursive=True):
        src = open(f).read()
        names |= set(re.findall(r"^\s*import (\w+)", src, re.M))
        names |= set(re.findall(r"^\s*from (\w+)[\w.]* import ", src, re.M))
    return sorted(n for n in names if n not in own and n not in sys.stdlib_module_names)


@pytest.mark.timeout(120)
def test_python_example_image(tmp_path):
    """examples/python/Dockerfile: FROM the image `make image` builds, APP_PKGS naming the
    Debian package of every third-party module the app imports, and the configuration it
    writes serving the app from where it copies it."""
    text = open(EXAMPLE_DOCKERFILE).read()
    assert "--build-arg BASE=$(IMAGE)" in open(os.path.join(REPO_ROOT, "Makefile")).read()
    cmd = make_dry("image-python-example")
    assert "-f examples/python/Dockerfile" in cmd and "-f deploy/Dockerfile" in cmd, cmd
    assert re.search(r"^FROM \$\{?BASE\}?$", text, re.M) and "USER lagless" in text
    pkgs = runtime_packages(EXAMPLE_DOCKERFILE, {})
    assert pkgs, "the example installs no package"
    app = os.path.join(REPO_ROOT, "examples", "python")
    imports = third_party_imports(os.path.join(app, "app"))
    assert "PIL" in imports, imports
    debian_release_or_skip()
    import importlib.util
    origins = {}
    for name in imports:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, "%s is not installed here" % name
        origins[name] = spec.origin
    prime_owners(list(origins.values()))
    missing = {n: owner(o) for n, o in origins.items() if owner(o) not in pkgs}
    assert not missing, "imports whose Debian package APP_PKGS lacks: %r" % missing
    # the image's layout: COPY examples/python/app/ /srv/app/app/, the configuration through
    # the RUN sed line; then the server in that layout, with this build's module
    copies = dict(re.findall(r"^COPY (\S+) (\S+)$", text, re.M))
    root = tmp_path / "root"
    shutil.copytree(os.path.join(app, "app"), root / copies["examples/python/app/"].strip("/"))
    conf = root / copies["examples/python/lagless.conf"].lstrip("/")
    conf.parent.mkdir(parents=True)
    shutil.copy(os.path.join(app, "lagless.conf"), conf)
    sed = re.search(r"^RUN (sed -i .*)$", text.replace("\\\n", " "), re.M).group(1)
    sed = sed.replace(copies["examples/python/lagless.conf"], str(conf))
    subprocess.run(["sh", "-c", sed], check=True, timeout=10)
    so = os.path.join(MODULES_DIR, "python.so")
    if not os.path.isfile(so):
        pytest.skip("python.so not built")
    written = conf.read_text()
    assert "path = /usr/local/lib/lagless/modules/python.so" in written, written
    assert re.search(r"(?m)^python_path = /srv/app$", written), written
    assert "COPY --from=build /src/build/modules/ /usr/local/lib/lagless/modules/" in \
        open(DOCKERFILE).read(), "the modules' place in the image"
    conf.write_text(written.replace("/usr/local/lib/lagless/modules/python.so", so)
                    .replace("python_path = /srv/app", "python_path = %s" % (root / "srv/app")))
    srv = Server(["--compute-workers", "1", "-c", str(conf)], workdir=str(tmp_path),
                 start_timeout=30)
    try:
        r = request(srv.port, "POST", "/summary", body=b"[1, 2, 3.5]", timeout=20)
        assert r.status == 200, r
    finally:
        srv.kill_all()


def packages_of(imports):
    """{module: the Debian package that installed it here} of the modules named."""
    import importlib.util
    origins = {}
    for name in imports:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, "%s is not installed here" % name
        origins[name] = spec.origin
    prime_owners(list(origins.values()))
    return {n: owner(o) for n, o in origins.items()}


@pytest.mark.timeout(120)
def test_fastapi_example_image(tmp_path):
    """examples/fastapi/Dockerfile, the whole service in one image: FROM the image `make image`
    builds, APP_PKGS naming the Debian package of every third-party module the app imports and
    of the server its [app] command runs, lagless left PID 1 (the base's ENTRYPOINT), and the
    configuration it writes starting the app (uvicorn) and serving both ways, proxied and in
    the pool, from where it copies them."""
    text = open(FASTAPI_DOCKERFILE).read()
    cmd = make_dry("image-fastapi-example")
    assert "-f examples/fastapi/Dockerfile" in cmd and "-f deploy/Dockerfile" in cmd, cmd
    assert re.search(r"^FROM \$\{?BASE\}?$", text, re.M) and "USER lagless" in text
    # the base's exec-form ENTRYPOINT is what makes lagless PID 1: not replaced here
    code = re.sub(r"(?m)^#.*$", "", text)
    assert "ENTRYPOINT" not in code and "CMD" not in code, code
    assert 'ENTRYPOINT ["/usr/local/bin/lagless"]' in open(DOCKERFILE).read()
    pkgs = runtime_packages(FASTAPI_DOCKERFILE, {})
    app = os.path.join(REPO_ROOT, "examples", "fastapi")
    conf_text = open(os.path.join(app, "lagless.conf")).read()
    served = re.findall(r"(?m)^command = \S*python3 -m (\w+) ", conf_text)
    assert served == ["uvicorn"], served
    imports = third_party_imports(app, own=("main", "lagless_routes"))
    assert "fastapi" in imports, imports
    debian_release_or_skip()
    missing = {n: p for n, p in packages_of(imports + served).items() if p not in pkgs}
    assert not missing, "imports whose Debian package APP_PKGS lacks: %r" % missing
    # the image's layout: the COPY lines, then the RUN sed line on the configuration
    root = tmp_path / "root"
    conf = None
    for line in re.findall(r"^COPY (?!--from)(.*)$", text, re.M):
        *srcs, dest = line.split()
        for src in srcs:
            to = root / dest.lstrip("/")
            if dest.endswith("/"):
                to = to / os.path.basename(src)
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(os.path.join(REPO_ROOT, src), to)
            if src.endswith("lagless.conf"):
                conf = to
    assert conf is not None and (root / "srv/app/main.py").is_file(), "the app's place"
    sed = re.search(r"^RUN (sed -i .*)$", text.replace("\\\n", " "), re.M).group(1)
    sed = sed.replace("/etc/lagless/lagless.conf", str(conf))
    subprocess.run(["sh", "-c", sed], check=True, timeout=10)
    written = conf.read_text()
    assert "path = /usr/local/lib/lagless/modules/python.so" in written, written
    assert re.search(r"(?m)^python_path = /srv/app$", written), written
    assert re.search(r"(?m)^cwd = /srv/app$", written), written
    so = os.path.join(MODULES_DIR, "python.so")
    if not os.path.isfile(so):
        pytest.skip("python.so not built")
    if subprocess.run(["/usr/bin/python3", "-c", "import fastapi, uvicorn"]).returncode:
        pytest.skip("python3-fastapi or python3-uvicorn missing")
    conf.write_text(written.replace("/usr/local/lib/lagless/modules/python.so", so)
                    .replace("= /srv/app", "= %s" % (root / "srv/app")))
    srv = Server(["--compute-workers", "1", "-c", str(conf)], workdir=str(tmp_path),
                 start_timeout=60)
    try:
        assert wait_until(lambda: get(srv.port, "/ready", timeout=5).status == 200, 60), \
            srv.log()[-3000:]
        r = get(srv.port, "/health", timeout=20)
        assert r.status == 200 and r.json()["status"] == "healthy", r
        r = request(srv.port, "POST", "/compute-non-blocking?iterations=1000", body=b"",
                    timeout=20)
        assert r.status == 200 and r.header("x-run-ms") is not None, r
    finally:
        srv.kill_all()
