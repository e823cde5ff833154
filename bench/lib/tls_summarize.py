#!/usr/bin/env python3
"""Summarise the per-run CSV written by bench/tls.sh (via tls_record.py) into one Markdown
section with a table per measurement group: medians over the reps with the min-max spread
of the rate, and Gatehouse/nginx, Gatehouse/HAProxy ratios computed from the medians of the
same run.  Section replacement in BENCHMARKS.md is summarize.py's.  Standard library only.

Usage:
    tls_summarize.py RUNS.csv --heading "## ..." [--meta META.md] [--notes NOTES.md]
                     [--update BENCHMARKS.md]
"""

import argparse
import csv
import statistics
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import fmt_int, fmt_ms, fmt_pct, fnum, med, ratio, replace_section  # noqa: E402

TARGET_NAMES = {"gatehouse": "**Gatehouse**", "nginx": "nginx", "haproxy": "HAProxy"}
TARGET_ORDER = ["gatehouse", "nginx", "haproxy"]
PEERS = [("nginx", "nginx"), ("haproxy", "HAProxy")]
OTHERS_WARN_PCT = 10.0
# Median hypervisor steal above this (% of one core) marks the row: the servers lost CPU time.
STEAL_WARN_PCT = 5.0

GROUPS = {
    "handshake": "1. Full handshakes: {client}, a new connection per request, no resumption",
    "resume": "2. Resumed vs full handshakes: {client}, session store on and off",
    "store": "3. One certificate vs a 10,000-certificate store, SNI cycling: {client}",
    "h2": "4. HTTP/2 vs HTTP/1.1 over TLS, keep-alive: h2load",
    "reuseport": "5. reuse_port, 2 workers, both cores, TLS keep-alive: h2load --h1",
    "cluster": "6. Two nodes: a session made on node A resumed on node B (session store on vs off): {client}",
}


def ordered(values, first=()):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return [v for v in first if v in seen] + [v for v in seen if v not in first]


def fmt_r(x):
    return "–" if x is None else f"{x:.2f}"


def rate_cell(g):
    vals = [x for x in (fnum(r["rps"]) for r in g) if x is not None]
    cell = fmt_int(med(g, "rps"))
    if vals:
        cell += f" ({fmt_int(min(vals))}–{fmt_int(max(vals))}, {len(g)})"
    bad = [r for r in g if str(r.get("ok")) != "1"]
    if bad:
        cell = f"⚠ FAILED {len(bad)}/{len(g)}: " + cell
    return cell


def others_cell(g):
    m = med(g, "others_cpu_pct")
    cell = fmt_pct(m) + (" ⚠" if (m or 0) > OTHERS_WARN_PCT else "")
    st = med(g, "steal_pct")
    if (st or 0) > STEAL_WARN_PCT:
        cell += f" (steal {st:.0f} % ⚠)"
    return cell


def negotiated(g):
    return ", ".join(ordered(r["negotiated"] for r in g if r.get("negotiated"))) or "–"


def table(head, rows):
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---" if h.startswith(("case", "target", "file", "TLS", "certificate",
                                                   "session", "protocol", "reuse", "names", "mode",
                                                   "negotiated"))
                          else "---:" for h in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def grouped(rows, keys):
    """(key tuple) -> rows, in first-seen order of keys, targets in TARGET_ORDER."""
    out = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    order = ordered([k[:-1] for k in out])
    return [(k + (t,), out[k + (t,)]) for k in order for t in TARGET_ORDER + sorted(
        {kk[-1] for kk in out} - set(TARGET_ORDER)) if k + (t,) in out]


def peer_line(label, part):
    """One bullet: `label`, then part(target, name) for each peer that gives one."""
    parts = [x for x in (part(t, name) for t, name in PEERS) if x]
    return [f"- {label}" + "; ".join(parts)] if parts else []


