#!/usr/bin/env python3
"""The classic access-layer experiments of bench/run-all and bench/quick, each beside nginx and
HAProxy in the same run.  One experiment per call; its runs go to a JSON file that
bench/lib/report.py turns into BENCHMARKS.md tables and bench/lib/charts.py into PNG charts.

Experiments (see EXPERIMENTS; sizes per profile in PROFILES):
    access     HTTPS through the access layer vs HTTPS terminated at the backend (ab, new
               connection per request as the original report, a longer run, and keep-alive)
    reuseport  one listener per worker vs one shared listener, 2 workers, a new connection per
               request (wrk, Connection: close), concurrency swept; nginx reuseport and
               accept_mutex on/off, HAProxy one bind per thread
    h2h1       HTTP/2 vs HTTP/1.1 over TLS, 5 KB and 10 KB objects, h2load -c and -m swept
    session    two nodes: a session made on node A resumed on node B, session store off/on
    gateway    direct vs the API gateway (app key in the path + ACL + rate-limit plan + header
               rewrite) vs the bare route vs nginx and HAProxy as proxies, ab -k -c 100
    routes     throughput and p99 vs number of routes (prefix routes /rI/, random route each request)
    certs      full handshakes vs certificates in the store (random SNI), start-up time and RSS
    conns      throughput and p99 vs concurrent keep-alive connections
    memory     RSS vs idle TLS keep-alive connections

Layout unless said otherwise: the server under test alone on CPU 1 with one worker (Gatehouse
`workers: 1`, nginx `worker_processes 1`, HAProxy `nbthread 1`), the backend nginx (1 worker)
and the load generator on CPU 0.  Every point runs REPS times; the order of the targets is
rotated by one each rep.

Usage: classic.py EXPERIMENT --out FILE.json [--profile full|quick] [--gatehouse BIN] [--reps N]
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loadgen  # noqa: E402
from rig import CLK_TCK, BenchError, Rig, cpu_between, http_get, metrics, steal_busy  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
CACHE = os.path.join(BENCH, ".cache")
KEY = "BENCHKEY123"

# Sizes per profile: full is what run-all uses (about 23 minutes for all), quick is bench/quick's.
PROFILES = {
    "full": {
        "reps": 3,
        "access_points": [(2000, 50, False), (4000, 50, False), (50000, 50, True)],
        "reuse_conc": [100, 300, 1000], "reuse_dur": 2,
        "h2_points": {"5k.html": [(True, 100, 1), (True, 1000, 1), (False, 100, 1), (False, 100, 10),
                                  (False, 100, 100), (False, 1000, 10)],
                      "10k.html": [(True, 100, 1), (False, 100, 10)]},
        "h2_dur": 1.0,
        "session_n": 3000, "session_conns": 50, "session_versions": ["1.2", "1.3"],
        "gateway_n": 1000000, "gateway_targets": ["direct", "gatehouse-gateway", "nginx", "haproxy"],
        "routes": [1, 100, 10000], "routes_dur": 2,
        "certs": [1, 1000, 10000, 100000], "certs_n": 3000, "haproxy_max_certs": 10000,
        "conns": [100, 1000, 10000], "conns_dur": 3, "conns_reps": 5,
        "memory": [2500, 5000, 10000], "haproxy_max_idle": 5000,
    },
    "quick": {
        "reps": 1,
        "access_points": [(2000, 50, False), (20000, 50, True)],
        "reuse_conc": [200], "reuse_dur": 2,
        "h2_points": {"5k.html": [(True, 100, 1), (False, 100, 10)]}, "h2_dur": 1.5,
        "session_n": 600, "session_conns": 50, "session_versions": ["1.3"],
        "gateway_n": 100000, "gateway_targets": ["direct", "gatehouse-gateway", "nginx", "haproxy"],
        "routes": [1, 10000], "routes_dur": 2,
        "certs": [1000], "certs_n": 600, "haproxy_max_certs": 1000,
        "conns": [1000], "conns_dur": 2, "conns_reps": 1,
        "memory": [2000], "haproxy_max_idle": 2000,
    },
}


def log(msg):
    print(f"[classic] {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def rotated(items, n):
    n %= len(items)
    return items[n:] + items[:n]


def certs_dir(count=None):
    """The cached bench certificates (bench/lib/tls_certs.py): bundles ecdsa.pem, rsa.pem and,
    with COUNT, a store of COUNT bundles n0..n{COUNT-1}.bench.test."""
    d = os.path.join(CACHE, "tls-certs-100k" if count else "tls-certs")
    os.makedirs(CACHE, exist_ok=True)
    gi = os.path.join(CACHE, ".gitignore")
    if not os.path.exists(gi):
        with open(gi, "w") as f:
            f.write("*\n")
    r = subprocess.run([sys.executable, os.path.join(HERE, "tls_certs.py"), d, "--store-count",
                        str(100000 if count else 10000)], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"tls_certs.py failed: {r.stderr}")
    return d, r.stdout.strip()


class Recorder:
    """Collects the runs of one experiment; saved as JSON after every run (a cut-off run keeps
    what it measured)."""

    def __init__(self, exp, out, profile, reps):
        self.out = out
        self.doc = {"experiment": exp, "profile": profile, "reps": reps,
                    "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                    "runs": [], "notes": [], "setup": {}}
        self.t0 = time.monotonic()

    def note(self, text):
        self.doc["notes"].append(text)

    def add(self, point, target, rep, res):
        res = dict(res)
        res.update({"point": point, "target": target, "rep": rep})
        self.doc["runs"].append(res)
        flag = "" if res.get("ok") else "  NOT OK"
        log(f"{self.doc['experiment']} {point} {target} rep {rep}: {res.get('rps', 0):,.0f}/s"
            f" mean {res.get('mean_ms') or 0:.2f} ms{flag}")
        self.save()

    def save(self):
        self.doc["took_s"] = round(time.monotonic() - self.t0, 1)
        tmp = self.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1)
        os.replace(tmp, self.out)


def measured(procs, fn):
    """Run FN (a load generator) and add the CPU seconds each of PROCS ({role: Proc}) used, the
    wall time and the hypervisor steal over it."""
    c0 = {k: p.cpu() for k, p in procs.items() if p}
    s0, b0 = steal_busy()
    t0 = time.monotonic()
    try:
        res = fn()
    except loadgen.LoadError as e:
        # A load generator that fails or hangs makes a failed run, not a failed experiment.
        res = {"ok": False, "error": str(e)[:500], "rps": 0, "requests": 0}
    wall = time.monotonic() - t0
    s1, b1 = steal_busy()
    res["cpu_s"] = {k: round(cpu_between(c0[k], p.cpu()), 4) for k, p in procs.items() if p}
    res["wall_s"] = round(wall, 3)
    res["steal_pct"] = round((s1 - s0) / CLK_TCK / wall * 100, 1)
    res["busy_pct"] = round((b1 - b0) / CLK_TCK / wall * 100, 1)
    return res


def expect(p, url, size, headers=None):
    status, body = http_get(url, headers=headers)
    if status != 200 or len(body) != size:
        raise BenchError(f"{p.name}: GET {url} -> {status}, {len(body)} bytes (want 200, {size})")


# --------------------------------------------------------------------------- experiments
def exp_access(rig, prof, rec):
    _, _ = certs_dir()
    bundle = os.path.join(CACHE, "tls-certs", "ecdsa.pem")
    backend = rig.backend(cpu=0)
    direct = rig.backend(cpu=1, tls_bundle=bundle, name="direct")
    servers = {
        "direct": (direct, direct.tls_port),
        "gatehouse": (gh := rig.gatehouse(backend.port, cpu=1, bundle=bundle), gh.port),
        "nginx": (ng := rig.nginx_proxy(backend.port, cpu=1, bundle=bundle), ng.port),
        "haproxy": (hp := rig.haproxy(backend.port, cpu=1, bundle=bundle), hp.port),
    }
    for name, (p, port) in servers.items():
        expect(p, f"https://127.0.0.1:{port}/600.html", 600)
    rec.doc["setup"] = {"file": "600.html (600 bytes)", "certificate": "ECDSA P-256",
                        "direct": "nginx (1 worker, CPU 1) terminating TLS and serving the file itself",
                        "load": "ab on CPU 0 with the backend"}
    names = list(servers)
    for n, c, keep in prof["access_points"]:
        point = f"ab {'-k ' if keep else ''}-n {n} -c {c}"
        for rep in range(1, prof["reps"] + 1):
            for t in rotated(names, rep - 1):
                p, port = servers[t]
                procs = {"server": p} if t == "direct" else {"server": p, "backend": backend}
                res = measured(procs, lambda: loadgen.ab(f"https://127.0.0.1:{port}/600.html", n, c, keep, cpu=0))
                rec.add(point, t, rep, res)


def exp_reuseport(rig, prof, rec):
    backend = rig.backend(cpu=None)
    targets = {
        "gatehouse reuse_port": rig.gatehouse(backend.port, workers=2, reuse_port=True, name="gh-reuse"),
        "gatehouse shared": rig.gatehouse(backend.port, workers=2, reuse_port=False, name="gh-shared"),
        "nginx reuseport": rig.nginx_proxy(backend.port, workers=2, reuseport=True, accept_mutex=False,
                                           name="ng-reuse"),
        "nginx shared, accept_mutex on": rig.nginx_proxy(backend.port, workers=2, accept_mutex=True,
                                                         name="ng-mutex"),
        "nginx shared, accept_mutex off": rig.nginx_proxy(backend.port, workers=2, accept_mutex=False,
                                                          name="ng-nomutex"),
        "haproxy bind per thread": rig.haproxy(backend.port, threads=2, per_thread_bind=True, name="hp-reuse"),
    }
    rec.doc["setup"] = {"workers": "2 per server (Gatehouse workers: 2, nginx worker_processes 2, HAProxy "
                                   "nbthread 2), nothing pinned",
                        "load": "wrk -t2 -H 'Connection: close' (a new TCP connection per request), unpinned",
                        "file": "test.html (75 bytes), proxied to the backend over keep-alive"}
    names = list(targets)
    for conc in prof["reuse_conc"]:
        point = f"-c {conc}"
        for rep in range(1, prof["reps"] + 1):
            for t in rotated(names, rep - 1):
                p = targets[t]
                res = measured({"server": p, "backend": backend}, lambda: loadgen.wrk(
                    f"http://127.0.0.1:{p.port}/test.html", conc, prof["reuse_dur"], threads=2,
                    headers=["Connection: close"]))
                rec.add(point, t, rep, res)


def exp_h2h1(rig, prof, rec):
    certs_dir()
    bundle = os.path.join(CACHE, "tls-certs", "ecdsa.pem")
    backend = rig.backend(cpu=0)
    servers = {"gatehouse": rig.gatehouse(backend.port, cpu=1, bundle=bundle),
               "nginx": rig.nginx_proxy(backend.port, cpu=1, bundle=bundle),
               "haproxy": rig.haproxy(backend.port, cpu=1, bundle=bundle)}
    rec.doc["setup"] = {"load": "h2load on CPU 0 (with the backend), TLS 1.3, ECDSA P-256; HTTP/2 by ALPN h2, "
                                "HTTP/1.1 with --h1", "warm-up": "0.5 s, then the measured duration"}
    names = list(servers)
    for obj, points in prof["h2_points"].items():
        for h1, c, m in points:
            point = f"{obj} " + (f"HTTP/1.1 -c {c}" if h1 else f"HTTP/2 -c {c} -m {m}")
            # Thousands of streams in flight: a request takes longer than a short timed run, so
            # those points run a count of requests instead.
            count = 4 * c * m if c * m >= 5000 else None
            if count:
                point += f" -n {count}"
            for rep in range(1, prof["reps"] + 1):
                for t in rotated(names, rep - 1):
                    p = servers[t]
                    res = measured({"server": p, "backend": backend}, lambda: loadgen.h2load(
                        f"https://127.0.0.1:{p.port}/{obj}", c, prof["h2_dur"], streams=m, h1=h1, cpu=0, n=count))
                    rec.add(point, t, rep, res)


def exp_session(rig, prof, rec):
    certs_dir()
    bundle = os.path.join(CACHE, "tls-certs", "ecdsa.pem")
    backend = rig.backend(cpu=0)
    redis = rig.redis(cpu=0)
    secret = os.path.join(rig.work, "cluster.key")
    with open(secret, "wb") as f:
        f.write(__import__("base64").b64encode(os.urandom(48)))
    ngx_key = os.path.join(rig.work, "nginx-ticket.key")
    with open(ngx_key, "wb") as f:
        f.write(os.urandom(80))
    hap_keys = os.path.join(rig.work, "haproxy-ticket.keys")
    with open(hap_keys, "w") as f:
        f.writelines(__import__("base64").b64encode(os.urandom(80)).decode() + "\n" for _ in range(3))
    for fpath in (secret, ngx_key, hap_keys):
        os.chmod(fpath, 0o600)
    modes = [
        ("gatehouse", "store off", dict(tickets="off", session_cache="local")),
        ("gatehouse", "Redis session cache, tickets off", dict(tickets="off", session_cache="redis", redis=redis.port,
                                                  secret_file=secret)),
        ("gatehouse", "shared tickets", dict(tickets="cluster", session_cache="redis",
                                                            redis=redis.port, secret_file=secret)),
        ("nginx", "store off", dict(tickets=False)),
        ("nginx", "shared tickets", dict(tickets=True, ticket_key=ngx_key)),
        ("haproxy", "store off", dict(tickets=False)),
        ("haproxy", "shared tickets", dict(tickets=True, ticket_keys=hap_keys)),
    ]
    rec.doc["setup"] = {
        "nodes": "two nodes of each server, both on CPU 1, one worker each; redis-server, the backend and "
                 "the client on CPU 0",
        "client": f"{loadgen.tls_client_name()}: each measured connection to node B offers the session a "
                  f"connection to node A made just before ({prof['session_conns']} such pairs in flight); one GET "
                  "of 600.html per connection",
        "store off": "Gatehouse tickets off + local session cache; nginx tickets off + shared:SSL cache; "
                     "HAProxy no-tls-tickets + its cache (every cache is per node)",
        "shared tickets": "Gatehouse `tickets: cluster` (ticket keys rotated and shared through Redis) + "
                          "`session_cache: redis`; nginx `ssl_session_ticket_key` (one 80-byte key file for both "
                          "nodes) + its cache; HAProxy `tls-ticket-keys` (one file of 3 keys for both) + its cache",
        "Redis session cache, tickets off": "Gatehouse only: `tickets: off`, `session_cache: redis` (TLS 1.2 "
                                            "session IDs and TLS 1.3 stateful tickets in Redis); nginx and "
                                            "HAProxy have no cross-node session cache",
    }
    for tls in prof["session_versions"]:
        for target, mode, kw in modes:
            point = f"TLS {tls}, {mode}"
            a = b = None
            if target == "gatehouse":
                if kw.get("redis"):
                    subprocess.run(["redis-cli", "-p", str(redis.port), "flushall"], capture_output=True)
                a = rig.gatehouse(backend.port, cpu=1, bundle=bundle, name="node-a", **kw)
                b = rig.gatehouse(backend.port, cpu=1, bundle=bundle, name="node-b", **kw)
            elif target == "nginx":
                a = rig.nginx_proxy(backend.port, cpu=1, bundle=bundle, name="node-a", **kw)
                b = rig.nginx_proxy(backend.port, cpu=1, bundle=bundle, name="node-b", **kw)
            else:
                a = rig.haproxy(backend.port, cpu=1, bundle=bundle, name="node-a", **kw)
                b = rig.haproxy(backend.port, cpu=1, bundle=bundle, name="node-b", **kw)
            # one unmeasured pair first: Gatehouse nodes publish and fetch their ticket keys
            loadgen.tls_load(b.port, 20, 2, cpu=0, extra=["--origin-port", str(a.port), "--tls", tls,
                                                          "--path", "/600.html"])
            for rep in range(1, prof["reps"] + 1):
                res = measured({"server": b, "node_a": a, "backend": backend, "redis": redis},
                               lambda: loadgen.tls_load(b.port, prof["session_n"], prof["session_conns"], cpu=0, extra=[
                                   "--origin-port", str(a.port), "--tls", tls, "--path", "/600.html"]))
                res["resumed_pct"] = round(100.0 * res.get("resumed", 0) / max(res.get("requests", 0), 1), 1)
                rec.add(point, target, rep, res)
            rig.stop(a)
            rig.stop(b)


def exp_gateway(rig, prof, rec):
    backend = rig.backend(cpu=0)
    gh = rig.gatehouse(backend.port, cpu=1, gateway=True, app_key=KEY)
    ng = rig.nginx_proxy(backend.port, cpu=1, gateway_key=KEY)
    hp = rig.haproxy(backend.port, cpu=1, gateway_key=KEY)
    urls = {
        "direct": (backend, f"http://127.0.0.1:{backend.port}/600.html"),
        "gatehouse-gateway": (gh, f"http://127.0.0.1:{gh.port}/svc/~{KEY}/600.html"),
        "gatehouse-bare": (gh, f"http://127.0.0.1:{gh.port}/600.html"),
        "nginx": (ng, f"http://127.0.0.1:{ng.port}/svc/~{KEY}/600.html"),
        "haproxy": (hp, f"http://127.0.0.1:{hp.port}/svc/~{KEY}/600.html"),
    }
    for t, (p, url) in urls.items():
        expect(p, url, 600)
    for p in (gh, ng, hp):
        for bad in (f"http://127.0.0.1:{p.port}/svc/600.html", f"http://127.0.0.1:{p.port}/svc/~WRONG/600.html"):
            status, _ = http_get(bad)
            if status != 401:
                raise BenchError(f"{p.name} answered {status} to {bad} (want 401)")
    rec.doc["setup"] = {
        "gateway": "service /svc: app key in the path (/svc/~KEY/600.html, stripped before forwarding), an "
                   "ACL (GET, HEAD on /**), a plan with a local rate limit (1,000,000/s: counts every "
                   "request, refuses none), a request header set and a response header removed",
        "nginx and HAProxy": "the same service in their own configuration, the same URL: nginx a `map` of "
                             "the key, `limit_except GET`, `limit_req` (1,000,000 r/s on the key), `rewrite`, "
                             "`proxy_set_header`, `proxy_hide_header`; HAProxy `path_reg` and `METH_GET` ACLs "
                             "with `http-request deny`, a stick table's `http_req_rate`, `set-path` with "
                             "`regsub`, `set-header`, `http-response del-header` (bench/lib/rig.py)",
        "bare": "the same Gatehouse, a plain site route /", "load": "ab -k on CPU 0 with the backend",
        "direct": "ab straight to the backend nginx (1 worker, CPU 0)"}
    names = [t for t in prof["gateway_targets"] if t in urls]
    n = prof["gateway_n"]
    point = f"ab -k -n {n} -c 100"
    counter = 'gatehouse_gateway_admitted_total{service="svc"}'
    admitted0 = metrics(gh.admin).get(counter, 0)
    gw_requests = 0
    for rep in range(1, prof["reps"] + 1):
        for t in rotated(names, rep - 1):
            p, url = urls[t]
            procs = {"server": p} if t == "direct" else {"server": p, "backend": backend}
            res = measured(procs, lambda: loadgen.ab(url, n, 100, True, cpu=0))
            if t == "gatehouse-gateway":
                gw_requests += res.get("requests", 0)
            rec.add(point, t, rep, res)
    admitted = metrics(gh.admin).get(counter, 0) - admitted0
    rec.note(f"gatehouse_gateway_admitted_total grew by {admitted:,.0f}; ab completed {gw_requests:,} requests "
             "through the gateway")


def exp_routes(rig, prof, rec):
    backend = rig.backend(cpu=0)
    rec.doc["setup"] = {"routes": "N prefix routes /r0/ .. /r{N-1}/ besides /, all to the one backend (Gatehouse "
                                  "site routes, nginx `location /rI/` blocks, HAProxy `use_backend "
                                  "%[path,map_beg(FILE)]` with N map lines)",
                        "load": "wrk -t1 -c100 on CPU 0, each request to /rI/test.html with I random in 0..N-1"}
    for n in prof["routes"]:
        script = os.path.join(rig.work, f"routes-{n}.lua")
        with open(script, "w") as f:
            f.write(f"math.randomseed(7)\nrequest = function()\n  return wrk.format(nil, \"/r\" .. "
                    f"math.random(0, {n - 1}) .. \"/test.html\")\nend\n")
        servers = {"gatehouse": rig.gatehouse(backend.port, cpu=1, routes=n),
                   "nginx": rig.nginx_proxy(backend.port, cpu=1, routes=n),
                   "haproxy": rig.haproxy(backend.port, cpu=1, routes=n)}
        for t, p in servers.items():
            expect(p, f"http://127.0.0.1:{p.port}/r{n - 1}/test.html", 75)
        names = list(servers)
        point = f"{n} routes"
        for rep in range(1, prof["reps"] + 1):
            for t in rotated(names, rep - 1):
                p = servers[t]
                res = measured({"server": p, "backend": backend}, lambda: loadgen.wrk(
                    f"http://127.0.0.1:{p.port}/", 100, prof["routes_dur"], script=script, cpu=0))
                res["x"] = n
                rec.add(point, t, rep, res)
        for p in servers.values():
            rig.stop(p)


def link_store(src, n, dest):
    """DEST holds hard links to the first N bundles of the 100,000-bundle store SRC."""
    os.makedirs(dest)
    for i in range(n):
        name = f"n{i}.bench.test.pem"
        os.link(os.path.join(src, name), os.path.join(dest, name))


def exp_certs(rig, prof, rec):
    base, store100k = certs_dir(100000)
    bundle = os.path.join(base, "ecdsa.pem")
    backend = rig.backend(cpu=0)
    rec.doc["setup"] = {
        "store": "N bundles n0..n{N-1}.bench.test (ECDSA P-256 leaves) in a directory: Gatehouse `tls.store.dir` "
                 "(an index of names at start, a certificate loaded on its first handshake), nginx "
                 "`ssl_certificate $ssl_server_name`-style map (the file read on every handshake), HAProxy "
                 "`crt DIR/` (every certificate loaded at start)",
        "load": f"{loadgen.tls_client_name()} on CPU 0: a new connection per request, SNI drawn at random among the N names, "
                "full handshakes (no session offered), the served leaf checked against the name",
        "startup": "ready = from exec to the first name served with its certificate; RSS after start"}
    for n in prof["certs"]:
        store = os.path.join(rig.work, f"store-{n}")
        shutil.rmtree(store, ignore_errors=True)
        link_store(store100k, n, store)
        servers = {}
        for t in ("gatehouse", "nginx", "haproxy"):
            if t == "haproxy" and n > prof["haproxy_max_certs"]:
                rec.note(f"HAProxy not run with {n:,} certificates: it loads and keeps every one at start "
                         f"(about 25 KB and 2 ms each here: {n * 25 / 1e6:.1f} GB, {n * 0.002:.0f} s)")
                continue
            t0 = time.monotonic()
            if t == "gatehouse":
                p = rig.gatehouse(backend.port, cpu=1, bundle=bundle, store_dir=store, wait_path=None)
            elif t == "nginx":
                p = rig.nginx_proxy(backend.port, cpu=1, bundle=bundle, store_dir=store)
            else:
                p = rig.haproxy(backend.port, cpu=1, bundle=bundle, store_dir=store)
            last = f"n{n - 1}.bench.test"
            deadline = time.monotonic() + 300
            while True:
                r = loadgen.tls_load(p.port, 1, 1, cpu=0, extra=["--sni", last, "--check-name", "--path",
                                                                 "/test.html", "--timeout", "2"], limit=30)
                if r["ok"]:
                    break
                if time.monotonic() > deadline or not p.alive():
                    raise BenchError(f"{t} never served {last} with its certificate\n{p.logs()}")
                time.sleep(0.05)
            ready = time.monotonic() - t0
            rec.doc.setdefault("startup", []).append({"target": t, "certs": n, "ready_s": round(ready, 3),
                                                      "rss_kb": p.rss_kb()})
            servers[t] = p
        names = list(servers)
        point = f"{n} certificates"
        for rep in range(1, prof["reps"] + 1):
            for t in rotated(names, rep - 1):
                p = servers[t]
                res = measured({"server": p, "backend": backend}, lambda: loadgen.tls_load(
                    p.port, prof["certs_n"], 50, cpu=0, extra=["--sni-pattern", "n{}.bench.test", "--sni-count",
                                                               str(n), "--check-name", "--path", "/test.html",
                                                               "--seed", str(rep)]))
                res["x"] = n
                rec.add(point, t, rep, res)
        for p in servers.values():
            rig.stop(p)
        shutil.rmtree(store, ignore_errors=True)


def exp_conns(rig, prof, rec):
    backend = rig.backend(cpu=0)
    servers = {"gatehouse": rig.gatehouse(backend.port, cpu=1),
               "nginx": rig.nginx_proxy(backend.port, cpu=1),
               "haproxy": rig.haproxy(backend.port, cpu=1)}
    rec.doc["setup"] = {"load": "wrk -t1 on CPU 0, keep-alive, test.html (75 bytes); all connections opened "
                                "at the start and kept", "fds": f"ulimit -n {rig.nofile}"}
    names = list(servers)
    for c in prof["conns"]:
        point = f"{c} connections"
        for rep in range(1, prof["conns_reps"] + 1):
            for t in rotated(names, rep - 1):
                p = servers[t]
                res = measured({"server": p, "backend": backend}, lambda: loadgen.wrk(
                    f"http://127.0.0.1:{p.port}/test.html", c, prof["conns_dur"], cpu=0))
                res["x"] = c
                rec.add(point, t, rep, res)


def exp_memory(rig, prof, rec):
    certs_dir()
    bundle = os.path.join(CACHE, "tls-certs", "ecdsa.pem")
    backend = rig.backend(cpu=0)
    steps = prof["memory"]
    rec.doc["setup"] = {
        "servers": "one worker per core (Gatehouse workers: 2, nginx worker_processes 2, HAProxy nbthread 2), "
                   "TLS (ECDSA P-256), proxying to the backend",
        "clients": "bench/lib/hold_connections.py: each connection completes a TLS 1.3 handshake, sends one "
                   "request, reads the response head and stays open; added in steps",
        "rss": "VmRSS of the server's process tree summed",
        "HAProxy": f"held up to {prof['haproxy_max_idle']:,} connections: past about 5,000 it took new TLS "
                   "connections at about 100/s here (Gatehouse and nginx about 1,000/s), which would take most of "
                   "the run's time budget; its per-connection figure is from the connections it holds"}
    hold = os.path.join(HERE, "hold_connections.py")
    for rep in range(1, prof["reps"] + 1):
        for t in rotated(["gatehouse", "nginx", "haproxy"], rep - 1):
            if t == "gatehouse":
                p = rig.gatehouse(backend.port, workers=2, bundle=bundle)
            elif t == "nginx":
                p = rig.nginx_proxy(backend.port, workers=2, bundle=bundle)
            else:
                p = rig.haproxy(backend.port, threads=2, bundle=bundle)
            time.sleep(0.5)  # let start-up allocations settle before the idle figure
            rec.add("0 idle connections", t, rep, {"ok": True, "x": 0, "rss_kb": p.rss_kb(), "held": 0})
            holders, held = [], 0
            try:
                for total in steps:
                    if t == "haproxy" and total > prof["haproxy_max_idle"]:
                        break
                    add = total - held
                    h = subprocess.Popen(["taskset", "-c", "0", "python3", hold, "127.0.0.1", str(p.port), str(add),
                                          "--tls", "--sni", "bench.test", "--path", "/test.html",
                                          "--timeout", "120"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                    holders.append(h)
                    line = h.stdout.readline().strip()
                    held = total
                    ok = line.startswith(f"held {add} TLS connections, {add} answered 200")
                    rec.add(f"{total} idle connections", t, rep,
                            {"ok": ok, "x": total, "rss_kb": p.rss_kb(), "held": total, "client": line})
            finally:
                for h in holders:
                    h.stdin.close()
                for h in holders:
                    h.wait(30)
            rig.stop(p)


EXPERIMENTS = {"access": exp_access, "reuseport": exp_reuseport, "h2h1": exp_h2h1, "session": exp_session,
               "gateway": exp_gateway, "routes": exp_routes, "certs": exp_certs, "conns": exp_conns,
               "memory": exp_memory}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", choices=sorted(EXPERIMENTS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="full")
    ap.add_argument("--gatehouse", default=os.environ.get("GATEHOUSE_BIN", "target/release/gatehouse"))
    ap.add_argument("--reps", type=int)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    prof = dict(PROFILES[a.profile])
    if a.reps:
        prof["reps"] = a.reps
    if not os.access(a.gatehouse, os.X_OK):
        sys.exit(f"classic.py: no gatehouse binary at {a.gatehouse}")
    rig = Rig(os.path.abspath(a.gatehouse), keep=a.keep)
    rec = Recorder(a.experiment, a.out, a.profile, prof["reps"])
    log(f"{a.experiment}: work dir {rig.work}")
    try:
        EXPERIMENTS[a.experiment](rig, prof, rec)
    except (BenchError, loadgen.LoadError) as e:
        rec.doc["error"] = str(e)
        rec.save()
        log(f"{a.experiment} failed: {e}")
        sys.exit(1)
    finally:
        rig.close()
    rec.save()
    log(f"{a.experiment}: done in {rec.doc['took_s']} s")


if __name__ == "__main__":
    main()
