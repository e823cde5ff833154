#!/usr/bin/env python3
"""PNG charts of the bench/run-all report, drawn from the JSON of bench/lib/classic.py with
matplotlib (bench/run-all installs it from PyPI into bench/.cache/venv).

One chart per experiment plus ratios.png: bars for comparisons and ratios, lines (log x axis) for
the scaling curves; error bars span the min–max of the runs, the bar or point is the median.

Usage: charts.py RESULTS_DIR OUT_DIR
"""

import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import METRICS, groups, load, stat, summary_rows  # noqa: E402

COLORS = {"gatehouse": "#1f77b4", "nginx": "#2ca02c", "haproxy": "#d62728", "direct": "#7f7f7f"}
NAMES = {"gatehouse": "Gatehouse", "nginx": "nginx", "haproxy": "HAProxy", "direct": "direct",
         "gatehouse-gateway": "Gatehouse gateway", "gatehouse-bare": "Gatehouse bare route"}


UNITS = {"mean_ms": "ms", "p99_ms": "ms", "p50_ms": "ms", "hs_ms": "ms", "cpu_us": "µs", "tier_us": "µs",
         "rss_mb": "MB"}


def ylabel_of(metric):
    unit = UNITS.get(metric)
    return METRICS[metric][0] + (f" ({unit})" if unit else "")


def color(t):
    for k, c in COLORS.items():
        if t.startswith(k):
            return c
    return "#9467bd"


def shade(t, i):
    """Variants of one server (reuseport modes) get lighter shades of its colour."""
    import matplotlib.colors as mc

    base = mc.to_rgb(color(t))
    f = min(0.25 * i, 0.6)
    return tuple(c + (1 - c) * f for c in base)


def bars(ax, doc, metric, title, ylabel=None, log=False):
    """Grouped bars: one group per point, one bar per target; error bars span min–max."""
    gs = groups(doc)
    targets = []
    for _, tg in gs:
        for t, _ in tg:
            if t not in targets:
                targets.append(t)
    width = 0.8 / max(len(targets), 1)
    seen = {}
    for j, t in enumerate(targets):
        server = t.split()[0].split("-")[0]
        i = seen.get(server, 0)
        seen[server] = i + 1
        xs, ys, lo, hi = [], [], [], []
        for k, (_, tg) in enumerate(gs):
            runs = dict(tg).get(t)
            s = stat(runs, metric) if runs else None
            if s:
                xs.append(k + (j - (len(targets) - 1) / 2) * width)
                ys.append(s["median"])
                lo.append(s["median"] - s["min"])
                hi.append(s["max"] - s["median"])
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=NAMES.get(t, t), color=shade(t, i),
               edgecolor="black", linewidth=0.3)
    ax.set_xticks(range(len(gs)))
    ax.set_xticklabels([p for p, _ in gs], rotation=20 if len(gs) > 3 else 0, ha="right" if len(gs) > 3 else "center",
                       fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel or ylabel_of(metric), fontsize=9)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)


def lines(ax, doc, metric, title, xlabel, logy=False):
    """One line per target over the numeric x of each run (routes, certificates, connections)."""
    by = {}
    for r in doc["runs"]:
        by.setdefault(r["target"], {}).setdefault(r["x"], []).append(r)
    for t, xs in by.items():
        pts = sorted(xs)
        med, lo, hi, px = [], [], [], []
        for x in pts:
            s = stat(xs[x], metric)
            if s:
                px.append(max(x, 1) if metric != "rss_mb" else x)
                med.append(s["median"])
                lo.append(s["median"] - s["min"])
                hi.append(s["max"] - s["median"])
        ax.errorbar(px, med, yerr=[lo, hi], marker="o", capsize=3, label=NAMES.get(t, t), color=color(t))
    ax.set_xscale("symlog" if metric == "rss_mb" else "log", **({"linthresh": 1000} if metric == "rss_mb" else {}))
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel_of(metric), fontsize=9)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.set_ylim(bottom=0 if not logy else None)


def figure(n, wide=12, high=4):
    fig, axes = plt.subplots(1, n, figsize=(wide, high))
    return fig, (axes if n > 1 else [axes])


def save(fig, out, name):
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 7), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(os.path.join(out, f"{name}.png"), dpi=100)
    plt.close(fig)


