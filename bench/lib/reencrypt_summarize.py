#!/usr/bin/env python3
"""Summarise the per-run CSV written by bench/reencrypt.sh (via record_run.py --extra) into a
Markdown section: one table row per (row, proxy) with the median and min-max spread over the reps
of req/s, proxy CPU %, req per proxy CPU-second and p99; the upstream TLS handshakes the backend
saw and how many resumed; then Gatehouse's ratios to nginx and HAProxy against the goals, and the
cost of a named upstream (dns row).  Section replacement in BENCHMARKS.md is summarize.py's.
Standard library only.

Usage:
    reencrypt_summarize.py RUNS.csv [--heading "## ..."] [--meta META.md] [--update BENCHMARKS.md]
"""

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import OTHERS_WARN_PCT, cli, fmt_conns, fmt_pct, fnum, med, ratio  # noqa: E402

HEADING = "## Re-encryption and named upstreams (bench/reencrypt.sh)"
ROWS = ["pooled", "new-conn", "dns"]
ROW_NAMES = {"pooled": "pooled: TLS in, TLS pooled upstream", "new-conn": "new-conn: TLS in, new TLS upstream conn per request",
             "dns": "dns: plain HTTP, keep-alive"}
TARGET_NAMES = {"gatehouse": "**Gatehouse**", "nginx": "nginx", "haproxy": "HAProxy",
                "ip": "**Gatehouse**, target an IP literal", "name": "**Gatehouse**, target a DNS name"}
TARGET_ORDER = ["gatehouse", "nginx", "haproxy", "ip", "name"]
PEERS = [("nginx", "nginx"), ("haproxy", "HAProxy")]
# Gatehouse / peer, req per proxy CPU-second, that each row aims at.
GOALS = {"pooled": 1.1, "new-conn": 1.8}
DNS_GOAL_PCT = 2.0


def vals(rows, key):
    return [x for x in (fnum(r.get(key)) for r in rows) if x is not None]


def spread(rows, key, fmt, unit=""):
    """'median UNIT (min–max)' of KEY over ROWS, each number through FMT."""
    v = vals(rows, key)
    if not v:
        return "–"
    if len(v) == 1:
        return fmt(v[0]) + unit
    return f"{fmt(statistics.median(v))}{unit} ({fmt(min(v))}–{fmt(max(v))})"


def num(x):
    return f"{x:,.0f}"


def one_decimal(x):
    return f"{x:.1f}"


def ms_num(x):
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def conns(x):
    return fmt_conns(x) if x is None or x < 1000 else num(x)


def handshakes(rows):
    """'RESUMED / ALL (SHARE)' of the upstream TLS handshakes the backend logged over ROWS."""
    total, resumed = sum(vals(rows, "hs_all")), sum(vals(rows, "hs_resumed"))
    if not total:
        return "0"
    return f"{resumed:,.0f} / {total:,.0f} ({100 * resumed / total:.1f} % resumed)"


def paired(groups, a, b, key="req_per_cpu_s"):
    """Per-rep ratios A/B of KEY, pairing the runs of the same rep."""
    by_rep = {t: {r["rep"]: fnum(r.get(key)) for r in groups.get(t, [])} for t in (a, b)}
    out = []
    for rep, x in by_rep[a].items():
        y = by_rep[b].get(rep)
        if x is not None and y:
            out.append(x / y)
    return out


def fmt_ratios(rs):
    if not rs:
        return "–"
    if len(rs) == 1:
        return f"{rs[0]:.2f}"
    return f"{statistics.median(rs):.2f} ({min(rs):.2f}–{max(rs):.2f})"


def run_groups(rows, row_order, target_order, groups):
    """(row, target, runs) for each (row, target) measured, in report order; also filed in
    groups[row][target]."""
    for row in row_order:
        for target in target_order:
            g = [r for r in rows if r.get("row") == row and r["target"] == target]
            if g:
                groups.setdefault(row, {})[target] = g
                yield row, target, g


def rate_cell(row, target, g, failures):
    """The runs' rate (median, spread, count), marked when some failed; the failures listed."""
    bad = [r for r in g if str(r.get("ok")) != "1"]
    cell = spread(g, "rps", num) + f" [{len(g)}]"
    if bad:
        cell = f"⚠ FAILED {len(bad)}/{len(g)}: " + cell
        failures += [f"{row} {target} rep {r['rep']}: {r.get('error_detail') or 'errors'}" for r in bad]
    return cell


def peer_ratio_line(row, g, key, name, goal, sign, unit):
    """Gatehouse against the peer `key` in one row: per proxy CPU-second (with the per-rep ratios
    and the goal), rate and p99; `unit` is what a run counts (req, calls)."""
    gh, peer = g["gatehouse"], g[key]
    r = ratio(med(gh, "req_per_cpu_s"), med(peer, "req_per_cpu_s"))
    r_rps = ratio(med(gh, "rps"), med(peer, "rps"))
    r_p99 = ratio(med(gh, "p99_ms"), med(peer, "p99_ms"))
    target = ""
    if goal is not None:
        verdict = "–" if r is None else ("met" if r >= goal else "**missed**")
        target = f"; goal ≥ {goal}: {verdict}"
    return (f"- {row}: Gatehouse{sign}{name}, {unit} per proxy CPU-s **{'–' if r is None else f'{r:.2f}'}** "
            f"(per rep: {fmt_ratios(paired(g, 'gatehouse', key))}{target}); "
            f"{unit}/s {'–' if r_rps is None else f'{r_rps:.2f}'}, p99 {'–' if r_p99 is None else f'{r_p99:.2f}'}")


