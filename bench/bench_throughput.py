"""Benchmark 3: throughput reference. wrk against GET /ping on lagless vs wrk against nginx
answering /ping with `return 200 "ok"` (access log off, as its users run it), both with the same
number of event-loop processes, on the same machine, alternated so that noise from other work
lands on both. Informational.

nginx is started by the benchmark itself: its own temporary prefix and configuration, an
ephemeral loopback port, as the current user, stopped by its pid. Skipped (with the reason)
when wrk or nginx is missing or nginx does not start.
"""

import grp
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from common import Lagless, Result, http_get, log

WRK_THREADS = 1       # one client thread: on 2 CPUs the servers get the rest
WRK_CONNECTIONS = 32
WRK_SECONDS = 3
ROUNDS = 2


def nginx_path():
    for p in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if p and os.access(p, os.X_OK):
            return p
    return None


NGINX_CONF = """daemon off;
master_process on;
worker_processes {workers};
worker_rlimit_nofile {nofile};
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
{user}
events {{ worker_connections {conns}; }}
http {{
    access_log off;
    default_type text/plain;
    keepalive_requests 1000000;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {prefix}/www;
        location = /ping {{ return 200 "ok"; }}
        location = /heavy {{ return 503; }}
        location / {{ }}
    }}
}}
"""


def free_port():
    """A port the kernel just handed out for 127.0.0.1 (bound and released: nginx cannot
    report the port it got from port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx in the foreground (daemon off) with a private prefix; stop() by the master pid."""

    def __init__(self, workers, conns=1024):
        self.prefix = tempfile.mkdtemp(prefix="lagless-bench-nginx-")
        os.makedirs(os.path.join(self.prefix, "www"))
        os.makedirs(os.path.join(self.prefix, "tmp"))
        with open(os.path.join(self.prefix, "www", "ping"), "w") as f:
            f.write("ok")
        # As root, nginx would switch its workers to "nobody"; keep the current user.
        user = ("user %s %s;" % (pwd.getpwuid(os.geteuid()).pw_name,
                                 grp.getgrgid(os.getegid()).gr_name)) if os.geteuid() == 0 else ""
        self.proc, self.port = None, None
        for _ in range(3):  # the port may be taken between free_port() and nginx's bind
            port = free_port()
            conf = os.path.join(self.prefix, "nginx.conf")
            with open(conf, "w") as f:
                f.write(NGINX_CONF.format(workers=workers, prefix=self.prefix, user=user,
                                          port=port, conns=conns, nofile=conns + 64))
            self.proc = subprocess.Popen(
                [nginx_path(), "-p", self.prefix, "-c", conf,
                 "-e", os.path.join(self.prefix, "error.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
            if self._wait(port):
                self.port = port
                return
            self.stop()
        raise RuntimeError("nginx did not start: %s" % self.error_log())

    def _wait(self, port):
        end = time.monotonic() + 5
        while time.monotonic() < end and self.proc.poll() is None:
            try:
                if http_get(port, "/ping", timeout=1)[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def error_log(self):
        try:
            with open(os.path.join(self.prefix, "error.log")) as f:
                return f.read()[-1000:]
        except OSError:
            return "(no error log)"

    def stop(self):
        """SIGQUIT (graceful) to the master, SIGKILL after 5 s; nginx's master stops its
        workers itself and they die with it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.prefix, ignore_errors=True)


def wrk(port, path):
    """Requests per second of one bounded wrk run (and its non-2xx count)."""
    out = subprocess.run(["wrk", "-t%d" % WRK_THREADS, "-c%d" % WRK_CONNECTIONS,
                          "-d%ds" % WRK_SECONDS, "http://127.0.0.1:%d%s" % (port, path)],
                         capture_output=True, text=True, timeout=WRK_SECONDS + 30)
    m = re.search(r"Requests/sec:\s+([\d.]+)", out.stdout)
    if out.returncode != 0 or not m:
        raise RuntimeError("wrk failed: %s %s" % (out.stdout, out.stderr))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out.stdout)
    return float(m.group(1)), int(bad.group(1)) if bad else 0


def run(cfg, sz):
    log("== 3. throughput reference: wrk on lagless GET /ping vs wrk on nginx `return 200`")
    if shutil.which("wrk") is None:
        return [Result("3. lagless / nginx requests per second", skipped="wrk not installed")]
    if nginx_path() is None:
        return [Result("3. lagless / nginx requests per second", skipped="nginx not installed")]
    L = sz["loop_workers"]
    log("   inputs: wrk -t%d -c%d -d%ds, %d alternating rounds, best of each; %d event-loop "
        "processes on both servers; nginx answers /ping with `return 200 \"ok\"`, lagless inline"
        % (WRK_THREADS, WRK_CONNECTIONS, WRK_SECONDS, ROUNDS, L))
    try:
        ngx = Nginx(L)
    except (OSError, RuntimeError) as e:
        log("   skipped: %s" % e)
        return [Result("3. lagless / nginx requests per second", skipped=str(e)[:120])]
    srv = Lagless(cfg.bin)
    try:
        ours, theirs, bad = [], [], 0
        wrk(srv.port, "/ping"), wrk(ngx.port, "/ping")  # warm-up
        for _ in range(ROUNDS):
            for port, acc in ((srv.port, ours), (ngx.port, theirs)):
                rps, nbad = wrk(port, "/ping")
                acc.append(rps)
                bad += nbad
    finally:
        srv.stop()
        ngx.stop()
    log("   lagless: %s req/s; nginx %s: %s req/s; non-2xx answers: %d"
        % (" ".join("%.0f" % x for x in ours), nginx_version(),
           " ".join("%.0f" % x for x in theirs), bad))
    r = Result("3. lagless / nginx requests per second", max(ours) / max(theirs), 0.5,
               kind="min", gated=False,
               figures={"lagless_rps": ours, "nginx_rps": theirs, "non_2xx": bad})
    log("   " + r.line())
    return [r]


def nginx_version():
    out = subprocess.run([nginx_path(), "-v"], capture_output=True, text=True, timeout=10)
    m = re.search(r"nginx/(\S+)", out.stderr)
    return m.group(1) if m else "?"