def peer_ratios(meds, label_of, key="per_cpu_s", what="per server CPU-s"):
    lines = []
    for k in ordered(kk[:-1] for kk in meds):
        gh = meds.get(k + ("gatehouse",))
        if not gh:
            continue

        def part(t, name):
            p = meds.get(k + (t,))
            return p and (f"Gatehouse/{name} **{fmt_r(ratio(gh[key], p[key]))}** "
                          f"(raw rate {fmt_r(ratio(gh['rps'], p['rps']))})")
        lines += peer_line(f"{label_of(k)}: {what}: ", part)
    return lines


def paired_ratios(rows, label_key="case", key="per_cpu_s"):
    """Per case and peer: the median over reps of each rep's Gatehouse/peer ratio (the targets of
    one rep run back to back, so the machine's slow drifts cancel), with its min-max."""
    by = {}
    for r in rows:
        v = fnum(r.get(key))
        if v is not None and str(r.get("ok")) == "1":
            by[(r[label_key], r["rep"], r["target"])] = v
    lines = []
    for case in ordered(r[label_key] for r in rows):
        def part(t, name):
            rs = [by[(c, rep, "gatehouse")] / by[(c, rep, t)] for (c, rep, tt) in by
                  if c == case and tt == t and (c, rep, "gatehouse") in by and by[(c, rep, t)]]
            return rs and (f"Gatehouse/{name} **{fmt_r(statistics.median(rs))}** "
                           f"({fmt_r(min(rs))}–{fmt_r(max(rs))}, {len(rs)} reps)")
        lines += peer_line(f"{case}: ", part)
    return lines


def medians(g):
    return {k: med(g, k) for k in g[0] if k not in TEXT_FIELDS}


TEXT_FIELDS = {"group", "case", "variant", "target", "tool", "negotiated", "error_detail"}


def tabulate(rows, keys, cells):
    """Medians by key (keys end with target), and one table line a key: cells(key, runs, medians)."""
    meds, body = {}, []
    for k, g in grouped(rows, keys):
        m = meds[k] = medians(g)
        body.append(cells(k, g, m))
    return meds, body


def name(target):
    return TARGET_NAMES.get(target, target)


def handshake(rows):
    out = []
    meds, body = tabulate(rows, ("case", "target"), lambda k, g, m: [
        k[0], name(k[1]), rate_cell(g), fmt_pct(m["server_cpu_pct"]), fmt_int(m["per_cpu_s"]),
        fmt_ms(m["p99_ms"]), negotiated(g), others_cell(g)])
    out += table(["case", "target", "handshakes/s median (min–max, runs)", "server CPU %",
                  "handshakes per server CPU-s", "p99", "negotiated", "others' CPU %"], body)
    out += ["", "Ratios from the medians (> 1: Gatehouse completes more handshakes per CPU-second):", ""]
    out += peer_ratios(meds, lambda k: k[0])
    out += ["", "Paired: the median over reps of each rep's ratio of handshakes per server CPU-second "
                "(the goal figure; min–max beside it):", ""]
    out += paired_ratios(rows)
    gh = [r for r in rows if r["target"] == "gatehouse"]
    if gh:
        full = sum(int(fnum(r["gh_full"]) or 0) for r in gh)
        res = sum(int(fnum(r["gh_resumed"]) or 0) for r in gh)
        req = sum(int(fnum(r["requests"]) or 0) for r in gh)
        out += ["", f"- Check: over the Gatehouse runs {client_name(gh)} completed {req:,} requests; Gatehouse "
                    f"counted {full:,} full and {res:,} resumed handshakes (gatehouse_tls_handshakes_total)."
                    + (" ab opens a few connections beyond -n that it abandons at the end." if any(
                        r["tool"] == "ab" for r in gh) else "")]
    return out


CLIENT_NAMES = {"loadgen": "gatehouse-loadgen", "tls_load": "tls_load.py"}


