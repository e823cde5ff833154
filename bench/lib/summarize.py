#!/usr/bin/env python3
"""Summarise the per-run CSV written by bench/proxy.sh (via record_run.py) into
a Markdown section: one table row per (file, tool, target) with medians and
the min-max spread of req/s, then Gatehouse/nginx and Gatehouse/HAProxy ratio
lines computed from the medians of the same run.  Standard library only.

Usage:
    summarize.py RUNS.csv [--heading "## ..."] [--meta META.md]
                 [--update BENCHMARKS.md]

Prints the section on stdout.  With --update, the section that starts with
exactly the heading line is replaced in that file (up to the next "## "
heading or end of file); if absent the section is appended; if the file does
not exist it is created.
"""

import argparse
import csv
import math
import os
import statistics
import sys

DEFAULT_HEADING = "## Proxy: keep-alive, 75-byte file (bench/proxy.sh)"

TARGET_NAMES = {
    "direct": "direct (backend nginx, no proxy)",
    "gatehouse": "**Gatehouse**",
    "nginx": "nginx proxy",
    "haproxy": "HAProxy",
}
TARGET_ORDER = ["direct", "gatehouse", "nginx", "haproxy"]
PEERS = [("nginx", "nginx"), ("haproxy", "HAProxy")]
# Median "others' CPU" above this (% of one core) marks the row as disturbed.
OTHERS_WARN_PCT = 10.0


def fnum(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def med(rows, key):
    vals = [x for x in (fnum(r.get(key)) for r in rows) if x is not None]
    return statistics.median(vals) if vals else None


def fmt_int(x):
    return "–" if x is None else f"{x:,.0f}"


def fmt_ms(x):
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:.0f} ms"
    if x >= 10:
        return f"{x:.1f} ms"
    return f"{x:.2f} ms"


def fmt_pct(x):
    return "–" if x is None else f"{x:.1f} %"


def fmt_conns(x):
    if x is None:
        return "–"
    if x == 0:
        return "0"
    return f"{x:.0f}" if abs(x) >= 10 else f"{x:.2f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def summarize(rows):
    files = []
    tools = []
    for r in rows:
        if r["file"] not in files:
            files.append(r["file"])
        if r["tool"] not in tools:
            tools.append(r["tool"])
    multi_file = len(files) > 1

    out = []
    head = ["tool", "target", "req/s median (min–max, runs)", "mean latency",
            "p99", "proxy CPU %", "req/s per proxy CPU-s", "new backend conns / 100k req",
            "others' CPU %"]
    if multi_file:
        head.insert(0, "file")
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join("---" if i < (3 if multi_file else 2) else "---:" for i in range(len(head))) + "|")

    medians = {}
    failures = []
    for f in files:
        for tool in tools:
            for target in TARGET_ORDER + sorted({r["target"] for r in rows} - set(TARGET_ORDER)):
                g = [r for r in rows if r["file"] == f and r["tool"] == tool and r["target"] == target]
                if not g:
                    continue
                rps = [x for x in (fnum(r["rps"]) for r in g) if x is not None]
                m = {k: med(g, k) for k in ("rps", "lat_mean_ms", "p99_ms", "proxy_cpu_pct",
                                             "req_per_cpu_s", "conns_per_100k", "others_cpu_pct")}
                medians[(f, tool, target)] = m
                bad = [r for r in g if str(r.get("ok")) != "1"]
                cell = fmt_int(m["rps"])
                if rps:
                    cell += f" ({fmt_int(min(rps))}–{fmt_int(max(rps))}, {len(g)})"
                if bad:
                    cell = f"⚠ FAILED {len(bad)}/{len(g)} runs: " + cell
                    for r in bad:
                        failures.append(f"{f} {tool} {target} rep {r['rep']}: {r.get('error_detail') or 'errors'}")
                conns = fmt_conns(m["conns_per_100k"])
                if target == "direct" and conns != "–":
                    conns += " (client conns)"
                cells = [tool, TARGET_NAMES.get(target, target), cell, fmt_ms(m["lat_mean_ms"]),
                         fmt_ms(m["p99_ms"]), fmt_pct(m["proxy_cpu_pct"]), fmt_int(m["req_per_cpu_s"]),
                         conns, fmt_pct(m["others_cpu_pct"])
                         + (" ⚠" if (m["others_cpu_pct"] or 0) > OTHERS_WARN_PCT else "")]
                if multi_file:
                    cells.insert(0, f)
                out.append("| " + " | ".join(cells) + " |")

    out.append("")
    out.append("Ratios, from the medians above (same run). req/s per proxy CPU-second: "
               "> 1 means Gatehouse forwards more requests per CPU-second than the peer. "
               "p99: < 1 means Gatehouse's p99 is lower (better).")
    out.append("")
    any_ratio = False
    for f in files:
        for tool in tools:
            gh = medians.get((f, tool, "gatehouse"))
            if not gh:
                continue
            for key, name in PEERS:
                peer = medians.get((f, tool, key))
                if not peer:
                    continue
                any_ratio = True
                r_eff = ratio(gh["req_per_cpu_s"], peer["req_per_cpu_s"])
                r_p99 = ratio(gh["p99_ms"], peer["p99_ms"])
                r_rps = ratio(gh["rps"], peer["rps"])
                prefix = f"{f}, " if multi_file else ""
                out.append(
                    f"- {prefix}{tool}: Gatehouse/{name}: req/s per proxy CPU-s "
                    f"**{'–' if r_eff is None else f'{r_eff:.2f}'}**, p99 "
                    f"**{'–' if r_p99 is None else f'{r_p99:.2f}'}** "
                    f"(raw req/s {'–' if r_rps is None else f'{r_rps:.2f}'})"
                )
    if not any_ratio:
        out.append("- (no ratios: Gatehouse and a peer were not both measured)")
    notes = []
    # Runs measured by schedstat are exact; those that fell back to ticks are coarse when short.
    ticks = [(fnum(r.get("proxy_j")), r) for r in rows if not fnum(r.get("server_ns"))]
    short = [r for j, r in ticks if j is not None and j < 100]
    if short:
        notes.append(
            f"{len(short)} of {len(rows)} runs were measured in clock ticks of proxy CPU (a thread of the proxy "
            "ended during the run, or no schedstat) and used fewer than 100: their CPU %, req/s per CPU-s and "
            "others' CPU % carry a quantisation error of 1 % or more; raise AB_N / DURATION for tighter figures."
        )
    oth = [(fnum(r.get("others_cpu_pct")), r) for r in rows]
    oth = [(x, r) for x, r in oth if x is not None]
    if any((m["others_cpu_pct"] or 0) > OTHERS_WARN_PCT for m in medians.values()):
        notes.append(
            f"⚠ in the others' CPU column: median above {OTHERS_WARN_PCT:.0f} % of a core was used by "
            "processes outside the benchmark during those runs (e.g. a compiler); treat those rows as disturbed."
        )
    if oth:
        x, r = max(oth, key=lambda t: t[0])
        st = [x for x in (fnum(r2.get("steal_pct")) for r2 in rows) if x is not None]
        notes.append(
            f"Noise: others' CPU at most {x:.1f} % of a core ({r['tool']} {r['target']} rep {r['rep']}); "
            f"hypervisor steal at most {max(st) if st else 0:.1f} %, median {statistics.median(st) if st else 0:.1f} %."
        )
    if notes:
        out.append("")
        for n in notes:
            out.append(f"- {n}")
    if failures:
        out.append("")
        out.append("Failed runs (errors, non-2xx responses, incomplete output or non-zero exit):")
        out.append("")
        for x in failures:
            out.append(f"- {x}")
    return "\n".join(out) + "\n"


