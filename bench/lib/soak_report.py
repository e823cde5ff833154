#!/usr/bin/env python3
"""Summarise a bench/soak.sh run: the samples of Gatehouse's memory and file descriptors, a
least-squares line through the RSS of the second half (slope in MB per minute, growth over the
second half), and the load generators' results.  Exits 1 when that growth is above
--growth-limit %, or when a load generator reports failed requests.  Standard library only.

Usage:
    soak_report.py SAMPLES.tsv --heading "## ..." [--meta META.md] [--growth-limit 10]
                   [--after "SECONDS RSS_KB FDS OPEN REQUESTS"] [--load H2LOAD_OUTPUT ...]
                   [--update BENCHMARKS.md]

SAMPLES.tsv: a header line, then t_s, rss_kb, fds, threads, open, requests per sample.
--after: the same, taken SECONDS after the load generators ended.
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import emit_section, fmt_int  # noqa: E402
from tls_record import parse_h2load  # noqa: E402


def fit(xs, ys):
    """Least-squares line y = a + b x -> (a, b)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def mb(kb):
    return f"{kb / 1024:.1f} MB"


def after_rows(after):
    if not after:
        return []
    secs, rss, fds, open_, reqs = (int(x) for x in after.split())
    return [f"| {secs} s after the load ended: RSS / open fds / open connections | {mb(rss)} / {fds} / {open_} |",
            f"| requests served in all (admin metrics) | {fmt_int(reqs)} |"]


def load_table(paths):
    out = ["| load | requests succeeded | failed / errored / timeout | req/s |", "|---|---:|---:|---:|"]
    failed = 0
    for p in paths:
        name = os.path.basename(p).rsplit(".", 1)[0]
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                r = parse_h2load(f.read())
        except OSError:
            r = {}
        if r.get("requests") is None:
            out.append(f"| {name} | (no summary: h2load did not finish) | – | – |")
            failed += 1
            continue
        bad = r.get("error_detail") or "0"
        failed += int(r.get("errors") or 0)
        out.append(f"| {name} | {fmt_int(r['requests'])} | {bad} | {fmt_int(r.get('rps'))} |")
    return out, failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("samples")
    ap.add_argument("--heading", required=True)
    ap.add_argument("--meta")
    ap.add_argument("--growth-limit", type=float, default=10.0)
    ap.add_argument("--after")
    ap.add_argument("--load", action="append", default=[])
    ap.add_argument("--update")
    a = ap.parse_args()

    with open(a.samples, newline="") as f:
        rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(f, delimiter="\t")]
    if len(rows) < 4:
        sys.exit("soak_report.py: fewer than 4 samples")
    t = [r["t_s"] for r in rows]
    rss = [r["rss_kb"] for r in rows]
    half = [r for r in rows if r["t_s"] >= t[-1] / 2]
    a0, b = fit([r["t_s"] for r in half], [r["rss_kb"] for r in half])
    mid, end = a0 + b * half[0]["t_s"], a0 + b * half[-1]["t_s"]
    growth = 100.0 * (end - mid) / mid if mid else 0.0
    fds = [r["fds"] for r in rows]
    fa, fb = fit([r["t_s"] for r in half], [r["fds"] for r in half])

    loads, failed = load_table(a.load)
    ok = growth <= a.growth_limit and not failed
    out = [
        "| measure | value |", "|---|---:|",
        f"| RSS first sample (t = {t[0]} s) / last / max | {mb(rss[0])} / {mb(rss[-1])} / {mb(max(rss))} |",
        f"| RSS slope over the second half (least squares, {len(half)} samples) | {b * 60 / 1024:+.3f} MB/min |",
        f"| RSS growth over the second half (fitted line: {mb(mid)} → {mb(end)}) | {growth:+.1f} % (limit {a.growth_limit:g} %) |",
        f"| open fds first / last / max (slope over the second half) | {fds[0]} / {fds[-1]} / {max(fds)} ({fb * 60:+.1f} per min) |",
        f"| requests served by the last sample (admin metrics) | {fmt_int(rows[-1]['requests'])} |",
        *after_rows(a.after),
        "",
        f"- Verdict: {'**flat**' if growth <= a.growth_limit else '**grew**'}: RSS growth {growth:+.1f} % over the second half "
        f"(the run fails above {a.growth_limit:g} %); "
        f"{'no failed requests' if not failed else f'**{failed} failed requests or unfinished load generators**'}.",
        "",
    ]
    out += loads + [""]
    step = max(1, round(60 / (t[1] - t[0]))) if len(rows) > 30 else 1
    shown = rows[step - 1::step]
    if shown[-1] is not rows[-1]:
        shown.append(rows[-1])
    out += [f"Samples{' (one a minute)' if step > 1 else ''}:", "",
            "| t | RSS | open fds | threads | open connections | requests served |", "|---:|---:|---:|---:|---:|---:|"]
    out += [f"| {r['t_s']} s | {mb(r['rss_kb'])} | {r['fds']} | {r['threads']} | {r['open']} | {fmt_int(r['requests'])} |"
            for r in shown]
    emit_section(a.heading, a.meta, "\n".join(out) + "\n", a.update)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
