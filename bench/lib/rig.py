"""The bench rig for bench/run-all and bench/quick: servers (Gatehouse, nginx, HAProxy, a backend
nginx, redis-server) written from small templates, started pinned or not, probed until they serve,
and stopped on exit; CPU time of process trees from /proc; free loopback ports.

Everything binds 127.0.0.1 on ports the kernel picked free; everything lives in one work
directory removed at exit.  Standard library only.
"""

import atexit
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")
FILES = {"test.html": 75, "600.html": 600, "5k.html": 5120, "10k.html": 10240}


class BenchError(Exception):
    """A set-up step failed: the message says which and why."""


# The request headers every proxy under test adds, so that each does the same work per request:
# Gatehouse's defaults (forwarding: X-Forwarded-For, X-Real-IP, X-Forwarded-Proto, and a request id
# sent upstream and echoed to the client), written as an nginx or HAProxy operator would. The shell
# benches read these too (rig_constant in common.sh), so every bench configures the peers alike.
NGINX_FORWARDING_LINES = ("proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
                          "proxy_set_header X-Real-IP $remote_addr;",
                          "proxy_set_header X-Forwarded-Proto $scheme;",
                          "proxy_set_header X-Request-Id $request_id;",
                          "add_header X-Request-Id $request_id always;")
NGINX_FORWARDING = " ".join(NGINX_FORWARDING_LINES)
HAPROXY_FORWARDING = ("    option forwardfor\n    http-request set-header X-Real-IP %[src]\n"
                      "    http-request set-header X-Forwarded-Proto %[ssl_fc,iif(https,http)]\n"
                      "    unique-id-format %[uuid()]\n    unique-id-header X-Request-Id\n"
                      "    http-after-response set-header X-Request-Id %[unique-id]\n")
# The reports' line on it.
SAME_HEADERS_NOTE = ("- Same work per request: every proxy adds X-Forwarded-For, X-Real-IP, X-Forwarded-Proto and an "
                     "X-Request-Id sent upstream and echoed to the client (Gatehouse's defaults; nginx "
                     "`proxy_set_header` and `add_header ... always` with `$request_id`; HAProxy `option "
                     "forwardfor`, `http-request set-header`, `unique-id-header`).")

# What Gatehouse's gateway service /svc does per request (classic.py's gateway experiment), in
# each peer's own configuration: the app key in the path (/svc/~KEY/...) checked (401 otherwise),
# GET and HEAD only (403), a rate limit of 1,000,000/s on the key (counts every request, refuses
# none), /svc/~KEY stripped before forwarding, a request header set and a response header removed.
# The http-level lines and the location of nginx; KEY and PROXY are filled in.
NGINX_GATEWAY = (
    '    map $uri $svc_key_ok { "~^/svc/~KEY(/|$)" 1; default 0; }\n'
    "    limit_req_zone $svc_key_ok zone=plan:1m rate=1000000r/s;\n",
    "        location /svc {\n"
    "            if ($svc_key_ok = 0) { return 401; }\n"
    "            limit_except GET { deny all; }\n"
    "            limit_req zone=plan burst=1000000 nodelay;\n"
    "            rewrite ^/svc/~[^/]+/?(.*)$ /$1 break;\n"
    "            proxy_hide_header X-Powered-By;\n"
    "            PROXY proxy_set_header X-Gateway gatehouse;\n"
    "        }\n")
# The frontend lines and the stick table's backend of HAProxy; KEY is filled in.
HAPROXY_GATEWAY = (
    "    acl svc path /svc\n    acl svc path_beg /svc/\n"
    "    acl svc_key path_reg ^/svc/~KEY(/|$)\n"
    "    http-request deny deny_status 401 if svc !svc_key\n"
    "    http-request deny deny_status 403 if svc !METH_GET\n"
    "    http-request track-sc0 str(KEY) table plan if svc\n"
    "    http-request deny deny_status 429 if svc { sc_http_req_rate(0) gt 1000000 }\n"
    "    http-request set-var(txn.svc) bool(true) if svc\n"
    "    http-request set-header X-Gateway gatehouse if svc\n"
    "    http-request set-path %[path,regsub(^/svc/~[^/]+/?,/)] if svc\n"
    "    http-response del-header X-Powered-By if { var(txn.svc) -m bool }\n",
    "backend plan\n    stick-table type string len 32 size 16 expire 10s store http_req_rate(1s)\n")


