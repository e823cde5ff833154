#!/usr/bin/env python3
"""The control plane's two goals, measured (run by bench/control.sh).

1. release: three Gatehouse nodes on loopback share one Redis; wrk loads all three while
   RELEASES releases alternate between two revisions (a target weight changes). Measured per
   release: wall time from the API call until each node's `applied` event arrives on its
   stdout (--status-json); the release-to-applied time is the slowest node's. Reported: p50, p99
   and max over the releases, and every failed or non-2xx request wrk saw on any node.
   Goal: p99 <= 1 s, zero failed requests.

2. apply: one node whose certificate store holds CERTS bundles and whose draft holds a revision
   of ROUTES routes (SITES sites). wrk with --latency runs a steady window, then a window in which
   the node applies revisions of that size (two alternating, one route differs); the two kinds of
   window alternate, three of each, so drift of this noisy machine hits both. Measured:
   each apply's time inside the node (`took_ms` of the event: compile, snapshot, swap) and from
   the API call to the event; wrk's p99 in both windows. Goal: apply <= 1 s, p99 during apply
   within 2x of steady.

Everything on 127.0.0.1 with free ports, in WORK (a temp dir the caller removes); processes are
stopped by the pids started here. Prints a Markdown section on stdout.

Usage: control_bench.py --gatehouse BIN --store DIR --work DIR [--quick]
"""

import argparse
import hashlib
import http.client
import json
import os
import queue
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

TOKEN = "bench-control-token"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port} after {timeout}s")


class Procs:
    """Every process started, stopped at the end by pid."""

    def __init__(self):
        self.procs = []

    def start(self, args, **kw):
        p = subprocess.Popen(args, **kw)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


class Node:
    """A gatehouse process and the events it prints, time-stamped on arrival."""

    def __init__(self, procs, binary, work, name, yaml):
        path = os.path.join(work, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(yaml)
        self.events = queue.Queue()
        self.stderr = open(os.path.join(work, f"{name}.stderr"), "w")
        self.proc = procs.start([binary, "run", "--config", path, "--status-json"],
                                stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        ready = self.wait("ready", 30)
        self.http = ready["listeners"]["http"]
        self.admin = ready["admin"]

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if "event" in ev:
                self.events.put((time.monotonic(), ev))

    def wait(self, name, timeout, revision=None):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                sys.exit(f"no {name} event within {timeout}s")
            try:
                at, ev = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if ev["event"] == name and (revision is None or ev.get("revision") == revision):
                ev["_at"] = at
                return ev
            if ev["event"] == "apply_failed":
                sys.exit(f"a node refused revision {ev.get('revision')}: {ev.get('errors')}")


def api(admin, method, path, body=None, if_match=None):
    host, port = admin.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    if if_match is not None:
        headers["If-Match"] = f'"{if_match}"'
    c.request(method, "/api/v1" + path, body=None if body is None else json.dumps(body), headers=headers)
    r = c.getresponse()
    data = json.loads(r.read() or b"null")
    if r.status >= 300:
        sys.exit(f"{method} {path}: {r.status} {data}")
    return data, r.getheader("ETag")


def set_draft(admin, document):
    _, etag = api(admin, "GET", "/draft")
    version = int(etag.strip('"'))
    return api(admin, "PUT", "/draft", document, version)


def wrk(procs, url, conns, seconds, host="app.bench", latency=False):
    args = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "-H", f"Host: {host}"]
    if latency:
        args.append("--latency")
    return procs.start(args + [url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wrk_result(p):
    out, _ = p.communicate()
    def num(pattern):
        m = re.search(pattern, out)
        return int(m.group(1)) if m else 0
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    failed = sum(int(x) for x in sock.groups()) if sock else 0
    p99 = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}
    return {
        "requests": num(r"(\d+) requests in"),
        "non2xx": num(r"Non-2xx or 3xx responses: (\d+)"),
        "failed": failed,
        "p99_ms": float(p99.group(1)) * scale[p99.group(2)] if p99 else None,
        "raw": out,
    }


def backend(procs, work):
    """nginx answering 200 with a small body, 1 worker: the upstream of every node."""
    port = free_port()
    d = os.path.join(work, "nginx")
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/logs/error.log;
events {{ worker_connections 4096; }}
http {{ access_log off; client_body_temp_path {d}/b; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f;
  uwsgi_temp_path {d}/u; scgi_temp_path {d}/s; keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{port}; location / {{ return 200 "ok\\n"; }} }} }}
