#!/usr/bin/env python3
"""Summarise the per-run CSV of bench/gateway.sh (rows written by gateway_record.py) into a
Markdown section: the load table (medians and min-max over the rounds), the unqueued-latency
table, and the ratios the bench exists for, each from the same run.  Standard library only;
number formatting is summarize.py's (bench/proxy.sh).

Usage:
    gateway_summarize.py RUNS.csv --conns N [--heading "## ..."] [--meta META.md] [--out FILE.md]

Prints the section on stdout; with --out also writes it there.
"""

import argparse
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import fmt_int, fmt_pct, fnum, med  # noqa: E402

NAMES = {
    "direct": "direct: ab → nginx",
    "bare": "bare: **Gatehouse** route → nginx",
    "service": "service: **Gatehouse** service without plugins (prefix stripped)",
    "gateway": "gateway: **Gatehouse** service, key in path",
    "gateway-header-key": "gateway-header-key: **Gatehouse** service, key in X-APP-KEY",
    "gateway-cluster": "gateway-cluster: **Gatehouse** service, key in path, cluster limit in Redis",
    "haproxy": "HAProxy proxy → nginx",
    "nginx-proxy": "nginx proxy → nginx",
}
ORDER = list(NAMES)
GATEWAY_ROWS = ["gateway", "gateway-header-key"]
THROUGHPUT_GOAL = 0.95  # gateway req/s ÷ bare req/s
LATENCY_GOAL_MS = 0.2  # mean latency added to direct, at -c 100
OTHERS_WARN_PCT = 10.0  # median CPU of processes outside the bench that marks a row disturbed
STEAL_WARN_PCT = 5.0  # median hypervisor steal (% of a core) that marks a row disturbed


def spread(vals, f):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "–"
    return f"{f(min(vals))}–{f(max(vals))}"


def ms3(x):
    return "–" if x is None else f"{x:.3f} ms"


def ms0(x):
    return "–" if x is None else f"{x:.0f} ms"


def r2(x):
    return "–" if x is None else f"{x:.2f}"


class Runs:
    """The runs of one concurrency, by (target, rep)."""

    def __init__(self, rows):
        self.rows = rows
        self.by = {(r["target"], r["rep"]): r for r in rows}
        self.targets = [t for t in ORDER if any(r["target"] == t for r in rows)]
        self.targets += sorted({r["target"] for r in rows} - set(ORDER))
        self.reps = sorted({r["rep"] for r in rows}, key=int)

    def of(self, target):
        return [r for r in self.rows if r["target"] == target]

    def median(self, target, key):
        return med(self.of(target), key)

    def per_round(self, a, b, key, op):
        """op(a's value, b's value) for every round in which both ran."""
        out = []
        for rep in self.reps:
            x, y = self.by.get((a, rep)), self.by.get((b, rep))
            if x and y and fnum(x.get(key)) is not None and fnum(y.get(key)) is not None:
                out.append(op(fnum(x[key]), fnum(y[key])))
        return out

    def ratio(self, a, b, key):
        """(ratio of the medians, per-round ratios)."""
        ma, mb = self.median(a, key), self.median(b, key)
        return (ma / mb if ma is not None and mb else None,
                self.per_round(a, b, key, lambda x, y: x / y if y else None))

    def diff(self, a, b, key):
        ma, mb = self.median(a, key), self.median(b, key)
        return (ma - mb if ma is not None and mb is not None else None,
                self.per_round(a, b, key, lambda x, y: x - y))