def noise_notes(rows, groups):
    """What ran beside the benchmark: the most others' CPU and steal of any run, and a warning when
    a row's median of others' CPU is above OTHERS_WARN_PCT."""
    notes = []
    oth = [(fnum(r.get("others_cpu_pct")), r) for r in rows]
    oth = [(x, r) for x, r in oth if x is not None]
    if oth:
        x, r = max(oth, key=lambda t: t[0])
        st = vals(rows, "steal_pct")
        notes.append(f"Noise: others' CPU at most {x:.1f} % of a core ({r.get('row')} {r['target']} rep {r['rep']}); "
                     f"hypervisor steal at most {max(st) if st else 0:.1f} %.")
    if any((med(g, "others_cpu_pct") or 0) > OTHERS_WARN_PCT for row in groups.values() for g in row.values()):
        notes.append(f"⚠ in the others' CPU column: median above {OTHERS_WARN_PCT:.0f} % of a core was used by processes "
                     "outside the benchmark during those runs; treat those rows as disturbed.")
    return notes


def table(rows):
    out = ["| row | proxy | req/s | proxy CPU % | req per proxy CPU-s | p99 | new backend conns / 100k req | "
           "upstream TLS handshakes: resumed / all | others' CPU % |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    groups, failures = {}, []
    for row, target, g in run_groups(rows, ROWS, TARGET_ORDER, groups):
        rps = rate_cell(row, target, g, failures)
        others = med(g, "others_cpu_pct")
        out.append("| " + " | ".join([
            ROW_NAMES[row], TARGET_NAMES[target], rps, spread(g, "proxy_cpu_pct", one_decimal, " %"),
            spread(g, "req_per_cpu_s", num), spread(g, "p99_ms", ms_num, " ms"), conns(med(g, "conns_per_100k")),
            "–" if row == "dns" else handshakes(g),
            fmt_pct(others) + (" ⚠" if (others or 0) > OTHERS_WARN_PCT else "")]) + " |")
    return out, groups, failures


def ratio_lines(groups):
    out = []
    for row in ("pooled", "new-conn"):
        g = groups.get(row, {})
        gh = g.get("gatehouse")
        if not gh:
            continue
        for key, name in PEERS:
            peer = g.get(key)
            if not peer:
                continue
            out.append(peer_ratio_line(row, g, key, name, GOALS[row], "/", "req"))
    g = groups.get("dns", {})
    if g.get("ip") and g.get("name"):
        r = ratio(med(g["name"], "req_per_cpu_s"), med(g["ip"], "req_per_cpu_s"))
        per_rep = paired(g, "name", "ip")
        costs = [100 * (1 - x) for x in per_rep]
        ip = vals(g["ip"], "req_per_cpu_s")
        noise = 100 * (max(ip) - min(ip)) / statistics.median(ip) if len(ip) > 1 else None
        cost = None if r is None else 100 * (1 - r)
        verdict = "–" if cost is None else ("met" if cost <= DNS_GOAL_PCT else "**missed**")
        if cost is not None and noise is not None and noise > DNS_GOAL_PCT:
            verdict += f", but the IP literal alone spreads {noise:.1f} %: this run cannot resolve {DNS_GOAL_PCT:.0f} %"
        cost_reps = "–" if not costs else (f"{statistics.median(costs):+.1f} % ({min(costs):+.1f} to {max(costs):+.1f} %)"
                                           if len(costs) > 1 else f"{costs[0]:+.1f} %")
        out.append(f"- dns: name vs IP literal, req per proxy CPU-s {'–' if r is None else f'{r:.3f}'}: cost "
                   f"**{'–' if cost is None else f'{cost:+.1f} %'}** (goal ≤ {DNS_GOAL_PCT:.0f} %: {verdict}); per rep, "
                   f"paired: {cost_reps}")
    return out


def summarize(rows):
    out, groups, failures = table(rows)
    out += ["", "Gatehouse against its peers (ratios of the medians above; per rep: the median and range of the "
            "ratios of runs paired by rep). req per proxy CPU-s > 1: Gatehouse forwards more per CPU-second; "
            "p99 < 1: Gatehouse's is lower.", ""]
    out += ratio_lines(groups) or ["- (no ratios: Gatehouse and a peer were not both measured)"]
    gh = [r for row in ("pooled", "new-conn") for r in groups.get(row, {}).get("gatehouse", [])]
    notes = []
    for row in ("pooled", "new-conn"):
        g = groups.get(row, {}).get("gatehouse", [])
        full, resumed = sum(vals(g, "gh_full")), sum(vals(g, "gh_resumed"))
        if g:
            notes.append(f"Gatehouse's own count, {row}: gatehouse_upstream_tls_handshakes_total "
                         f"full {full:,.0f}, resumed {resumed:,.0f} during the measured runs.")
    name = groups.get("dns", {}).get("name", [])
    if name:
        notes.append(f"Gatehouse's DNS lookups of backend.test during the measured dns runs: "
                     f"{sum(vals(name, 'dns_ok')):,.0f} answered, {sum(vals(name, 'dns_error')):,.0f} failed "
                     f"(gatehouse_dns_lookups_total), over {sum(vals(name, 'wall_s')):.0f} s.")
    busy = [f"{row} {med([r for g in groups[row].values() for r in g], 'cpu0_busy_pct'):.0f} %"
            for row in ROWS if row in groups]
    notes.append("CPU 0 (backend nginx + wrk) busy, median of the runs: " + ", ".join(busy)
                 + "; where it is near 100 %, the backend side limits req/s, not the proxy.")
    notes += noise_notes(rows, groups)
    if gh or notes:
        out += [""] + [f"- {n}" for n in notes]
    if failures:
        out += ["", "Failed runs (errors, non-2xx responses, incomplete output or non-zero exit):", ""]
        out += [f"- {x}" for x in failures]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    cli(summarize, HEADING)
