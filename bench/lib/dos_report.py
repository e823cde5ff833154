#!/usr/bin/env python3
"""Records and summarises the runs of bench/dos.sh.  Standard library only.

`record` parses one normal-client output (wrk or h2load; parsers from record_run.py and
tls_record.py), the attacker's view of the same window (slowloris.py's JSON lines, or the
`openssl s_time` outputs of a handshake flood) and the counters dos.sh measured, and appends
one row to the per-run CSV.  `summarize` turns the CSV into the Markdown section: per row
(slowloris, handshake) a table of medians over the reps, the share of throughput the normal
clients kept (under attack / alone, paired per rep), and Gatehouse/nginx, Gatehouse/HAProxy
ratios from the same run.

Usage:
    dos_report.py record --csv RUNS.csv --tool wrk|h2load --output FILE
                         [--attacker SLOWLORIS_OUT | --flood S_TIME_OUT ...] key=value ...
    dos_report.py summarize RUNS.csv --heading "## ..." [--meta META.md] [--update BENCHMARKS.md]

Keys passed by dos.sh: row, phase (alone|attack), target, rep, seq, exit_code, clk_tck,
t0, t1 (epoch seconds of the window), wall_s, proxy_j, backend_j, loadgen_j, attacker_j,
open_mid, accepted_before, accepted_after, user_j ... steal_j (/proc/stat deltas); slow_n (the
attacker's connections), flood_span (seconds the flood ran), alone_cpu_pct and alone_conns_per_s
(the proxy's CPU % and new connections/s with the attacker alone, before the run under attack).
"""

import argparse
import csv
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record_run import append_row, parse_wrk  # noqa: E402
from summarize import emit_section, fmt_int, fmt_ms, fmt_pct, fnum, med  # noqa: E402
from tls_record import parse_h2load  # noqa: E402

FIELDS = [
    "row", "phase", "target", "rep", "seq", "tool", "exit_code", "complete",
    "requests", "rps", "lat_mean_ms", "p99_ms", "errors", "error_detail",
    "wall_s", "per_cpu_s", "proxy_cpu_pct", "backend_cpu_pct", "loadgen_cpu_pct", "attacker_cpu_pct",
    "others_cpu_pct", "steal_pct",
    "held_median", "held_min", "held_max", "reopened_per_s", "answered", "connect_errors",
    "flood_handshakes", "flood_per_s", "flood_runs", "flood_span", "slow_n",
    "open_mid", "new_conns_per_s", "alone_cpu_pct", "alone_conns_per_s",
    "t0", "t1", "clk_tck", "proxy_j", "backend_j", "loadgen_j", "attacker_j",
    "accepted_before", "accepted_after",
    "user_j", "nice_j", "system_j", "idle_j", "iowait_j", "irq_j", "softirq_j", "steal_j",
]
NAMES = {"gatehouse": "**Gatehouse**", "nginx": "nginx", "haproxy": "HAProxy"}
ORDER = ["gatehouse", "nginx", "haproxy"]


def attacker_view(path, t0, t1):
    """The slowloris.py lines inside [t0, t1]: held connections and counter deltas."""
    lines = []
    with open(path, encoding="utf-8") as f:
        for ln in f:
            try:
                lines.append(json.loads(ln))
            except ValueError:
                continue
    inside = [x for x in lines if t0 <= x["t"] <= t1 and not x.get("final")]
    before = [x for x in lines if x["t"] < t0]
    if not inside:
        return {}
    first = before[-1] if before else inside[0]
    last = inside[-1]
    span = max(last["t"] - first["t"], 1e-9)
    held = [x["held"] for x in inside]
    return {
        "held_median": statistics.median(held), "held_min": min(held), "held_max": max(held),
        "reopened_per_s": round((last["reopened"] - first["reopened"]) / span, 1),
        "answered": last["answered"] - first["answered"],
        "connect_errors": last["connect_errors"] - first["connect_errors"],
    }