def draw(docs, out):
    os.makedirs(out, exist_ok=True)
    made = []
    if "access" in docs:
        fig, ax = figure(2)
        bars(ax[0], docs["access"], "mean_ms", "Mean latency per request (lower is better)", log=True)
        bars(ax[1], docs["access"], "tier_us", "Server + backend CPU per request (lower is better)", log=True)
        save(fig, out, "access")
        made.append("access")
    if "reuseport" in docs:
        fig, ax = figure(2)
        for a, m, title in ((ax[0], "rps", "Requests/s, a new connection each"), (ax[1], "p99_ms", "p99 latency")):
            by = {}
            for r in docs["reuseport"]["runs"]:
                by.setdefault(r["target"], {}).setdefault(int(r["point"].split()[-1]), []).append(r)
            seen = {}
            for t, xs in by.items():
                server = t.split()[0]
                i = seen.get(server, 0)
                seen[server] = i + 1
                px = sorted(xs)
                ss = [stat(xs[x], m) for x in px]
                a.errorbar(px, [s["median"] for s in ss], yerr=[[s["median"] - s["min"] for s in ss],
                                                                 [s["max"] - s["median"] for s in ss]],
                           marker="o", capsize=3, label=t, color=shade(t, i),
                           linestyle=["-", "--", ":"][i % 3])
            a.set_xscale("log")
            a.set_xlabel("concurrent clients", fontsize=9)
            a.set_ylabel(ylabel_of(m), fontsize=9)
            a.set_title(title, fontsize=10)
            a.grid(alpha=0.3)
            a.set_ylim(bottom=0)
        save(fig, out, "reuseport")
        made.append("reuseport")
    if "h2h1" in docs:
        fig, ax = figure(2, 13, 4.5)
        bars(ax[0], docs["h2h1"], "rps", "Requests/s")
        bars(ax[1], docs["h2h1"], "per_cpu", "Requests per server CPU-second")
        save(fig, out, "h2h1")
        made.append("h2h1")
    if "session" in docs:
        fig, ax = figure(2, 13, 4.5)
        bars(ax[0], docs["session"], "hs_ms", "Node B: p50 connect + handshake (lower is better)")
        bars(ax[1], docs["session"], "cpu_us", "Node B: server CPU per connection (lower is better)")
        save(fig, out, "session")
        made.append("session")
    if "gateway" in docs:
        fig, ax = figure(2)
        bars(ax[0], docs["gateway"], "rps", "Requests/s (ab -k -c 100)")
        bars(ax[1], docs["gateway"], "mean_ms", "Mean latency (lower is better)")
        save(fig, out, "gateway")
        made.append("gateway")
    for exp, xlabel in (("routes", "routes"), ("certs", "certificates in the store"), ("conns", "connections")):
        if exp in docs:
            fig, ax = figure(2)
            lines(ax[0], docs[exp], "per_cpu", "Throughput per server CPU-second", xlabel)
            lines(ax[1], docs[exp], "p99_ms", "p99 latency (lower is better)", xlabel)
            save(fig, out, exp)
            made.append(exp)
    if "memory" in docs:
        fig, ax = figure(1, 7, 4.5)
        lines(ax[0], docs["memory"], "rss_mb", "RSS vs idle TLS keep-alive connections", "idle connections")
        save(fig, out, "memory")
        made.append("memory")
    rows = summary_rows(docs)
    if rows:
        fig, a = plt.subplots(figsize=(11, 0.32 * len(rows) + 1.8))
        labels = [f"{e}: {p}" for e, p, _, _ in rows]
        for k, (peer, c) in enumerate((("nginx", COLORS["nginx"]), ("HAProxy", COLORS["haproxy"]))):
            ys = [i + (k - 0.5) * 0.38 for i in range(len(rows))]
            vals = [rs.get(peer, (0, False))[0] for *_, rs in rows]
            a.barh(ys, vals, 0.38, label=f"Gatehouse / {peer}", color=c, edgecolor="black", linewidth=0.3)
        a.axvline(1.0, color="black", linewidth=1)
        a.set_yticks(range(len(rows)))
        a.set_yticklabels(labels, fontsize=7)
        a.invert_yaxis()
        a.set_xscale("log")
        ticks = [0.5, 0.67, 0.8, 1, 1.25, 1.5, 2, 3, 5, 8]
        a.set_xticks(ticks)
        a.set_xticklabels([f"{t:g}" for t in ticks])
        a.minorticks_off()
        a.set_xlabel("ratio (> 1: Gatehouse better), log scale", fontsize=9)
        a.set_title("Gatehouse against nginx and HAProxy, same run", fontsize=10)
        a.grid(axis="x", alpha=0.3)
        a.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "ratios.png"), dpi=100)
        plt.close(fig)
        made.append("ratios")
    return made


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    made = draw(load(sys.argv[1]), sys.argv[2])
    print(f"charts.py: {', '.join(made)} in {sys.argv[2]}")


if __name__ == "__main__":
    main()