def load_table(runs, conns, failures):
    out = [f"| row (ab -k -c {conns}) | req/s median (min–max, runs) | time per request, across all concurrent "
           "| mean latency median (min–max) | p50 | p99 "
           "| failed / non-2xx | server CPU-s per 10k req | new backend conns / 100k req | others' CPU % |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in runs.targets:
        g = runs.of(t)
        rps = [fnum(r["rps"]) for r in g]
        lat = [fnum(r["lat_mean_ms"]) for r in g]
        bad = [r for r in g if str(r.get("ok")) != "1"]
        for r in bad:
            failures.append(f"{t} -c {r['conc']} rep {r['rep']}: {r.get('error_detail') or 'errors'}")
        cell = f"{fmt_int(runs.median(t, 'rps'))} ({spread(rps, fmt_int)}, {len(g)})"
        if bad:
            cell = f"⚠ FAILED {len(bad)}/{len(g)} runs: {cell}"
        failed = sum(int(fnum(r.get("failed")) or 0) for r in g)
        non2xx = sum(int(fnum(r.get("non2xx")) or 0) for r in g)
        cpu = runs.median(t, "cpu_s_per_10k")
        conns = runs.median(t, "conns_per_100k")
        others = runs.median(t, "others_cpu_pct")
        steal = runs.median(t, "steal_pct")
        out.append("| " + " | ".join([
            NAMES.get(t, t) + (" (server: the backend)" if t == "direct" else ""),
            cell,
            ms3(runs.median(t, "tpr_all_ms")),
            f"{ms3(runs.median(t, 'lat_mean_ms'))} ({spread(lat, lambda x: f'{x:.3f}')})",
            ms0(runs.median(t, "p50_ms")),
            ms0(runs.median(t, "p99_ms")),
            f"{failed} / {non2xx}",
            "–" if cpu is None else f"{cpu:.3f}",
            "–" if conns is None else (f"{conns:.0f}" + (" (client conns)" if t == "direct" else "")),
            fmt_pct(others) + (" ⚠" if (others or 0) > OTHERS_WARN_PCT else "")
            + (f" (steal {steal:.0f} % ⚠)" if (steal or 0) > STEAL_WARN_PCT else ""),
        ]) + " |")
    return out


def unqueued_table(runs, failures):
    out = ["| row (ab -k -c 1) | mean latency median (min–max, runs) | added to direct (per round) | req/s |",
           "|---|---:|---:|---:|"]
    for t in runs.targets:
        g = runs.of(t)
        for r in g:
            if str(r.get("ok")) != "1":
                failures.append(f"{t} -c 1 rep {r['rep']}: {r.get('error_detail') or 'errors'}")
        lat = [fnum(r["lat_mean_ms"]) for r in g]
        added = "–"
        if t != "direct":
            d, per = runs.diff(t, "direct", "lat_mean_ms")
            if d is not None:
                added = f"{d * 1000:+.0f} µs ({spread(per, lambda x: f'{x * 1000:+.0f}')})"
        out.append(f"| {NAMES.get(t, t)} | {ms3(runs.median(t, 'lat_mean_ms'))} "
                   f"({spread(lat, lambda x: f'{x:.3f}')}, {len(g)}) | {added} | {fmt_int(runs.median(t, 'rps'))} |")
    return out


def paired(per):
    """The median of the per-round figures: each round's rows ran back to back, so a ratio or a
    difference within a round cancels what drifts between rounds (others' load, steal), and the
    median drops the round a burst hit.  The goal verdicts use it."""
    per = [x for x in per if x is not None]
    return statistics.median(per) if per else None


def verdict(ok):
    return "" if ok is None else (" — goal met" if ok else " — **goal not met**")


def derived(runs, conns):
    out = []
    have = set(runs.targets)
    for base in ["bare", "service"]:
        for t in GATEWAY_ROWS:
            if t in have and base in have:
                m, per = runs.ratio(t, base, "rps")
                p = paired(per)
                out.append(f"- {t} ÷ {base}, req/s: **{r2(p)}** (median of {len(per)} per-round ratios, "
                           f"{spread(per, r2)}; ratio of the medians {r2(m)}; goal ≥ {THROUGHPUT_GOAL})"
                           f"{verdict(None if p is None else p >= THROUGHPUT_GOAL)}")
                # What the proxy would serve saturated: its CPU per request, paired the same way.
                c, cper = runs.ratio(base, t, "cpu_s_per_10k")
                cp = paired(cper)
                out.append(f"- {t} ÷ {base}, requests per Gatehouse CPU-second: **{r2(cp)}** (median of "
                           f"{len(cper)} per-round ratios, {spread(cper, r2)}; ratio of the medians {r2(c)}; "
                           f"goal ≥ {THROUGHPUT_GOAL}){verdict(None if cp is None else cp >= THROUGHPUT_GOAL)}")
    for key, what in [("tpr_all_ms", "ab's time per request across all concurrent requests (wall time ÷ requests)"),
                      ("lat_mean_ms", "mean latency a client saw (ab's first time per request)")]:
        for t in ["bare"] + GATEWAY_ROWS:
            if t in have and "direct" in have:
                d, per = runs.diff(t, "direct", key)
                p = paired(per)
                out.append(f"- added to direct at -c {conns}, {what}, {t}: **{'–' if p is None else f'{p:+.3f} ms'}** "
                           f"(median of {len(per)} per-round differences, {spread(per, lambda x: f'{x:+.3f}')}; "
                           f"difference of the medians {'–' if d is None else f'{d:+.3f}'}; goal ≤ {LATENCY_GOAL_MS} ms)"
                           f"{verdict(None if p is None else p <= LATENCY_GOAL_MS)}")
    for t in ["service"] + GATEWAY_ROWS:
        if t in have and "bare" in have:
            d, per = runs.diff(t, "bare", "cpu_s_per_10k")
            if d is not None:
                out.append(f"- Gatehouse CPU per request, {t} − bare: **{d * 100:+.1f} µs** "
                           f"(per round {spread(per, lambda x: f'{x * 100:+.1f}')}; bare itself "
                           f"{runs.median('bare', 'cpu_s_per_10k') * 100:.1f} µs)")
    for gh in ["bare", "gateway"]:
        for peer in ["nginx-proxy", "haproxy"]:
            if gh in have and peer in have:
                m, per = runs.ratio(gh, peer, "rps")
                c, cper = runs.ratio(peer, gh, "cpu_s_per_10k")
                out.append(f"- {gh} ÷ {peer}: req/s **{r2(m)}** (per round {spread(per, r2)}); "
                           f"{peer}'s CPU per request ÷ Gatehouse's **{r2(c)}** (per round {spread(cper, r2)}; > 1: Gatehouse uses less)")
    return out


def notes(rows):
    out = []
    # Runs measured by schedstat are exact; those that fell back to ticks are coarse when short.
    short = [r for r in rows if not fnum(r.get("server_ns")) and (fnum(r.get("server_j")) or 0) < 100
             and r.get("conc") != "1"]
    if short:
        out.append(f"{len(short)} runs were measured in clock ticks of server CPU (a thread of the server ended "
                   "during the run, or no schedstat) and used fewer than 100: their CPU per 10k requests carries "
                   "a quantisation error of 1 % or more (raise AB_N).")
    oth = [(fnum(r.get("others_cpu_pct")), r) for r in rows if fnum(r.get("others_cpu_pct")) is not None]
    if oth:
        x, r = max(oth, key=lambda t: t[0])
        st = [fnum(r2.get("steal_pct")) or 0 for r2 in rows]
        out.append(f"Noise: others' CPU at most {x:.1f} % of a core ({r['target']} -c {r['conc']} rep {r['rep']}), "
                   f"median {statistics.median(v for v, _ in oth):.1f} %; hypervisor steal at most {max(st):.1f} %, "
                   f"median {statistics.median(st):.1f} %.")
    return out


def summarize(rows, conns):
    failures = []
    loaded = Runs([r for r in rows if r["conc"] == str(conns)])
    single = Runs([r for r in rows if r["conc"] == "1"])
    out = load_table(loaded, conns, failures)
    out += ["", "Derived, from the same run. A round runs every row once, back to back; the goal figures are the "
            "median over the rounds of the ratio (or difference) within a round, which cancels drift between "
            "rounds; the ratio of the table's medians is shown beside it:", ""]
    out += derived(loaded, conns) or ["- (no ratios: the rows they need were not measured)"]
    if single.rows:
        out += ["", "Unqueued latency: one request at a time, so the figure is the hop's own cost, "
                "not a queue behind 100 clients:", ""]
        out += unqueued_table(single, failures)
    extra = notes(rows)
    if extra:
        out += [""] + [f"- {n}" for n in extra]
    if failures:
        out += ["", "Failed runs (failed or non-2xx requests, requests the service did not admit, "
                "incomplete output or non-zero exit):", ""] + [f"- {x}" for x in failures]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--conns", type=int, required=True)
    ap.add_argument("--heading", default="## API gateway (bench/gateway.sh)")
    ap.add_argument("--meta", help="Markdown inserted between the heading and the table")
    ap.add_argument("--out", help="also write the section to this file")
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("gateway_summarize.py: no runs in " + a.csv)
    meta = ""
    if a.meta:
        with open(a.meta, encoding="utf-8") as f:
            meta = f.read().strip() + "\n\n"
    section = a.heading + "\n\n" + meta + summarize(rows, a.conns)
    sys.stdout.write(section)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(section)


if __name__ == "__main__":
    main()
