#!/usr/bin/env python3
"""bench/lib/redis_summarize.py RUNS.jsonl: the Markdown tables of bench/redis.sh.

One row per operation and deployment, medians over the rounds with the spread (min-max):
operations per second, p50 / p99 latency, Redis CPU per operation, commands per shard and the
spread (total commands / busiest shard's). Then the goal: the Cluster's spread at least 2.5
for every operation (one Redis: 1 by definition).
"""

import json
import statistics
import sys

GOAL_SPREAD = 2.5
OPS = ["ratelimit", "store", "fetch"]
NAMES = {
    "ratelimit": "cluster rate-limit decision (Lua script)",
    "store": "TLS session write (SET PX)",
    "fetch": "TLS session fetch (GET)",
}


def med(vals):
    return statistics.median(vals) if vals else None


def cell(vals, fmt):
    if not vals:
        return "–"
    m = fmt(med(vals))
    if len(vals) == 1:
        return m
    return f"{m} ({fmt(min(vals))}–{fmt(max(vals))})"


def spread_of(run):
    shards = run["shards"]
    busiest = max(shards) if shards else 0
    return sum(shards) / busiest if busiest else 0.0


def main():
    runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    print("| Operation | Redis | ops/s | p50 µs | p99 µs | Redis CPU µs/op | commands per shard (median run) | spread |")
    print("|---|---|---|---|---|---|---|---|")
    verdicts = []
    for op in OPS:
        for dep in ["single", "cluster"]:
            rs = [r for r in runs if r["op"] == op and r["deployment"] == dep]
            if not rs:
                continue
            errors = sum(r["errors"] for r in rs)
            ops = [r["ops_per_sec"] for r in rs]
            mid = sorted(rs, key=lambda r: r["ops_per_sec"])[len(rs) // 2]
            cpu = [r["redis_cpu_s"] * 1e6 / r["ops"] for r in rs if r["ops"]]
            spreads = [spread_of(r) for r in rs]
            label = "1 Redis" if dep == "single" else "Cluster, 3 masters"
            note = f" ({errors} errors)" if errors else ""
            print(
                f"| {NAMES[op]}{note} | {label} | {cell(ops, lambda v: f'{v:,.0f}')} "
                f"| {cell([r['p50_us'] for r in rs], lambda v: f'{v:.0f}')} "
                f"| {cell([r['p99_us'] for r in rs], lambda v: f'{v:.0f}')} "
                f"| {cell(cpu, lambda v: f'{v:.1f}')} "
                f"| {' / '.join(f'{s:,}' for s in mid['shards'])} | {cell(spreads, lambda v: f'{v:.2f}')} |"
            )
            if dep == "cluster":
                verdicts.append((op, med(spreads)))
    print()
    for op, s in verdicts:
        status = "met" if s >= GOAL_SPREAD else "missed"
        print(
            f"- {NAMES[op]}: the Cluster carries {s:.2f}x the commands of its busiest shard "
            f"(goal ≥ {GOAL_SPREAD}x, one Redis 1x): {status}."
        )


if __name__ == "__main__":
    main()