""")
    procs.start(["nginx", "-p", d, "-c", conf], stderr=subprocess.DEVNULL)
    wait_port(port)
    return f"127.0.0.1:{port}"


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def admin_section():
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    return f'admin:\n  bind: "127.0.0.1:0"\n  public: [/healthz, /metrics, /status]\n  tokens: [{{name: bench, sha256: "{digest}"}}]\n'


def release_experiment(procs, binary, work, quick):
    releases = 5 if quick else 20
    seconds = 2 if quick else 0
    redis_port = free_port()
    procs.start(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no"], stdout=subprocess.DEVNULL)
    wait_port(redis_port)
    secret = os.path.join(work, "secret")
    with open(secret, "w") as f:
        f.write("bench-control-cluster-secret-0123456789abcdef\n")
    be = backend(procs, work)
    nodes = []
    plain_admin = 'admin: {bind: "127.0.0.1:0", public: [/healthz, /metrics, /status]}\n'
    for i in range(3):
        yaml = (f"workers: 1\n{admin_section() if i == 0 else plain_admin}"
                f"redis: {{url: \"redis://127.0.0.1:{redis_port}\", secret_file: \"{secret}\"}}\n"
                f"node: {{id: n{i}}}\ncontrol: {{dir: \"{work}/n{i}\", poll_interval: 2s}}\n"
                f"listeners:\n  http: {{bind: \"127.0.0.1:0\"}}\n"
                f"upstreams:\n  u: {{targets: [{{address: \"{be}\", weight: 1}}]}}\n"
                f"sites:\n  app: {{hosts: [app.bench], routes: [{{path: /, upstream: u}}]}}\n")
        nodes.append(Node(procs, binary, work, f"n{i}", yaml))
    admin = nodes[0].admin
    revs = []
    for w in (2, 3):
        doc = {"upstreams": {"u": {"targets": [{"address": be, "weight": w}]}},
               "sites": {"app": {"hosts": ["app.bench"], "routes": [{"path": "/", "upstream": "u"}]}}}
        set_draft(admin, doc)
        revs.append(api(admin, "POST", "/revisions", {"message": f"weight {w}"})[0]["number"])
    # Load long enough to cover every release (each waits for three events, then a pause).
    duration = max(seconds, releases + 4)
    loads = [wrk(procs, f"http://{n.http}/", 4, duration) for n in nodes]
    time.sleep(1)
    times = []
    for i in range(releases):
        rev = revs[i % 2]
        t0 = time.monotonic()
        api(admin, "POST", f"/revisions/{rev}/release")
        ats = [n.wait("applied", 10, rev)["_at"] for n in nodes]
        times.append(max(ats) - t0)
        time.sleep(0.5)
    results = [wrk_result(p) for p in loads]
    return {"releases": releases, "times": times, "loads": results}


def big_document(be, sites, per_site, variant):
    doc = {"upstreams": {"u": {"targets": [be]}}, "sites": {}}
    for s in range(sites):
        routes = [{"path": f"/r{r}", "upstream": "u"} for r in range(per_site)]
        routes.append({"path": "/", "upstream": "u"})
        doc["sites"][f"s{s}"] = {"hosts": [f"s{s}.bench.test"], "routes": routes}
    # The two revisions differ by one route.
    doc["sites"]["s0"]["routes"][0]["strip_prefix"] = bool(variant)
    return doc


def apply_experiment(procs, binary, work, store, quick):
    sites, per_site = (10, 99) if quick else (100, 99)  # + "/" each: 1,000 / 10,000 routes
    rounds = 1 if quick else 3
    applies = 3 if quick else 5
    window = 3 if quick else 5
    be = backend(procs, work)
    yaml = (f"workers: 1\n{admin_section()}control: {{dir: \"{work}/apply\", poll_interval: 2s}}\nnode: {{id: big}}\n"
            f"tls:\n  store: {{dir: \"{store}\"}}\n"
            f"listeners:\n  http: {{bind: \"127.0.0.1:0\"}}\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}}}\n"
            f"upstreams:\n  u: {{targets: [\"{be}\"]}}\n"
            f"sites:\n  s0: {{hosts: [s0.bench.test], routes: [{{path: /, upstream: u}}]}}\n")
    node = Node(procs, binary, work, "apply", yaml)
    admin = node.admin
    revs, commit_s = [], []
    for variant in (0, 1):
        t0 = time.monotonic()
        set_draft(admin, big_document(be, sites, per_site, variant))
        revs.append(api(admin, "POST", "/revisions", {"message": f"big {variant}"})[0]["number"])
        commit_s.append(time.monotonic() - t0)
    api(admin, "POST", f"/revisions/{revs[0]}/release")
    node.wait("applied", 30, revs[0])
    routes = sites * (per_site + 1)
    url = f"http://{node.http}/r5"
    # Steady and apply windows alternate, so that the machine's drift hits both alike.
    took, wall, steady, during = [], [], [], []
    i = 0
    for _ in range(rounds):
        steady.append(wrk_result(wrk(procs, url, 16, window, host="s1.bench.test", latency=True)))
        load = wrk(procs, url, 16, window, host="s1.bench.test", latency=True)
        time.sleep(0.3)
        gap = (window - 1.0) / applies
        for _ in range(applies):
            rev = revs[(i + 1) % 2]
            i += 1
            t0 = time.monotonic()
            api(admin, "POST", f"/revisions/{rev}/release")
            ev = node.wait("applied", 30, rev)
            wall.append(ev["_at"] - t0)
            took.append(ev["took_ms"] / 1e3)
            time.sleep(max(0.0, gap - (time.monotonic() - t0)))
        during.append(wrk_result(load))
    return {"routes": routes, "applies": applies * rounds, "rounds": rounds, "took": took, "wall": wall,
            "commit_s": commit_s, "steady": steady, "during": during}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gatehouse", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--certs", type=int, required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    procs = Procs()
    try:
        rel = release_experiment(procs, a.gatehouse, a.work, a.quick)
        big = apply_experiment(procs, a.gatehouse, a.work, a.store, a.quick)
    finally:
        procs.stop()
    ms = lambda s: f"{s * 1e3:.1f} ms"
    t = rel["times"]
    failed = sum(r["failed"] + r["non2xx"] for r in rel["loads"])
    served = sum(r["requests"] for r in rel["loads"])
    print("## Control plane\n")
    print(f"### Release to applied on three nodes ({rel['releases']} releases, wrk -c4 on each node)\n")
    print("| p50 | p99 | max | requests served during the releases | failed or non-2xx |")
    print("|---|---|---|---|---|")
    print(f"| {ms(statistics.median(t))} | {ms(pct(t, 0.99))} | {ms(max(t))} | {served} | {failed} |\n")
    print(f"### Applying a revision of {big['routes']:,} routes with {a.certs:,} certificates in the store "
          f"({big['applies']} applies under load)\n")
    print("| apply inside the node: p50 / max | API call to applied: p50 / max | commit of the draft (PUT + POST) |")
    print("|---|---|---|")
    print(f"| {ms(statistics.median(big['took']))} / {ms(max(big['took']))} | "
          f"{ms(statistics.median(big['wall']))} / {ms(max(big['wall']))} | "
          f"{' / '.join(f'{s:.2f} s' for s in big['commit_s'])} |\n")
    print(f"Alternating windows, {big['rounds']} of each: wrk -c16 --latency on one route, steady, then while "
          f"{big['applies'] // big['rounds']} revisions are applied.\n")
    print("| window | requests | p99 per window | failed or non-2xx |")
    print("|---|---|---|---|")
    for name, runs in (("steady", big["steady"]), ("during applies", big["during"])):
        p99s = " / ".join(f"{r['p99_ms']} ms" for r in runs)
        bad = sum(r["failed"] + r["non2xx"] for r in runs)
        print(f"| {name} | {sum(r['requests'] for r in runs)} | {p99s} | {bad} |")
    med = lambda runs: statistics.median(r["p99_ms"] for r in runs if r["p99_ms"] is not None)
    ratio = med(big["during"]) / med(big["steady"])
    print(f"\nMedian p99 during applies / steady: **{ratio:.2f}x**")
    print("\n<!-- raw: " + json.dumps({"release_s": t, "apply_took_s": big["took"], "apply_wall_s": big["wall"]}) + " -->")


if __name__ == "__main__":
    main()