def client_name(rows):
    """The load generator(s) of a group's runs, as the report names them."""
    return " and ".join(ordered(CLIENT_NAMES.get(r["tool"], r["tool"]) for r in rows))


def resumed_share(m, key="resumed", of="requests"):
    return f"{100.0 * (m[key] or 0) / m[of]:.0f} %" if m.get(of) else "–"


def resume(rows):
    out = []

    def cells(k, g, m):
        ghm = "–"
        if k[2] == "gatehouse" and m["gh_full"] is not None:
            ghm = f"{fmt_int(m['gh_full'])} / {fmt_int(m['gh_resumed'])}"
        return [k[0], k[1], name(k[2]), rate_cell(g), resumed_share(m), fmt_pct(m["server_cpu_pct"]),
                fmt_int(m["per_cpu_s"]), fmt_ms(m["p50_ms"]), ghm, others_cell(g)]

    meds, body = tabulate(rows, ("case", "variant", "target"), cells)
    out += table(["TLS", "session store (client offers its last session unless 'full')", "target",
                  "connections/s median (min–max, runs)", "resumed (client)", "server CPU %",
                  "connections per server CPU-s", "p50", "Gatehouse metric full / resumed",
                  "others' CPU %"], body)
    out += ["", "Ratios from the medians (> 1: Gatehouse completes more connections per CPU-second):", ""]
    out += peer_ratios(meds, lambda k: f"{k[0]}, {k[1]}", what="per server CPU-s")
    # Resumed vs full for every target, same TLS version.
    lines = []
    for (tls, variant, target), m in meds.items():
        if variant.startswith("full"):
            continue
        base = next((mm for (t2, v2, tg2), mm in meds.items()
                     if t2 == tls and tg2 == target and v2.startswith("full")), None)
        if base and m["resumed"]:
            lines.append(f"- {tls}, {name(target)}, {variant}: resumed/full connections "
                         f"per CPU-s **{fmt_r(ratio(m['per_cpu_s'], base['per_cpu_s']))}**")
    if lines:
        out += ["", "Gain from resumption (same server, same TLS version):", ""] + lines
    return out


def store(rows):
    out = []
    runs = [r for r in rows if r["tool"] != "startup"]
    meds, body = tabulate(runs, ("variant", "target"), lambda k, g, m: [
        k[0], name(k[1]), rate_cell(g), fmt_ms(m["p50_ms"]), fmt_ms(m["p99_ms"]), fmt_pct(m["server_cpu_pct"]),
        fmt_int(m["per_cpu_s"]), others_cell(g)])
    out += table(["certificates / SNI", "target", "connections/s median (min–max, runs)", "p50", "p99",
                  "server CPU %", "connections per server CPU-s", "others' CPU %"], body)
    out += ["", "Ratios from the medians (> 1: Gatehouse completes more connections per CPU-second):", ""]
    out += peer_ratios(meds, lambda k: k[0])
    out += store_cost(meds)
    st = [r for r in rows if r["tool"] == "startup"]
    if st:
        body = []
        for k, g in grouped(st, ("variant", "target")):
            body.append([k[0], name(k[1]), f"{med(g, 'ready_s'):.2f} s ({len(g)})"
                         if med(g, "ready_s") is not None else "–",
                         f"{med(g, 'name_s'):.2f} s" if med(g, "name_s") is not None else "–",
                         mb(med(g, "rss_idle_kb")), mb(med(g, "rss_kb"))])
        out += ["", "Start-up and memory (medians; runs in brackets):", ""]
        out += table(["certificates", "target", "ready (runs)", "serves the last stored name",
                      "RSS after start", "RSS after the runs"], body)
        out += memory_per_name(st)
    return out


