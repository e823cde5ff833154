#!/usr/bin/env python3
"""Summarise the per-run CSV written by bench/grpc.sh (via record_run.py --tool ghz --extra) into
a Markdown section: one table row per (row, proxy) with the median and min-max spread over the
reps of calls/s, messages/s, proxy CPU %, calls per proxy CPU-second and p99; then Gatehouse's
ratios to nginx and HAProxy against the goals, and the h2 floor's (a reference forwarder on the
same HTTP/2 library) when it ran.  Section replacement in BENCHMARKS.md is
summarize.py's.  Standard library only.

Usage:
    grpc_summarize.py RUNS.csv [--heading "## ..."] [--meta META.md] [--update BENCHMARKS.md]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reencrypt_summarize import (  # noqa: E402
    fmt_ratios, ms_num, noise_notes, num, one_decimal, paired, peer_ratio_line, rate_cell, run_groups, spread, vals)
from summarize import OTHERS_WARN_PCT, cli, fmt_pct, med, ratio  # noqa: E402

HEADING = "## gRPC (bench/grpc.sh)"
ROWS = ["unary", "stream"]
ROW_NAMES = {"unary": "unary: 1 request, 1 answer", "stream": "stream: 1 request, a stream of answers"}
TARGET_NAMES = {"gatehouse": "**Gatehouse**", "gatehouse-base": "Gatehouse, base build", "nginx": "nginx",
                "haproxy": "HAProxy", "h2-floor": "h2 floor (reference)"}
TARGET_ORDER = ["gatehouse", "gatehouse-base", "nginx", "haproxy", "h2-floor"]
# Gatehouse / peer, calls per proxy CPU-second, that every row aims at.
GOALS = [("nginx", "nginx", 1.3), ("haproxy", "HAProxy", 1.1)]


def with_messages(rows):
    """The rows with msgs_s (messages/s) added: calls/s times the messages of one call."""
    for r in rows:
        try:
            r["msgs_s"] = float(r["rps"]) * int(r.get("msgs_per_call") or 1)
        except (TypeError, ValueError):
            r["msgs_s"] = ""
    return rows


def table(rows):
    out = ["| row | proxy | calls/s | messages/s | proxy CPU % | calls per proxy CPU-s | p99 | "
           "new backend conns | others' CPU % |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    groups, failures = {}, []
    for row, target, g in run_groups(rows, ROWS, TARGET_ORDER, groups):
        calls = rate_cell(row, target, g, failures)
        others = med(g, "others_cpu_pct")
        out.append("| " + " | ".join([
            ROW_NAMES[row], TARGET_NAMES[target], calls,
            spread(g, "msgs_s", num) if row == "stream" else "–",
            spread(g, "proxy_cpu_pct", one_decimal, " %"), spread(g, "req_per_cpu_s", num),
            spread(g, "p99_ms", ms_num, " ms"), spread(g, "backend_new_conns", num),
            fmt_pct(others) + (" ⚠" if (others or 0) > OTHERS_WARN_PCT else "")]) + " |")
    return out, groups, failures


def ratio_lines(groups):
    out = []
    for row in ROWS:
        g = groups.get(row, {})
        gh = g.get("gatehouse")
        if not gh:
            continue
        for key, name, goal in GOALS:
            peer = g.get(key)
            if not peer:
                continue
            out.append(peer_ratio_line(row, g, key, name, goal, "÷", "calls"))
        if g.get("gatehouse-base"):
            out.append(peer_ratio_line(row, g, "gatehouse-base", "the base build", None, "÷", "calls"))
        if g.get("h2-floor"):
            out.append(peer_ratio_line(row, g, "h2-floor", "the h2 floor", None, "÷", "calls"))
    return out


def floor_lines(groups):
    """The h2 floor (gatehouse-h2-floor: h2 server in, h2 client out, the forwarding headers and
    Gatehouse's back-pressure, nothing else) against the peers."""
    out = []
    for row in ROWS:
        g = groups.get(row, {})
        if not g.get("h2-floor"):
            continue
        for key, name, goal in GOALS:
            if not g.get(key):
                continue
            r = ratio(med(g["h2-floor"], "req_per_cpu_s"), med(g[key], "req_per_cpu_s"))
            out.append(f"- {row}: h2 floor÷{name}, calls per proxy CPU-s **{'–' if r is None else f'{r:.2f}'}** "
                       f"(per rep: {fmt_ratios(paired(g, 'h2-floor', key))}; Gatehouse's goal ≥ {goal})")
    return out


def summarize(rows):
    rows = with_messages(rows)
    out, groups, failures = table(rows)
    out += ["", "Gatehouse against its peers (ratios of the medians above; per rep: the median and range of the "
            "ratios of runs paired by rep). Calls per proxy CPU-s > 1: Gatehouse forwards more per CPU-second; "
            "p99 < 1: Gatehouse's is lower.", ""]
    out += ratio_lines(groups) or ["- (no ratios: Gatehouse and a peer were not both measured)"]
    floor = floor_lines(groups)
    if floor:
        out += ["", "The h2 floor against the peers: what a proxy doing nothing but h2 in, h2 out, the "
                "forwarding headers and Gatehouse's back-pressure gets per CPU-second on the same HTTP/2 library as Gatehouse (vendored h2, "
                "tokio), a reference for the HTTP/2 path on that library with the gateway's own work left out.", ""] + floor
    notes = []
    busy = [f"{row} {med([r for g in groups[row].values() for r in g], 'cpu0_busy_pct'):.0f} %"
            for row in ROWS if row in groups]
    notes.append("CPU 0 (backend + ghz) busy, median of the runs: " + ", ".join(busy)
                 + "; where it is near 100 %, the client side limits calls/s and the proxies' CPU % stays "
                 "below a core: compare calls per proxy CPU-s, not calls/s.")
    short = [r for r in rows if (vals([r], "backend_calls") or [0])[0] < (vals([r], "requests") or [0])[0]]
    if short:
        notes.append("⚠ the backend counted fewer calls than ghz completed in: "
                     + ", ".join(f"{r.get('row')} {r['target']} rep {r['rep']}" for r in short))
    notes += noise_notes(rows, groups)
    out += [""] + [f"- {n}" for n in notes]
    if failures:
        out += ["", "Failed runs (calls not OK, incomplete ghz report or non-zero exit):", ""]
        out += [f"- {x}" for x in failures]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    cli(summarize, HEADING)