def flood_view(paths, span):
    """Handshakes completed by the s_time processes, and per second of the flood's span (s_time's
    own "real seconds" are whole seconds)."""
    total = runs = 0
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            text = f.read()
        total += sum(int(m.group(1)) for m in re.finditer(r"^(\d+) connections in \d+ real seconds", text, re.M))
        runs += len(re.findall(r"^Collecting connection statistics", text, re.M))
    return {"flood_handshakes": total, "flood_per_s": round(total / span, 1) if span else "", "flood_runs": runs}


def record(a):
    raw = dict(kv.partition("=")[::2] for kv in a.kv)
    row = {k: "" for k in FIELDS}
    row.update({k: v for k, v in raw.items() if k in FIELDS})
    row["tool"] = a.tool
    try:
        with open(a.output, encoding="utf-8", errors="replace") as f:
            out = f.read()
    except OSError:
        out = ""
    parsed = parse_wrk(out) if a.tool == "wrk" else parse_h2load(out)
    row.update(parsed)
    row["complete"] = int(parsed.get("rps") is not None and parsed.get("requests") is not None)

    def i(k):
        return int(float(raw.get(k) or 0))

    tck = i("clk_tck") or 100
    wall = float(raw.get("wall_s") or 0) or float("nan")

    def pct(j):
        return round(100.0 * j / tck / wall, 2)

    busy = i("user_j") + i("nice_j") + i("system_j") + i("irq_j") + i("softirq_j")
    ours = i("proxy_j") + i("backend_j") + i("loadgen_j") + i("attacker_j")
    row.update(proxy_cpu_pct=pct(i("proxy_j")), backend_cpu_pct=pct(i("backend_j")),
               loadgen_cpu_pct=pct(i("loadgen_j")), attacker_cpu_pct=pct(i("attacker_j")),
               others_cpu_pct=pct(busy - ours), steal_pct=pct(i("steal_j")))
    if parsed.get("rps") and i("proxy_j"):
        row["per_cpu_s"] = round(parsed["rps"] / (i("proxy_j") / tck / wall), 1)
    if raw.get("accepted_before") and raw.get("accepted_after"):
        row["new_conns_per_s"] = round((i("accepted_after") - i("accepted_before")) / wall, 1)
    if a.attacker:
        row.update(attacker_view(a.attacker, float(raw["t0"]), float(raw["t1"])))
    if a.flood:
        row.update(flood_view(a.flood, float(raw.get("flood_span") or 0)))
    append_row(a.csv, FIELDS, row)
    extra = ""
    if a.attacker:
        extra = f"  attacker held {row['held_median']} (min {row['held_min']}), reopened {row['reopened_per_s']}/s"
    if a.flood:
        extra = f"  flood {row['flood_per_s']} handshakes/s"
    print(f"  rep {row['rep']} {row['row']:9} {row['phase']:6} {row['target']:9} {parsed.get('rps') or 0:9.0f} req/s"
          f"  errors {parsed.get('errors', '?')}  proxy CPU {row['proxy_cpu_pct']:.0f}%  open {row['open_mid']}"
          f"  new conns {row['new_conns_per_s']}/s{extra}", file=sys.stderr)


# ------------------------------------------------------------------ summary
def spread(rows, key):
    vals = [x for x in (fnum(r.get(key)) for r in rows) if x is not None]
    if not vals:
        return "–"
    return f"{fmt_int(statistics.median(vals))} ({fmt_int(min(vals))}–{fmt_int(max(vals))}, {len(vals)})"


def kept(rows, target, row, key="rps"):
    """Per rep: KEY under attack / KEY alone in the same rep; returns the list, rep order."""
    by_rep = {}
    for r in rows:
        if r["row"] == row and r["target"] == target:
            by_rep.setdefault(r["rep"], {})[r["phase"]] = fnum(r.get(key))
    return [v["attack"] / v["alone"] for _, v in sorted(by_rep.items())
            if v.get("alone") and v.get("attack") is not None]


def per_cpu_cell(rows, target, row, alone, attack):
    k = kept(rows, target, row, "per_cpu_s")
    return (f"{fmt_int(med(alone, 'per_cpu_s'))} / {fmt_int(med(attack, 'per_cpu_s'))}"
            f" ({share(statistics.median(k)) if k else '–'})")