def store_cost(meds):
    """Per target: what serving names from the store costs against one certificate, once the names
    are loaded: connections per CPU-second with many in flight, and p50 one connection at a time
    (the hop's own latency, not a queue)."""
    def kind(variant):
        lat = variant.endswith(", one at a time")
        if variant.startswith("1 certificate"):
            return ("one", lat)
        return ("again", lat) if "same names again" in variant else None

    by = {}
    for k, m in meds.items():
        if found := kind(k[0]):
            by[found + (k[-1],)] = m
    lines = []
    for t in TARGET_ORDER:
        parts = []
        one, again = by.get(("one", False, t)), by.get(("again", False, t))
        if one and again and one.get("per_cpu_s") and again.get("per_cpu_s") is not None:
            parts.append(f"connections per CPU-s {fmt_int(again['per_cpu_s'])} against {fmt_int(one['per_cpu_s'])} "
                         f"(**{(again['per_cpu_s'] / one['per_cpu_s'] - 1) * 100:+.1f} %**)")
        one, again = by.get(("one", True, t)), by.get(("again", True, t))
        if one and again and one.get("p50_ms") is not None and again.get("p50_ms") is not None:
            parts.append(f"p50 one connection at a time {fmt_ms(again['p50_ms'])} against {fmt_ms(one['p50_ms'])} "
                         f"(**{again['p50_ms'] - one['p50_ms']:+.2f} ms**)")
        if parts:
            lines.append(f"- {name(t)}: " + "; ".join(parts))
    if not lines:
        return []
    return ["", "The store against one certificate, names already loaded ('same names again' vs '1 certificate'; "
            "goal for Gatehouse: ≤ 2 % fewer connections per CPU-second and ≤ 0.1 ms more p50):", ""] + lines


def memory_per_name(startups):
    """What each stored certificate adds to RSS right after start (store vs one certificate)."""
    lines = []
    counts = sorted({int(r["variant"]) for r in startups if r["variant"].isdigit()})
    if len(counts) < 2:
        return lines
    one, many = counts[0], counts[-1]
    for t in TARGET_ORDER:
        idle = {c: med([r for r in startups if r["target"] == t and r["variant"] == str(c)], "rss_idle_kb")
                for c in (one, many)}
        if None in idle.values():
            continue
        per = (idle[many] - idle[one]) * 1024 / (many - one)
        lines.append(f"- {name(t)}: RSS after start {mb(idle[one])} with {one} certificate, {mb(idle[many])} "
                     f"with {many:,} in the store: **{per:,.0f} bytes per stored file**")
    if lines:
        lines = ["", "Memory per file in the store (RSS after start, store vs one certificate; Gatehouse "
                     "holds an index of the names, not the certificates, until a handshake asks for one):",
                 ""] + lines
    return lines


def mb(kb):
    return "–" if kb is None else f"{kb / 1024:.1f} MB"


def h2(rows):
    out = []
    meds, body = tabulate(rows, ("case", "variant", "target"), lambda k, g, m: [
        k[0], k[1], name(k[2]), rate_cell(g), fmt_ms(m["lat_mean_ms"]), fmt_pct(m["server_cpu_pct"]),
        fmt_int(m["per_cpu_s"]), fmt_int(m["backend_new_conns"]), others_cell(g)])
    out += table(["file", "protocol", "target", "req/s median (min–max, runs)", "mean request time",
                  "server CPU %", "req/s per server CPU-s", "new backend conns", "others' CPU %"], body)
    out += ["", "Ratios from the medians (> 1: Gatehouse serves more requests per CPU-second):", ""]
    out += peer_ratios(meds, lambda k: f"{k[0]}, {k[1]}")
    lines = []
    for (f, proto, target), m in meds.items():
        if proto.startswith("HTTP/2"):
            base = next((mm for (f2, p2, t2), mm in meds.items()
                         if f2 == f and t2 == target and p2.startswith("HTTP/1.1")), None)
            if base:
                lines.append(f"- {f}, {name(target)}: HTTP/2 / HTTP/1.1 req/s per CPU-s "
                             f"**{fmt_r(ratio(m['per_cpu_s'], base['per_cpu_s']))}**")
    if lines:
        out += [""] + lines
    return out


