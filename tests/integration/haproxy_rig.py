"""Three (or more) lagless replicas behind Debian's real haproxy, on loopback, for the load
balancer tests (issue 21). The haproxy configuration is derived from the reference one,
deploy/haproxy.cfg: its bind line and server lines are replaced by loopback ones, a stats
socket is added; every other directive is kept as shipped. haproxy and the replicas are
started by the tests and stopped by their PIDs."""
import os
import re
import socket
import subprocess
import threading
import time
import http.client

from conftest import REPO_ROOT, Server, free_port, wait_until

HAPROXY = "/usr/sbin/haproxy"
REFERENCE = os.path.join(REPO_ROOT, "deploy", "haproxy.cfg")
AGENT_LINE_RE = re.compile(rb"^(ready|drain) (\d+)%( maxconn:\d+)?\n$")


def agent_line(port, timeout=3.0):
    """What the agent at port answers to one connection (bytes until it closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        data = b""
        while True:
            chunk = s.recv(256)
            if not chunk:
                return data
            data += chunk


def agent_weight(port):
    m = AGENT_LINE_RE.match(agent_line(port))
    return (m.group(1).decode(), int(m.group(2))) if m else (None, None)


class Replica:
    """One lagless on fixed loopback ports (so a restart comes back where haproxy expects it)."""

    def __init__(self, workdir, compute=1, queue=None, agent=True, extra=()):
        self.workdir, self.compute, self.queue, self.agent, self.extra = \
            workdir, compute, queue, agent, list(extra)
        self.port, self.agent_port = free_port(), free_port()
        self.srv, self.runs = None, 0
        os.makedirs(workdir, exist_ok=True)

    def start(self):
        self.runs += 1
        # --trusted-proxies: the reference's replica command line (haproxy connects from it)
        args = ["--listen", "127.0.0.1:%d" % self.port, "--trusted-proxies", "127.0.0.1",
                "--loop-workers", "1",
                "--compute-workers", str(self.compute), "--enable-test-jobs", "1"]
        if self.queue is not None:
            args += ["--queue", str(self.queue)]
        if self.agent:
            args += ["--agent-listen", "127.0.0.1:%d" % self.agent_port]
        d = os.path.join(self.workdir, "run%d" % self.runs)
        os.makedirs(d)
        self.srv = Server(args + self.extra, workdir=d, listen=False, start_timeout=20)
        return self

    def stop(self):
        if self.srv is not None:
            self.srv.kill_all()


def haproxy_config(tmp, fe_port, replicas, balance=None, backend="be_lagless", agent=True):
    """The reference configuration with loopback binds and servers; balance replaces the
    backend's balance line (e.g. "roundrobin") when given; agent=False drops the agent checks
    (a baseline without them)."""
    out, section = [], None
    sock = os.path.join(tmp, "haproxy.sock")
    for line in open(REFERENCE).read().splitlines():
        s = line.strip()
        head = re.match(r"^(global|defaults|frontend|backend)\b\s*(\S*)", line)
        if head:
            section = head.group(2) or head.group(1)
        if section == "global" and s == "global":
            out += [line, "    stats socket %s level admin" % sock]
            continue
        if section == "global" and s.startswith("maxconn "):
            out.append("    maxconn 2000")  # the test's descriptor limit, not production's
            continue
        if s.startswith("bind "):
            out.append("    bind 127.0.0.1:%d" % fe_port)
            continue
        if s.startswith("server "):
            if s.startswith("server r1 "):
                for i, r in enumerate(replicas):
                    out.append("    server r%d 127.0.0.1:%d" % (i + 1, r.port) +
                               (" agent-port %d" % r.agent_port if agent else ""))
            continue
        if balance and section == backend and s.startswith("balance "):
            out.append("    balance %s" % balance)
            continue
        if not agent and s.startswith("default-server "):
            line = line.replace(" agent-check agent-inter 1s", "")
        out.append(line)
    path = os.path.join(tmp, "haproxy.cfg")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path, sock


class HAProxy:
    def __init__(self, tmp, replicas, balance=None, agent=True):
        self.tmp, self.port = tmp, free_port()
        self.cfg, self.sock = haproxy_config(tmp, self.port, replicas, balance, agent=agent)
        if os.path.exists(self.sock):
            os.unlink(self.sock)  # a previous haproxy's, in the same directory
        check = subprocess.run([HAPROXY, "-c", "-q", "-f", self.cfg], capture_output=True)
        assert check.returncode == 0, check.stderr.decode()
        self.log = open(os.path.join(tmp, "haproxy.log"), "wb")
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", self.cfg], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        assert wait_until(self.answers, 10), "haproxy did not start"

    def answers(self):
        try:
            return "pxname" in self.command("show stat")
        except OSError:
            return False

    def command(self, cmd):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(self.sock)
            s.sendall(cmd.encode() + b"\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return data.decode()
                data += chunk

    def stats(self, backend="be_lagless"):
        """{server: {column: value}} from "show stat" for backend."""
        lines = self.command("show stat").splitlines()
        cols = lines[0].lstrip("# ").split(",")
        out = {}
        for line in lines[1:]:
            row = dict(zip(cols, line.split(",")))
            if row.get("pxname") == backend and row.get("svname") not in ("FRONTEND", "BACKEND"):
                out[row["svname"]] = row
        return out

    def all_up(self, n, backend="be_lagless"):
        st = self.stats(backend)
        return len(st) == n and all(r["status"] == "UP" and r["agent_status"] in ("CHECKED", "L7OK")
                                    for r in st.values())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


class Stream(threading.Thread):
    """Clients through haproxy: `clients` threads, each sending GET path in a loop on a
    keep-alive connection (reconnecting when it closes), pausing `pause` s between requests,
    and `backoff` s after an answer other than 200 (as a client honouring Retry-After would),
    recording (time, status or error name), until stopped or `limit` s pass."""

    def __init__(self, port, path, clients=2, pause=0.02, limit=120, backoff=0.1):
        super().__init__(daemon=True)
        self.port, self.path, self.clients, self.pause, self.limit, self.backoff = \
            port, path, clients, pause, limit, backoff
        self.results, self.halt, self.lock = [], threading.Event(), threading.Lock()

    def one(self):
        conn, end = None, time.monotonic() + self.limit
        while not self.halt.is_set() and time.monotonic() < end:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                conn.request("GET", self.path)
                r = conn.getresponse()
                r.read()
                out = r.status
                if r.getheader("connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                out = type(e).__name__
                if conn is not None:
                    conn.close()
                conn = None
            with self.lock:
                self.results.append((time.monotonic(), out))
            if self.pause or out != 200:
                time.sleep(self.pause if out == 200 else self.backoff)
        if conn is not None:
            conn.close()

    def run(self):
        threads = [threading.Thread(target=self.one, daemon=True) for _ in range(self.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def stop(self):
        self.halt.set()
        self.join(60)
        return list(self.results)

    def count(self):
        with self.lock:
            return len(self.results)

    def since(self, t0):
        with self.lock:
            return [r for t, r in self.results if t >= t0]