def replace_section(path, heading, section, first=False):
    """Put SECTION in place of the `## ` section titled HEADING; if absent, append it (FIRST: put it
    before the file's first `## ` section instead)."""
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.rstrip("\n") == heading), None)
    if start is None:
        first_h2 = next((i for i, ln in enumerate(lines) if ln.startswith("## ")), None)
        if not text:
            new = "# Benchmarks\n\n" + section
        elif first and first_h2 is not None:
            new = "".join(lines[:first_h2]) + section + "\n" + "".join(lines[first_h2:])
        else:
            new = text + ("" if text.endswith("\n") else "\n") + "\n" + section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        tail = "".join(lines[end:])
        new = "".join(lines[:start]) + section + ("\n" + tail if tail else "")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, path)


def emit_section(heading, meta_path, body, update_path):
    """Prints heading, the Markdown in meta_path (if any) and body as one section, and puts it in
    update_path (if any) in place of the section with that heading."""
    meta = ""
    if meta_path:
        with open(meta_path, encoding="utf-8") as f:
            meta = f.read().strip() + "\n\n"
    section = heading + "\n\n" + meta + body
    sys.stdout.write(section)
    if update_path:
        replace_section(update_path, heading, section)


def cli(summarize_rows, heading=DEFAULT_HEADING):
    """The command line of a summariser: RUNS.csv [--heading] [--meta] [--update]; the CSV's rows
    go through summarize_rows (rows -> Markdown body) into one section (emit_section)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--heading", default=heading)
    ap.add_argument("--meta", help="Markdown file inserted between heading and table")
    ap.add_argument("--update", help="Markdown file whose section to replace/append")
    a = ap.parse_args()

    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{os.path.basename(sys.argv[0])}: no runs in {a.csv}")

    emit_section(a.heading, a.meta, summarize_rows(rows), a.update)


def main():
    cli(summarize)


if __name__ == "__main__":
    main()