def reuseport(rows):
    out = []
    meds, body = tabulate(rows, ("variant", "target"), lambda k, g, m: [
        k[0], name(k[1]), rate_cell(g), fmt_ms(m["lat_mean_ms"]), fmt_pct(m["server_cpu_pct"]),
        fmt_int(m["per_cpu_s"]), fmt_int(m["backend_new_conns"]), others_cell(g)])
    out += table(["reuse_port", "target", "req/s median (min–max, runs)", "mean request time",
                  "server CPU % (200 % = both cores)", "req/s per server CPU-s", "new backend conns",
                  "others' CPU %"], body)
    out += ["", "Ratios from the medians (raw req/s is the figure here: both cores are shared):", ""]
    out += peer_ratios(meds, lambda k: f"reuse_port {k[0]}", key="rps", what="req/s")
    return out


def us(x):
    return "–" if x is None else f"{x:,.0f} µs"


def per_conn(m, key, prefix):
    """Counter key of one node (prefix gh = B, a = A) per measured B connection."""
    v, n = m.get(f"{prefix}_{key}"), m.get("requests")
    return None if v is None or not n else v / n


def redis_latency(g, prefix):
    """Mean Redis command time of one node (prefix gh = B, a = A): median over the runs that sent
    commands (min–max), and how many commands it sent per B connection."""
    means = []
    for r in g:
        cmds, total = fnum(r.get(f"{prefix}_redis_cmds")), fnum(r.get(f"{prefix}_redis_us"))
        if cmds and total is not None:
            means.append(total / cmds)
    if not means:
        return "–"
    cmds = sum(fnum(r.get(f"{prefix}_redis_cmds")) or 0 for r in g)
    per = cmds / (sum(fnum(r.get("requests")) or 0 for r in g) or float("nan"))
    count = f"{per:.2f} per B conn" if per >= 0.01 else f"{cmds:.0f} in {len(g)} runs"
    return f"{statistics.median(means):,.0f} µs ({min(means):,.0f}–{max(means):,.0f}), {count}"


def cluster(rows):
    out = []

    def cells(k, g, m):
        return [k[0], k[1], name(k[2]), rate_cell(g), resumed_share(m), fmt_ms(m["hs_p50_ms"]),
                fmt_ms(m["p50_ms"]), us(m["server_cpu_us_per_conn"]), fmt_int(m["per_cpu_s"]),
                fmt_ms(m["origin_hs_p50_ms"]), fmt_pct(m["origin_cpu_pct"]), others_cell(g)]

    meds, body = tabulate(rows, ("case", "variant", "target"), cells)
    out += table(["TLS", "mode", "target (two nodes)", "B connections/s median (min–max, runs)",
                  "resumed on B (client)", "p50 connect + handshake on B", "p50 whole connection on B",
                  "server CPU per B connection", "B connections per B CPU-s",
                  "p50 connect + handshake on A (new session)", "node A CPU %", "others' CPU %"], body)
    gh = [(k, m) for k, m in meds.items() if k[2] == "gatehouse"]
    if gh:
        out += ["", "Gatehouse's own counters (admin metrics, medians of the per-run deltas). Redis command "
                    "time = gatehouse_tls_redis_latency_seconds_total / gatehouse_tls_redis_commands_total over "
                    "a run, as the node times it: a loopback round trip to a redis-server that shares CPU 1 "
                    "with the busy load generator, so mostly waiting for that CPU; B's commands are on the "
                    "handshake path, A's are written after its handshakes:", ""]
        body = []
        for k, m in gh:
            g = [r for r in rows if (r["case"], r["variant"], r["target"]) == k]
            body.append([k[0], k[1], fmt_int(m["gh_full"]), fmt_int(m["gh_resumed_ticket"]),
                         fmt_int(m["gh_resumed_cache"]), fmt_int(m["gh_fetched"]), redis_latency(g, "gh"),
                         redis_latency(g, "a"), fmt_int((m["gh_redis_errors"] or 0) + (m["a_redis_errors"] or 0))])
        out += table(["TLS", "mode", "B full handshakes", "B resumed: ticket", "B resumed: session cache",
                      "B sessions fetched from Redis", "B Redis command time", "A Redis command time",
                      "Redis errors (A + B)"], body)
    out += ["", "Ratios from the medians (> 1: Gatehouse completes more B connections per B CPU-second; "
                "same mode, nginx as described below):", ""]
    out += peer_ratios(meds, lambda k: f"{k[0]}, {k[1]}")
    lines = []
    for (tls, mode, target), m in meds.items():
        base = next((mm for (t2, v2, tg2), mm in meds.items()
                     if t2 == tls and tg2 == target and v2.startswith("(a)")), None)
        if base and not mode.startswith("(a)"):
            lines.append(f"- {tls}, {name(target)}, {mode}: B connections per CPU-s vs store off "
                         f"**{fmt_r(ratio(m['per_cpu_s'], base['per_cpu_s']))}**")
    if lines:
        out += ["", "Gain from the shared store (same server, same TLS version):", ""] + lines
    return out