def free_ports(n):
    """N distinct loopback ports the kernel reports free (bound at once, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def tree_pids(pid):
    """PID and all its descendants (from /proc/*/stat parent links)."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(kids.get(p, []))
    return out


def tree_cpu(pid):
    """CPU used so far by PID's process tree: (utime + stime in seconds, threads included, exited
    children not; {thread id: seconds on CPU} from schedstat, the scheduler's exact clock)."""
    ticks, threads = 0, {}
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        ticks += int(fields[11]) + int(fields[12])
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/schedstat") as f:
                    threads[tid] = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            pass
    return ticks / CLK_TCK, threads


def cpu_between(a, b):
    """CPU seconds between two `tree_cpu` snapshots: from schedstat when every thread of A is
    still there in B (10 ms ticks are too coarse for a run that takes a tenth of a second of CPU),
    else from the ticks (an ended thread took its time out of the sum)."""
    (ticks_a, threads_a), (ticks_b, threads_b) = a, b
    if threads_a and all(t in threads_b for t in threads_a):
        return sum(threads_b.values()) - sum(threads_a.values())
    return ticks_b - ticks_a


def tree_rss_kb(pid):
    """Summed VmRSS of PID's process tree, kB."""
    total = 0
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def steal_busy():
    """(steal, busy) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iow, irq, softirq, steal = v[:8]
    return steal, user + nice + system + irq + softirq


def http_get(url, timeout=2.0, headers=None):
    """(status, body) of one GET; TLS certificates are not verified (the rig makes its own)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, ssl.SSLError):
        return None, b""


class Proc:
    """One started server: its Popen, name, ports and log files."""

    def __init__(self, name, popen, out, err, **kw):
        self.name, self.popen, self.out, self.err = name, popen, out, err
        self.pid = popen.pid
        self.__dict__.update(kw)

    def alive(self):
        return self.popen.poll() is None

    def cpu(self):
        return tree_cpu(self.pid)

    def rss_kb(self):
        return tree_rss_kb(self.pid)

    def logs(self):
        text = []
        for f in (self.out, self.err, getattr(self, "error_log", None)):
            if f and os.path.exists(f):
                with open(f, errors="replace") as fh:
                    tail = fh.read()[-3000:]
                if tail.strip():
                    text.append(f"--- {f}\n{tail}")
        return "\n".join(text)


class Rig:
    """Owns the work directory and every process started; stops them all at exit."""

    def __init__(self, gatehouse_bin, keep=False):
        self.gatehouse_bin = gatehouse_bin
        self.work = tempfile.mkdtemp(prefix="gatehouse-bench-")
        self.keep = keep
        self.procs = []
        self.nofile = self._raise_nofile()
        self.user_line = "user root;" if os.geteuid() == 0 else ""
        self.www = os.path.join(self.work, "www")
        os.makedirs(self.www)
        for name, size in FILES.items():
            head, tail = b"<html><body>", b"</body></html>\n"
            with open(os.path.join(self.www, name), "wb") as f:
                f.write(head + b"x" * (size - len(head) - len(tail)) + tail)
        atexit.register(self.close)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, _frame):
        self.close()
        raise SystemExit(128 + signum)

    @staticmethod
    def _raise_nofile():
        """Raise RLIMIT_NOFILE to 65536 (the hard limit too when allowed) for 10,000-connection runs."""
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 65536
        if hard != resource.RLIM_INFINITY and hard < want:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
                return want
            except (ValueError, OSError):
                want = hard
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        return want

    def close(self):
        for p in reversed(self.procs):
            self.stop(p)
        self.procs = []
        if not self.keep and os.path.isdir(self.work):
            shutil.rmtree(self.work, ignore_errors=True)

    def stop(self, p):
        """TERM the tree, 5 s for a graceful exit, then KILL."""
        if p.popen.poll() is None:
            pids = tree_pids(p.pid)
            for q in pids:
                try:
                    os.kill(q, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                p.popen.wait(5)
            except subprocess.TimeoutExpired:
                for q in tree_pids(p.pid):
                    try:
                        os.kill(q, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                p.popen.wait(5)
        if p in self.procs:
            self.procs.remove(p)

    def dir(self, name):
        d = os.path.join(self.work, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    def start(self, name, cmd, cpu=None, **kw):
        d = os.path.join(self.work, name)
        os.makedirs(d, exist_ok=True)
        out, err = os.path.join(d, "stdout"), os.path.join(d, "stderr")
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu)] + cmd
        with open(out, "wb") as o, open(err, "wb") as e:
            popen = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        p = Proc(name, popen, out, err, **kw)
        self.procs.append(p)
        return p

    def wait_serving(self, p, url, size=None, limit=15.0, headers=None):
        """Poll URL until it answers 200 (with SIZE bytes when given); raise with the logs if not."""
        deadline = time.monotonic() + limit
        got = None
        while time.monotonic() < deadline:
            if not p.alive():
                raise BenchError(f"{p.name} exited during start-up\n{p.logs()}")
            status, body = http_get(url, headers=headers)
            got = (status, len(body))
            if status == 200 and (size is None or len(body) == size):
                return
            time.sleep(0.05)
        raise BenchError(f"{p.name} not serving {url} after {limit:.0f} s (last: {got})\n{p.logs()}")

    # ------------------------------------------------------------------ nginx
    def nginx_head(self, d, workers, extra_events=""):
        return (f"{self.user_line}\ndaemon off;\nmaster_process on;\nworker_processes {workers};\n"
                f"worker_rlimit_nofile {self.nofile};\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n"
                f"events {{ worker_connections {self.nofile - 100}; {extra_events} }}\n"
                f"http {{\n    client_body_temp_path {d}/cb; proxy_temp_path {d}/px; fastcgi_temp_path {d}/fc;\n"
                f"    uwsgi_temp_path {d}/uw; scgi_temp_path {d}/sc;\n    access_log off;\n"
                "    keepalive_timeout 75s;\n    keepalive_requests 1000000;\n")

    def _nginx_start(self, name, d, conf, cpu):
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        errlog = os.path.join(d, "error.log")
        chk = subprocess.run(["nginx", "-t", "-q", "-p", d, "-e", errlog, "-c", path], capture_output=True, text=True)
        if chk.returncode != 0:
            raise BenchError(f"nginx rejected {path}: {chk.stderr.strip()}")
        return self.start(name, ["nginx", "-p", d, "-e", errlog, "-c", path], cpu, error_log=errlog, conf=path)

    def backend(self, cpu=0, tls_bundle=None, name="backend"):
        """nginx, 1 worker, serving the www files (plain HTTP; TLS on its own port with TLS_BUNDLE)."""
        d = self.dir(name)
        port, tls_port = free_ports(2)
        tls = ""
        if tls_bundle:
            tls = (f"    server {{\n        listen 127.0.0.1:{tls_port} ssl http2 backlog=4096;\n"
                   f"        ssl_certificate {tls_bundle}; ssl_certificate_key {tls_bundle};\n"
                   "        ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:SSL:10m;\n"
                   f"        root {self.www};\n        location / {{ }}\n    }}\n")
        conf = (self.nginx_head(d, 1) + "    types { text/html html; }\n    sendfile on;\n    tcp_nopush on;\n"
                "    open_file_cache max=64 inactive=60s;\n"
                f"    server {{\n        listen 127.0.0.1:{port} backlog=4096;\n        root {self.www};\n"
                "        location / { }\n"
                "        location ~ ^/r[0-9]+(/.*)$ { try_files $1 =404; }\n"
                "        location = /nginx_status { stub_status; allow 127.0.0.1; deny all; }\n    }\n"
                f"{tls}}}\n")
        p = self._nginx_start(name, d, conf, cpu)
        p.port, p.tls_port = port, tls_port if tls_bundle else None
        self.wait_serving(p, f"http://127.0.0.1:{port}/test.html", 75, limit=10)
        return p

    def nginx_proxy(self, backend_port, cpu=None, workers=1, bundle=None, reuseport=False, accept_mutex=None,
                    routes=0, store_dir=None, name="nginx", tickets=True, cache=True, ticket_key=None, h2=True,
                    deferred=False, gateway_key=None):
        """nginx as a keep-alive reverse proxy; TLS with BUNDLE; ROUTES prefix locations /rI/;
        GATEWAY_KEY adds /svc doing what Gatehouse's gateway service does (NGINX_GATEWAY);
        DEFERRED adds `deferred` to the listen line (TCP_DEFER_ACCEPT; nginx's default is off)."""
        d = self.dir(name)
        (port,) = free_ports(1)
        events = ""
        if accept_mutex is not None:
            events = f"accept_mutex {'on' if accept_mutex else 'off'};"
        listen = f"listen 127.0.0.1:{port}" + (" deferred" if deferred else "")
        tls = ""
        if bundle:
            listen += " ssl" + (" http2" if h2 else "")
            cert = f"ssl_certificate {bundle}; ssl_certificate_key {bundle};"
            smap = ""
            if store_dir:
                smap = (f"    map $ssl_server_name $store_bundle {{ \"~^(n[0-9]+\\.bench\\.test)$\" {store_dir}/$1.pem;"
                        f" default {bundle}; }}\n")
                cert = "ssl_certificate $store_bundle; ssl_certificate_key $store_bundle;"
            tls = (smap + "    ssl_protocols TLSv1.2 TLSv1.3;\n"
                   f"    ssl_session_cache {'shared:SSL:10m' if cache else 'off'};\n    ssl_session_timeout 5m;\n"
                   f"    ssl_session_tickets {'on' if tickets else 'off'};\n"
                   + (f"    ssl_session_ticket_key {ticket_key};\n" if ticket_key else ""))
            listen += f" backlog=4096{' reuseport' if reuseport else ''};\n        {cert}"
        else:
            listen += f" backlog=4096{' reuseport' if reuseport else ''};"
        proxy = "proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection \"\"; " + NGINX_FORWARDING
        locs = "".join(f"        location /r{i}/ {{ {proxy} }}\n" for i in range(routes))
        gw = ""
        if gateway_key:
            gw_http, gw_loc = NGINX_GATEWAY
            gw = gw_http.replace("KEY", gateway_key)
            locs += gw_loc.replace("PROXY", proxy)
        conf = (self.nginx_head(d, workers, events) + tls + gw
                + f"    upstream backend {{ server 127.0.0.1:{backend_port}; keepalive 2048;"
                " keepalive_requests 1000000; keepalive_timeout 60s; }\n"
                f"    server {{\n        {listen}\n        location / {{ {proxy} }}\n{locs}    }}\n}}\n")
        p = self._nginx_start(name, d, conf, cpu)
        p.port = port
        p.scheme = "https" if bundle else "http"
        self.wait_serving(p, f"{p.scheme}://127.0.0.1:{port}/test.html", 75, limit=30)
        return p

    # ---------------------------------------------------------------- HAProxy
    def haproxy(self, backend_port, cpu=None, threads=1, bundle=None, per_thread_bind=False, routes=0,
                store_dir=None, name="haproxy", maxconn=None, tickets=True, cache=True, ticket_keys=None,
                gateway_key=None):
        """HAProxy as a keep-alive reverse proxy (http-reuse always); ROUTES map_beg entries /rI/;
        GATEWAY_KEY adds /svc doing what Gatehouse's gateway service does (HAPROXY_GATEWAY)."""
        d = self.dir(name)
        (port,) = free_ports(1)
        maxconn = maxconn or (self.nofile - 200) // 2  # HAProxy reserves 2 fds per connection
        opts = ""
        if bundle:
            crt = f"crt {bundle}" + (f" crt {store_dir}/" if store_dir else "")
            opts = f" ssl {crt} alpn h2,http/1.1 ssl-min-ver TLSv1.2" + ("" if tickets else " no-tls-tickets")
            if ticket_keys:
                opts += f" tls-ticket-keys {ticket_keys}"
        if per_thread_bind and threads > 1:
            binds = "".join(f"    bind 127.0.0.1:{port}{opts} thread {t}\n" for t in range(1, threads + 1))
        else:
            binds = f"    bind 127.0.0.1:{port}{opts}\n"
        use = "    default_backend be\n"
        if routes:
            mpath = os.path.join(d, "routes.map")
            with open(mpath, "w") as f:
                f.writelines(f"/r{i}/ be\n" for i in range(routes))
            use = f"    use_backend %[path,map_beg({mpath},be)]\n"
        cfg = (f"global\n    nbthread {threads}\n    maxconn {maxconn}\n"
               f"    tune.ssl.cachesize {20000 if cache else 0}\n    tune.ssl.lifetime 300\n"
               "defaults\n    mode http\n    option http-keep-alive\n    timeout connect 5s\n"
               "    timeout client 60s\n    timeout server 60s\n    timeout http-request 10s\n"
               "    timeout http-keep-alive 60s\n"
               f"frontend fe\n{binds}{HAPROXY_FORWARDING}"
               + (HAPROXY_GATEWAY[0].replace("KEY", gateway_key) if gateway_key else "")
               + f"{use}backend be\n    http-reuse always\n"
               f"    server backend 127.0.0.1:{backend_port}\n"
               + (HAPROXY_GATEWAY[1] if gateway_key else ""))
        path = os.path.join(d, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(cfg)
        if not store_dir:
            chk = subprocess.run(["haproxy", "-c", "-q", "-f", path], capture_output=True, text=True)
            if chk.returncode != 0:
                raise BenchError(f"haproxy rejected {path}: {chk.stdout}{chk.stderr}")
        p = self.start(name, ["haproxy", "-db", "-f", path], cpu, conf=path)
        p.port = port
        p.scheme = "https" if bundle else "http"
        self.wait_serving(p, f"{p.scheme}://127.0.0.1:{port}/test.html", 75, limit=300 if store_dir else 30)
        return p

    # -------------------------------------------------------------- Gatehouse
    def gatehouse(self, backend_port, cpu=None, workers=1, reuse_port=True, bundle=None, routes=0,
                  store_dir=None, name="gatehouse", tickets="local", session_cache="local", redis=None,
                  secret_file=None, gateway=False, app_key="BENCHKEY123", wait_path="/test.html", defer_accept=True):
        """Gatehouse proxying to BACKEND_PORT; TLS with BUNDLE (and a directory store); ROUTES prefix
        routes /rI/; GATEWAY adds the service /svc (app key, ACL, a local rate-limit plan, header
        rewrite) and the bare service /plain."""
        d = self.dir(name)
        port, admin = free_ports(2)
        y = []
        if redis:
            y.append(f'redis: {{ url: "redis://127.0.0.1:{redis}/0", secret_file: "{secret_file}" }}')
        y += [f"workers: {workers}", f"reuse_port: {'true' if reuse_port else 'false'}", "cpu_affinity: off",
              'access_log: { path: "off" }', f'admin: {{ bind: "127.0.0.1:{admin}", public: [/healthz, /metrics, /status] }}']
        lst = f'  main: {{ bind: "127.0.0.1:{port}", max_connections: 30000, defer_accept: {str(defer_accept).lower()}'
        if bundle:
            y += ["tls:", f'  certificates: [{{ cert: "{bundle}" }}]']
            if store_dir:
                y.append(f'  store: {{ dir: "{store_dir}", scan_interval: 60s }}')
            y += ["  default_certificate: bench.test", f"  tickets: {tickets}", f"  session_cache: {session_cache}"]
            lst += ", tls: { versions: [tls1.2, tls1.3] }"
        y += ["listeners:", lst + " }"]
        y += ["upstreams:", "  backend:", f'    targets: ["127.0.0.1:{backend_port}"]',
              "    keepalive: { max_idle: 2048, idle_timeout: 60s }", "    retries: 0",
              "sites:", "  all:", '    hosts: ["*"]', "    routes:", "      - { path: /, upstream: backend }"]
        y += [f"      - {{ path: /r{i}/, upstream: backend }}" for i in range(routes)]
        if gateway:
            y += ["services:", "  plain: { path: /plain, upstream: backend }", "  svc:", "    path: /svc",
                  "    upstream: backend", "    auth: app_key",
                  '    acl: { allow: [{ methods: [GET, HEAD], paths: ["/**"] }] }',
                  "    headers: { request: { set: { x-gateway: gatehouse } }, response: { remove: [x-powered-by] } }",
                  "apps:", f"  bench: {{ key: {app_key}, grants: {{ svc: gold }} }}",
                  "plans:", "  gold: { rate_limits: [{ limit: 1000000, interval: 1s }] }"]
        path = os.path.join(d, "gatehouse.yaml")
        with open(path, "w") as f:
            f.write("\n".join(y) + "\n")
        chk = subprocess.run([self.gatehouse_bin, "check", path], capture_output=True, text=True)
        if chk.returncode != 0:
            raise BenchError(f"gatehouse check rejected {path}:\n{chk.stdout}{chk.stderr}")
        p = self.start(name, [self.gatehouse_bin, "run", "--config", path], cpu, conf=path)
        p.port, p.admin = port, admin
        p.scheme = "https" if bundle else "http"
        self.wait_serving(p, f"http://127.0.0.1:{admin}/healthz", limit=60)
        if wait_path:
            self.wait_serving(p, f"{p.scheme}://127.0.0.1:{port}{wait_path}", limit=30)
        return p

    def redis(self, cpu=None):
        (port,) = free_ports(1)
        p = self.start("redis", ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no"], cpu)
        p.port = port
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
            if r.stdout.strip() == "PONG":
                return p
            if not p.alive():
                break
            time.sleep(0.05)
        raise BenchError(f"redis-server did not answer PING\n{p.logs()}")


def metrics(admin_port):
    """Gatehouse's admin /metrics as {series: value} (labels kept in the key)."""
    status, body = http_get(f"http://127.0.0.1:{admin_port}/metrics")
    out = {}
    if status != 200:
        return out
    for line in body.decode(errors="replace").splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out