def alone_cell(attack):
    """The proxy with the attacker alone: CPU %, new connections/s, CPU µs per new connection."""
    # Per connection only where connections come and go (not for a proxy that holds them all).
    per = [fnum(r.get("alone_cpu_pct")) * 1e4 / fnum(r.get("alone_conns_per_s")) for r in attack
           if fnum(r.get("alone_cpu_pct")) is not None and (fnum(r.get("alone_conns_per_s")) or 0) >= 10]
    cpu, conns = med(attack, "alone_cpu_pct"), med(attack, "alone_conns_per_s")
    if cpu is None:
        return "–"
    return f"{fmt_pct(cpu)}, {fmt_int(conns)}/s" + (f", {fmt_int(statistics.median(per))} µs each" if per else "")


def pair(a, b, f):
    return f"{f(a)} / {f(b)}"


def share(x):
    return "–" if x is None else f"{100 * x:.0f} %"


def errors_cell(rows):
    n = sum(int(fnum(r.get("errors")) or 0) for r in rows)
    if not n:
        return "0"
    kinds = sorted({r["error_detail"] for r in rows if r.get("error_detail")})
    return f"{n:,} ({'; '.join(kinds)[:120]})"


def ratio_lines(meds, what):
    out = []
    g = meds.get("gatehouse")
    for peer in ("nginx", "haproxy"):
        p = meds.get(peer)
        if g is not None and p:
            out.append(f"Gatehouse/{NAMES[peer]} {g / p:.2f}")
    return f"- {what}: " + ", ".join(out) if out else ""