RENDER = {"handshake": handshake, "resume": resume, "store": store, "h2": h2, "reuseport": reuseport, "cluster": cluster}


def summarize(rows, notes_text):
    out = []
    for gname, title in GROUPS.items():
        g = [r for r in rows if r["group"] == gname]
        if not g:
            continue
        out += [f"### {title.format(client=client_name(g))}", ""] + RENDER[gname](g) + [""]
    failures = [r for r in rows if str(r.get("ok")) != "1"]
    notes = []
    # Runs measured by schedstat are exact; those that fell back to ticks are coarse when short.
    short = [r for r in rows if r["tool"] != "startup" and not fnum(r.get("server_ns"))
             and (fnum(r.get("server_j")) or 0) < 100]
    if short:
        notes.append(f"{len(short)} of {len(rows)} runs were measured in clock ticks (a thread of the server ended "
                     "during the run, or no schedstat) and used fewer than 100: their CPU figures carry a "
                     "quantisation error of 1 % or more.")
    oth = [(fnum(r.get("others_cpu_pct")), r) for r in rows if r["tool"] != "startup"]
    oth = [(x, r) for x, r in oth if x is not None]
    if oth:
        x, r = max(oth, key=lambda t: t[0])
        st = [v for v in (fnum(r2.get("steal_pct")) for r2 in rows) if v is not None]
        notes.append(f"Noise: others' CPU at most {x:.1f} % of a core ({r['group']} {r['target']} rep {r['rep']}); "
                     f"hypervisor steal at most {max(st) if st else 0:.1f} %, "
                     f"median {statistics.median(st) if st else 0:.1f} %.")
    out += ["### Notes", ""]
    out += [f"- {n}" for n in notes]
    if notes_text.strip():
        out += [notes_text.strip()]
    if failures:
        out += ["", "Failed runs (errors, unexpected status, incomplete output or non-zero exit):", ""]
        out += [f"- {r['group']} {r['case']} {r['variant']} {r['target']} rep {r['rep']}: "
                f"{r.get('error_detail') or 'errors'}" for r in failures]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--heading", required=True)
    ap.add_argument("--meta")
    ap.add_argument("--notes")
    ap.add_argument("--update")
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("tls_summarize.py: no runs in " + a.csv)
    meta = notes = ""
    if a.meta:
        with open(a.meta, encoding="utf-8") as f:
            meta = f.read().strip() + "\n\n"
    if a.notes:
        with open(a.notes, encoding="utf-8") as f:
            notes = f.read()
    section = a.heading + "\n\n" + meta + summarize(rows, notes)
    sys.stdout.write(section)
    if a.update:
        replace_section(a.update, a.heading, section)


if __name__ == "__main__":
    main()
