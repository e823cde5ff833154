#!/usr/bin/env python3
"""Turns the JSON files of bench/lib/classic.py into the report section of BENCHMARKS.md: for each
experiment a table (median, min–max and number of runs per point), the ratios of Gatehouse to
nginx and HAProxy from the same run, and a link to its chart (bench/lib/charts.py draws them).

Also used by bench/quick (--quick): a compact table on stdout, compared with the previous quick run.

Usage: report.py RESULTS_DIR --md BENCHMARKS.md --charts docs/bench [--meta META.json]
       report.py RESULTS_DIR --quick [--previous FILE]
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rig import SAME_HEADERS_NOTE  # noqa: E402
from summarize import replace_section  # noqa: E402

HEADING = "## Report: the classic access-layer experiments (bench/run-all)"
ORDER = ["access", "reuseport", "h2h1", "session", "gateway", "routes", "certs", "conns", "memory"]


# ------------------------------------------------------------------ metrics of one run
def cpu_pct(r, role="server"):
    return r["cpu_s"][role] / r["wall_s"] * 100 if r.get("cpu_s") and r.get("wall_s") else None


def per_cpu_s(r):
    """Requests (connections) per CPU-second of the server: the rate over its CPU share."""
    c = cpu_pct(r)
    return r["rps"] / (c / 100) if c else None


def cpu_us(r, roles=("server",)):
    """CPU microseconds per completed request (connection) of ROLES."""
    if not r.get("cpu_s") or not r.get("requests"):
        return None
    return sum(r["cpu_s"].get(k, 0) for k in roles) / r["requests"] * 1e6


METRICS = {
    "rps": ("req/s", lambda r: r.get("rps"), True),
    "conn_s": ("connections/s", lambda r: r.get("rps"), True),
    "mean_ms": ("mean latency", lambda r: r.get("mean_ms"), False),
    "p99_ms": ("p99", lambda r: r.get("p99_ms"), False),
    "p50_ms": ("p50 connection", lambda r: r.get("p50_ms"), False),
    "hs_ms": ("p50 connect + handshake", lambda r: r.get("handshake_p50_ms"), False),
    "cpu_pct": ("server CPU %", cpu_pct, False),
    "per_cpu": ("per server CPU-s", per_cpu_s, True),
    "cpu_us": ("server CPU per request", cpu_us, False),
    "tier_us": ("server + backend CPU per request", lambda r: cpu_us(r, ("server", "backend")), False),
    "resumed": ("resumed on B", lambda r: r.get("resumed_pct"), True),
    "rss_mb": ("RSS", lambda r: r["rss_kb"] / 1024 if r.get("rss_kb") is not None else None, False),
    "steal": ("steal", lambda r: r.get("steal_pct"), False),
}

# The columns of each experiment's table and the metric its ratios are taken on.
SPEC = {
    "access": {"cols": ["rps", "mean_ms", "p99_ms", "cpu_us", "tier_us"], "ratio": ["cpu_us", "mean_ms"]},
    "reuseport": {"cols": ["rps", "mean_ms", "p99_ms", "cpu_pct", "per_cpu"], "ratio": ["rps", "p99_ms"]},
    "h2h1": {"cols": ["rps", "mean_ms", "cpu_pct", "per_cpu"], "ratio": ["per_cpu", "rps"]},
    "session": {"cols": ["conn_s", "resumed", "hs_ms", "p50_ms", "cpu_us"], "ratio": ["cpu_us", "hs_ms"]},
    "gateway": {"cols": ["rps", "mean_ms", "p99_ms", "cpu_pct", "per_cpu"], "ratio": ["per_cpu", "mean_ms"]},
    "routes": {"cols": ["rps", "p99_ms", "cpu_pct", "per_cpu"], "ratio": ["per_cpu", "p99_ms"]},
    "certs": {"cols": ["conn_s", "p99_ms", "cpu_pct", "per_cpu"], "ratio": ["per_cpu", "p99_ms"]},
    "conns": {"cols": ["rps", "p99_ms", "cpu_pct", "per_cpu"], "ratio": ["per_cpu", "p99_ms"]},
    "memory": {"cols": ["rss_mb"], "ratio": ["rss_mb"]},
}

# Which target is "Gatehouse" and which are its peers, per experiment (others are shown, not compared).
PEERS = {
    "reuseport": ("gatehouse reuse_port", {"nginx": "nginx reuseport", "HAProxy": "haproxy bind per thread"}),
    "gateway": ("gatehouse-gateway", {"nginx": "nginx", "HAProxy": "haproxy"}),
}
DEFAULT_PEERS = ("gatehouse", {"nginx": "nginx", "HAProxy": "haproxy"})

LABEL = {"gatehouse": "**Gatehouse**", "nginx": "nginx", "haproxy": "HAProxy", "direct": "direct (no proxy)",
         "gatehouse-gateway": "**Gatehouse gateway** (key in path + ACL + plan)",
         "gatehouse-bare": "Gatehouse bare route", "gatehouse reuse_port": "**Gatehouse reuse_port**",
         "gatehouse shared": "**Gatehouse shared listener**"}

TITLES = {
    "access": "Access layer vs direct: HTTPS through the proxy vs HTTPS terminated at the backend",
    "reuseport": "SO_REUSEPORT: one listener per worker vs one shared listener",
    "h2h1": "HTTP/2 vs HTTP/1.1 over TLS",
    "session": "Session store on vs off: a session made on node A resumed on node B",
    "gateway": "API gateway overhead",
    "routes": "Scaling: routes",
    "certs": "Scaling: certificates in the store",
    "conns": "Scaling: concurrent connections",
    "memory": "Scaling: memory vs idle TLS connections",
}

QUESTIONS = {
    "access": "What does putting the access layer in front cost a client, in latency and CPU, against the "
              "backend terminating HTTPS itself? `ab -n 2000 -c 50` as the original report (a new TLS "
              "connection per request), a run twice as long, and keep-alive (`-k`) to show the proxying "
              "alone. Lower is better for every column but req/s.",
    "reuseport": "Does one listening socket per worker (SO_REUSEPORT) beat one shared socket when every "
                 "request is a new connection, from 100 to 1000 concurrent clients? nginx with `reuseport` "
                 "and with `accept_mutex` on and off, HAProxy with one bind per thread.",
    "h2h1": "What does HTTP/2 gain or cost over HTTP/1.1 on the same TLS listener, for 5 KB and 10 KB "
            "objects, from 100 to 1000 connections and 1 to 100 streams each?",
    "session": "How much does a shared session store save when a client's next connection lands on "
               "another node? Requests/s and connect time on node B, store off and on.",
    "gateway": "What does the API gateway (app key, ACL, rate-limit plan, header rewrite) cost on top of "
               "nginx serving the file directly, and against nginx and HAProxy doing the same checks?",
    "routes": "Does a longer route table slow requests down? From 1 to 10,000 prefix routes, each request "
              "to a random one.",
    "certs": "Does a bigger certificate store slow handshakes or start-up down? From 1 to 100,000 stored "
             "certificates, each connection with a random name of the store.",
    "conns": "How do throughput and p99 hold up from 100 to 10,000 concurrent keep-alive connections?",
    "memory": "How much memory does each idle TLS keep-alive connection cost?",
}


def load(results):
    docs = {}
    for exp in ORDER:
        p = os.path.join(results, f"{exp}.json")
        if os.path.exists(p):
            with open(p) as f:
                docs[exp] = json.load(f)
    return docs


def groups(doc):
    """[(point, [(target, [runs])])] in the order first seen."""
    pts = {}
    for r in doc["runs"]:
        pts.setdefault(r["point"], {}).setdefault(r["target"], []).append(r)
    return [(p, list(t.items())) for p, t in pts.items()]


def stat(runs, metric):
    vals = [v for v in (METRICS[metric][1](r) for r in runs) if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def fmt(v, metric):
    if v is None:
        return "–"
    if metric in ("cpu_us", "tier_us"):
        return f"{v:,.0f} µs"
    if metric in ("mean_ms", "p99_ms", "p50_ms", "hs_ms"):
        return f"{v:.3g} ms" if v < 100 else f"{v:,.0f} ms"
    if metric in ("cpu_pct", "resumed", "steal"):
        return f"{v:.0f} %"
    if metric == "rss_mb":
        return f"{v:.1f} MB"
    return f"{v:,.0f}"


def cell(s, metric, spread=False):
    if not s:
        return "–"
    if spread:
        return f"{fmt(s['median'], metric)} ({fmt(s['min'], metric).split()[0]}–{fmt(s['max'], metric)}, {s['n']})"
    return fmt(s["median"], metric)


def ratio(exp, point_targets, metric):
    """{peer label: Gatehouse/peer median ratio, oriented so that > 1 is better for Gatehouse}."""
    gh, peers = PEERS.get(exp, DEFAULT_PEERS)
    by = dict(point_targets)
    if gh not in by:
        return {}
    g = stat(by[gh], metric)
    out = {}
    for label, t in peers.items():
        if t in by and g:
            p = stat(by[t], metric)
            if p and p["median"] and g["median"]:
                higher_better = METRICS[metric][2]
                r = g["median"] / p["median"] if higher_better else p["median"] / g["median"]
                # noise: do the ranges of the runs overlap?
                overlap = g["min"] <= p["max"] and p["min"] <= g["max"]
                out[label] = (r, overlap)
    return out


def table(exp, doc):
    cols = SPEC[exp]["cols"]
    head = "| point | target | " + " | ".join(
        METRICS[c][0] + (" median (min–max, runs)" if i == 0 else "") for i, c in enumerate(cols)) + " | note |"
    lines = [head, "|" + "---|" * 2 + "---:|" * len(cols) + "---|"]
    for point, tg in groups(doc):
        for t, runs in tg:
            notes = []
            bad = [r for r in runs if not r.get("ok")]
            if bad:
                notes.append(f"{len(bad)} run(s) with errors")
            st = stat(runs, "steal")
            if st and st["median"] > 5:
                notes.append(f"steal {st['median']:.0f} % ⚠")
            proto = {r.get("protocol") for r in runs if r.get("protocol")}
            if exp == "access" and proto:
                notes.append(", ".join(sorted(proto)))
            row = [point, LABEL.get(t, t)] + [cell(stat(runs, c), c, i == 0) for i, c in enumerate(cols)]
            lines.append("| " + " | ".join(row) + " | " + "; ".join(notes) + " |")
    return "\n".join(lines)


def ratio_lines(exp, doc):
    out = []
    for point, tg in groups(doc):
        parts = []
        for metric in SPEC[exp]["ratio"]:
            rs = ratio(exp, tg, metric)
            if rs:
                parts.append(METRICS[metric][0] + ": " + ", ".join(
                    f"vs {k} **{v:.2f}**{' (within noise)' if ov else ''}" for k, (v, ov) in rs.items()))
        if parts:
            out.append(f"- {point}: " + "; ".join(parts))
    return out


def extra_lines(exp, doc):
    """Per-experiment figures beyond the table."""
    out = []
    if exp == "access":
        for point, tg in groups(doc):
            by = dict(tg)
            d = stat(by.get("direct", []), "mean_ms")
            dc = stat(by.get("direct", []), "cpu_us")
            for t in ("gatehouse", "nginx", "haproxy"):
                s, c = stat(by.get(t, []), "mean_ms"), stat(by.get(t, []), "tier_us")
                if d and s and dc and c:
                    out.append(f"- {point}, {LABEL[t]}: adds {s['median'] - d['median']:+.2f} ms mean latency to "
                               f"direct; server + backend CPU per request {c['median'] / dc['median']:.2f}× direct's")
    if exp == "gateway":
        for point, tg in groups(doc):
            by = dict(tg)
            d = stat(by.get("direct", []), "mean_ms")
            for t in ("gatehouse-gateway", "gatehouse-bare", "nginx", "haproxy"):
                s = stat(by.get(t, []), "mean_ms")
                if d and s:
                    out.append(f"- {point}, {LABEL.get(t, t)}: mean latency added to direct "
                               f"**{s['median'] - d['median']:+.3f} ms**")
            g, b = stat(by.get("gatehouse-gateway", []), "rps"), stat(by.get("gatehouse-bare", []), "rps")
            if g and b:
                out.append(f"- Plugin chain cost: gateway req/s / bare route req/s **{g['median'] / b['median']:.3f}**")
    if exp == "reuseport":
        for point, tg in groups(doc):
            by = dict(tg)
            a, b = stat(by.get("gatehouse reuse_port", []), "rps"), stat(by.get("gatehouse shared", []), "rps")
            n1, n2 = stat(by.get("nginx reuseport", []), "rps"), stat(by.get("nginx shared, accept_mutex on", []), "rps")
            if a and b:
                s = f"- {point}: reuse_port / shared req/s: Gatehouse **{a['median'] / b['median']:.2f}**"
                if n1 and n2:
                    s += f", nginx (reuseport / accept_mutex on) **{n1['median'] / n2['median']:.2f}**"
                out.append(s)
    if exp == "h2h1":
        pts = dict(groups(doc))
        for obj in sorted({p.split()[0] for p in pts}):
            h1 = [p for p in pts if p.startswith(obj) and "HTTP/1.1 -c 100" in p and "-c 1000" not in p]
            h2 = [p for p in pts if p.startswith(obj) and "HTTP/2 -c 100 -m 10" in p and "-m 100" not in p]
            if h1 and h2:
                for t in ("gatehouse", "nginx", "haproxy"):
                    a, b = stat(dict(pts[h2[0]]).get(t, []), "per_cpu"), stat(dict(pts[h1[0]]).get(t, []), "per_cpu")
                    if a and b:
                        out.append(f"- {obj}, {LABEL[t]}: HTTP/2 (-m 10) / HTTP/1.1 req/s per CPU-s "
                                   f"**{a['median'] / b['median']:.2f}**")
    if exp == "session":
        pts = dict(groups(doc))
        for p, tg in pts.items():
            if "store off" in p:
                continue
            off = p.split(",")[0] + ", store off"
            for t, runs in tg:
                a, b = stat(runs, "cpu_us"), stat(dict(pts.get(off, [])).get(t, []), "cpu_us")
                h, hb = stat(runs, "hs_ms"), stat(dict(pts.get(off, [])).get(t, []), "hs_ms")
                if a and b and h and hb:
                    out.append(f"- {p}, {LABEL.get(t, t)}: server CPU per B connection {a['median'] / b['median']:.2f}× "
                               f"store off's, p50 connect + handshake {h['median']:.1f} ms vs {hb['median']:.1f} ms")
    if exp == "certs":
        rows = doc.get("startup", [])
        if rows:
            out.append("")
            out.append("| certificates stored | target | ready (first name served) | RSS after start |")
            out.append("|---:|---|---:|---:|")
            for r in rows:
                out.append(f"| {r['certs']:,} | {LABEL.get(r['target'], r['target'])} | {r['ready_s']:.2f} s | "
                           f"{r['rss_kb'] / 1024:.1f} MB |")
    if exp == "memory":
        by = {}
        for r in doc["runs"]:
            by.setdefault(r["target"], {}).setdefault(r["x"], []).append(r["rss_kb"])
        for t, xs in by.items():
            top = max(xs)
            if top and 0 in xs:
                per = (statistics.median(xs[top]) - statistics.median(xs[0])) * 1024 / top
                out.append(f"- {LABEL.get(t, t)}: {per:,.0f} bytes per idle TLS connection (RSS at {top:,} "
                           f"connections minus idle, medians)")
    return out


def section(docs, meta, charts_rel):
    out = [HEADING, ""]
    if meta:
        out += [f"- Date: {meta.get('date')} (took {meta.get('took_s', 0) / 60:.1f} minutes)",
                f"- Machine: {meta.get('machine')}",
                f"- Versions: {meta.get('versions')}",
                f"- Source: {meta.get('source')}",
                f"- Machine busy before the run: {meta.get('busy_at_start', '?')} % of one core (other processes; "
                "a quiet machine is near 0)",
                f"- Command: `{meta.get('command')}`",
                "- Pinning: unless an experiment says otherwise, the server under test runs alone on CPU 1 "
                "with one worker (Gatehouse `workers: 1`, nginx `worker_processes 1`, HAProxy `nbthread 1`); "
                "the backend (nginx, 1 worker, static files) and the load generator share CPU 0. The target "
                "order is rotated by one each rep, so no server always runs first.",
                SAME_HEADERS_NOTE,
                "- Each point runs " + str(meta.get("reps", 3)) + " times (concurrent connections 5 times: its "
                "runs spread the most): tables show the median, (min–max, "
                "runs); ratios are Gatehouse / peer from the medians of the same run, oriented so that "
                "**> 1 means Gatehouse is better** (faster, cheaper or lower latency); \"within noise\" means "
                "the ranges of the runs overlap. Raw runs: `bench/results/run-all/*.json`."]
        if meta.get("extras"):
            out.append("- The other benches of `bench/`, each in its smoke form in the same run (their own sections "
                       "below keep the figures of their full runs): " + "; ".join(meta["extras"]))
        if meta.get("skipped"):
            out.append("- Skipped to stay within the time budget: " + "; ".join(meta["skipped"]))
        if meta.get("failed"):
            out.append("- **Failed:** " + "; ".join(meta["failed"]))
        out.append("")
    summary = summary_table(docs)
    if summary:
        out += ["### Summary: Gatehouse against nginx and HAProxy, same run", "", summary, ""]
        if os.path.exists(os.path.join(meta.get("charts_dir", ""), "ratios.png")):
            out += [f"![ratios]({charts_rel}/ratios.png)", ""]
    for i, exp in enumerate([e for e in ORDER if e in docs], 1):
        doc = docs[exp]
        out += [f"### {i}. {TITLES[exp]}", "", QUESTIONS[exp], ""]
        for k, v in doc.get("setup", {}).items():
            out.append(f"- {k}: {v}")
        cmds = sorted({r["cmd"].split(" http")[0].split(" --port")[0] for r in doc["runs"] if r.get("cmd")})
        if cmds:
            out.append("- commands: " + "; ".join(f"`{c}`" for c in cmds[:8]) + (" …" if len(cmds) > 8 else ""))
        out.append(f"- took {doc.get('took_s', 0):.0f} s" + (f"; **error: {doc['error']}**" if doc.get("error") else ""))
        out += ["", table(exp, doc), ""]
        rl = ratio_lines(exp, doc)
        if rl:
            out += ["Ratios (Gatehouse / peer, > 1: Gatehouse better):", ""] + rl + [""]
        ex = extra_lines(exp, doc)
        if ex:
            out += ex + [""]
        for n in doc.get("notes", []):
            out.append(f"- {n}")
        if doc.get("notes"):
            out.append("")
        if os.path.exists(os.path.join(meta.get("charts_dir", ""), f"{exp}.png")):
            out += [f"![{exp}]({charts_rel}/{exp}.png)", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def summary_rows(docs):
    """[(experiment, point, metric, {peer: (ratio, overlap)})] for every compared point."""
    rows = []
    for exp in ORDER:
        if exp not in docs or exp == "memory":
            continue
        metric = SPEC[exp]["ratio"][0]
        for point, tg in groups(docs[exp]):
            rs = ratio(exp, tg, metric)
            if rs:
                rows.append((exp, point, metric, rs))
    if "memory" in docs:
        by = {}
        for r in docs["memory"]["runs"]:
            by.setdefault(r["target"], {}).setdefault(r["x"], []).append(r["rss_kb"])
        if "gatehouse" in by:
            top = max(by["gatehouse"])

            def per(t):
                """Bytes per idle connection: RSS at the most connections it held minus idle, medians."""
                xs = by.get(t, {})
                most = max(xs) if xs else 0
                if most and 0 in xs:
                    return (statistics.median(xs[most]) - statistics.median(xs[0])) / most
                return None
            g = per("gatehouse")
            rs = {}
            for label, t in (("nginx", "nginx"), ("HAProxy", "haproxy")):
                p = per(t)
                if p and g:
                    rs[label] = (p / g, False)
            rows.append(("memory", f"{top:,} idle TLS connections", "rss_mb", rs))
    return rows


def summary_table(docs):
    rows = summary_rows(docs)
    if not rows:
        return ""
    lines = ["| experiment | point | compared on | vs nginx | vs HAProxy |", "|---|---|---|---:|---:|"]
    for exp, point, metric, rs in rows:
        def c(k):
            if k not in rs:
                return "–"
            v, ov = rs[k]
            mark = "ahead" if v > 1 else "behind"
            return f"{v:.2f} ({mark}{', noise' if ov else ''})"
        name = METRICS[metric][0] if exp != "memory" else "bytes per idle connection"
        lines.append(f"| {exp} | {point} | {name} | {c('nginx')} | {c('HAProxy')} |")
    ahead = {k: sum(1 for *_, rs in rows if k in rs and rs[k][0] > 1) for k in ("nginx", "HAProxy")}
    total = {k: sum(1 for *_, rs in rows if k in rs) for k in ("nginx", "HAProxy")}
    lines.append("")
    lines.append(f"Gatehouse ahead on {ahead['nginx']} of {total['nginx']} rows against nginx and "
                 f"{ahead['HAProxy']} of {total['HAProxy']} against HAProxy.")
    return "\n".join(lines)


def quick(docs, previous):
    """Compact table for bench/quick; with PREVIOUS (an earlier quick summary) the change in %."""
    cur = {}
    for exp, doc in docs.items():
        metric = SPEC[exp]["ratio"][0]
        for point, tg in groups(doc):
            for t, runs in tg:
                s = stat(runs, metric)
                if s:
                    cur[f"{exp} | {point} | {t}"] = (metric, s["median"], all(r.get("ok") for r in runs))
    prev = {}
    if previous and os.path.exists(previous):
        with open(previous) as f:
            prev = json.load(f)
    print(f"{'experiment | point | target':<70} {'metric':<24} {'value':>12} {'previous':>12} {'change':>8}")
    for k, (metric, v, ok) in cur.items():
        pv = prev.get(k, [None, None])[1]
        ch = ""
        if pv:
            d = (v - pv) / pv * 100
            ch = f"{d:+.1f}%"
        print(f"{k:<70} {METRICS[metric][0]:<24} {fmt(v, metric):>12} {fmt(pv, metric) if pv else '':>12} "
              f"{ch:>8}{'' if ok else '  ERRORS'}")
    for exp, point, metric, rs in summary_rows(docs):
        print(f"ratio {exp} | {point}: " + ", ".join(f"vs {k} {v:.2f}" for k, (v, _) in rs.items()))
    return cur


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--md")
    ap.add_argument("--charts", default="docs/bench")
    ap.add_argument("--meta")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--previous")
    ap.add_argument("--save")
    a = ap.parse_args()
    docs = load(a.results)
    if a.quick:
        cur = quick(docs, a.previous)
        if a.save:
            with open(a.save, "w") as f:
                json.dump(cur, f, indent=1)
        return
    meta = {}
    if a.meta:
        with open(a.meta) as f:
            meta = json.load(f)
    meta["charts_dir"] = a.charts
    rel = os.path.relpath(a.charts, os.path.dirname(os.path.abspath(a.md)) if a.md else ".")
    text = section(docs, meta, rel)
    if a.md:
        replace_section(a.md, HEADING, text, first=True)
    else:
        print(text)


if __name__ == "__main__":
    main()