def table_slowloris(rows):
    out = ["| proxy | req/s alone: median (min–max, runs) | req/s under attack | kept | p99 alone / under attack "
           "| normal clients' errors under attack | attacker held: median (min) | open at the proxy mid-attack "
           "| attacker reopenings/s | proxy with the attack alone: CPU %, new connections/s, CPU per connection "
           "| proxy CPU % alone / under attack | req/s per proxy CPU-s alone / under attack (kept) "
           "| attacker CPU % | others' CPU % |",
           "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    kept_med, attack_med = {}, {}
    for t in ORDER:
        alone = [r for r in rows if r["target"] == t and r["phase"] == "alone"]
        attack = [r for r in rows if r["target"] == t and r["phase"] == "attack"]
        if not alone and not attack:
            continue
        k = kept(rows, t, "slowloris")
        kept_med[t] = statistics.median(k) if k else None
        attack_med[t] = med(attack, "rps")
        out.append(" | ".join([
            f"| {NAMES[t]}", spread(alone, "rps"), spread(attack, "rps"), share(kept_med[t]),
            pair(med(alone, "p99_ms"), med(attack, "p99_ms"), fmt_ms), errors_cell(attack),
            f"{fmt_int(med(attack, 'held_median'))} ({fmt_int(min((fnum(r['held_min']) for r in attack if fnum(r['held_min']) is not None), default=None))})",
            fmt_int(med(attack, "open_mid")), fmt_int(med(attack, "reopened_per_s")), alone_cell(attack),
            pair(med(alone, "proxy_cpu_pct"), med(attack, "proxy_cpu_pct"), fmt_pct),
            per_cpu_cell(rows, t, "slowloris", alone, attack),
            fmt_pct(med(attack, "attacker_cpu_pct")), fmt_pct(med([*alone, *attack], "others_cpu_pct")),
        ]) + " |")
    return out, kept_med, attack_med


def table_handshake(rows):
    out = ["| proxy | req/s alone: median (min–max, runs) | req/s during the flood | kept | mean latency alone / flood "
           "| normal clients' errors during the flood | flood: handshakes/s completed (s_time) "
           "| new connections/s accepted by the proxy | proxy with the flood alone: CPU %, new connections/s, "
           "CPU per connection | proxy CPU % alone / flood | req/s per proxy CPU-s alone / flood (kept) "
           "| flood CPU % | others' CPU % |",
           "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    kept_med, attack_med, flood_med = {}, {}, {}
    for t in ORDER:
        alone = [r for r in rows if r["target"] == t and r["phase"] == "alone"]
        attack = [r for r in rows if r["target"] == t and r["phase"] == "attack"]
        if not alone and not attack:
            continue
        k = kept(rows, t, "handshake")
        kept_med[t] = statistics.median(k) if k else None
        attack_med[t] = med(attack, "rps")
        flood_med[t] = med(attack, "new_conns_per_s")
        out.append(" | ".join([
            f"| {NAMES[t]}", spread(alone, "rps"), spread(attack, "rps"), share(kept_med[t]),
            pair(med(alone, "lat_mean_ms"), med(attack, "lat_mean_ms"), fmt_ms), errors_cell(attack),
            fmt_int(med(attack, "flood_per_s")), fmt_int(flood_med[t]), alone_cell(attack),
            pair(med(alone, "proxy_cpu_pct"), med(attack, "proxy_cpu_pct"), fmt_pct),
            per_cpu_cell(rows, t, "handshake", alone, attack),
            fmt_pct(med(attack, "attacker_cpu_pct")), fmt_pct(med([*alone, *attack], "others_cpu_pct")),
        ]) + " |")
    return out, kept_med, attack_med, flood_med


def per_rep_line(rows, row):
    parts = []
    for t in ORDER:
        k = kept(rows, t, row)
        if k:
            parts.append(f"{NAMES[t].strip('*')} " + ", ".join(share(x) for x in k))
    return "- Kept, per rep: " + "; ".join(parts) if parts else ""


def summarize(rows):
    out = []
    slow = [r for r in rows if r["row"] == "slowloris"]
    if slow:
        out += ["### Slowloris: normal keep-alive clients (wrk) while an attacker holds connections with unfinished heads", ""]
        tab, kept_med, attack_med = table_slowloris(slow)
        out += tab + [""]
        out += [x for x in (ratio_lines(kept_med, "Share kept, ratio"),
                            ratio_lines(attack_med, "req/s under attack, ratio"),
                            per_rep_line(slow, "slowloris")) if x]
        g = kept_med.get("gatehouse")
        n = max((int(fnum(r.get("slow_n")) or 0) for r in slow), default=0)
        if g is not None:
            verdict = ("met" if g >= 0.9 else "**not met**") if n >= 5000 else f"not tested (the attacker had {n:,})"
            out.append(f"- Goal \"under a 5,000-connection slowloris, normal clients keep ≥ 90 % of their throughput\": "
                       f"Gatehouse kept {share(g)}: {verdict}.")
        out.append("")
    hs = [r for r in rows if r["row"] == "handshake"]
    if hs:
        out += ["### TLS handshake flood: established keep-alive clients (h2load --h1) during a flood of full handshakes", ""]
        tab, kept_med, attack_med, flood_med = table_handshake(hs)
        out += tab + [""]
        out += [x for x in (ratio_lines(kept_med, "Share kept, ratio"),
                            ratio_lines(attack_med, "req/s during the flood, ratio"),
                            ratio_lines(flood_med, "flood connections accepted per second, ratio"),
                            per_rep_line(hs, "handshake")) if x]
        out.append("")
    bad = [r for r in rows if r.get("complete") != "1" or r.get("exit_code") not in ("0", "")]
    if bad:
        out.append("Runs with incomplete output or a non-zero exit (their figures are missing or partial):")
        out.append("")
        out += [f"- {r['row']} {r['phase']} {r['target']} rep {r['rep']}: exit {r['exit_code']}, {r['error_detail']}"
                for r in bad]
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--csv", required=True)
    r.add_argument("--tool", required=True, choices=["wrk", "h2load"])
    r.add_argument("--output", required=True)
    r.add_argument("--attacker")
    r.add_argument("--flood", action="append", help="one s_time output; repeated")
    r.add_argument("kv", nargs="*")
    s = sub.add_parser("summarize")
    s.add_argument("csv")
    s.add_argument("--heading", required=True)
    s.add_argument("--meta")
    s.add_argument("--update")
    a = ap.parse_args()
    if a.cmd == "record":
        record(a)
        return
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("dos_report.py: no runs in " + a.csv)
    emit_section(a.heading, a.meta, summarize(rows), a.update)


if __name__ == "__main__":
    main()
