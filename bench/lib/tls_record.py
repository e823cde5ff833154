#!/usr/bin/env python3
"""Parse one load-generator output of bench/tls.sh (ab, h2load or tls_load.py), combine it
with the CPU counters and Gatehouse TLS metrics measured by tls.sh, and append one row to
the per-run CSV.  A `startup` row (no load generator) records start-up time and memory.
Standard library only; ab parsing is bench/lib/record_run.py's.

Usage:
    tls_record.py --csv RUNS.csv --tool ab|h2load|tls_load|startup [--output FILE] key=value ...

Raw keys passed by tls.sh:
    group, case, variant, target, rep, seq, exit_code, clk_tck,
    wall_s (float: the CPU window), rate_window (1 = h2load -D: the CPU window is the
    measured phase only, so per-CPU figures are rates; else totals over the whole run),
    server_ns                                 the server's CPU from schedstat (0: use server_j)
    server_j, backend_j, loadgen_j            jiffies (utime+stime) of the process trees
    origin_j, redis_j                         cluster group: node A's and redis-server's
    user_j nice_j system_j idle_j iowait_j irq_j softirq_j steal_j   /proc/stat deltas
    gh_full, gh_resumed, gh_resumed_ticket, gh_resumed_cache, gh_fetched, gh_redis_cmds,
    gh_redis_errors, gh_redis_us              Gatehouse counter deltas (admin metrics), and
    a_full, a_resumed, ... a_redis_us         the same for node A in the cluster group
    accepts_before, accepts_after             backend nginx stub_status "accepts"
    rss_kb                                    server tree RSS after the run
    ready_s, name_s, rss_idle_kb              (startup rows)

Prints a one-line summary of the run on stderr.
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record_run import append_row, grab, parse_ab  # noqa: E402

GH_COUNTERS = ["full", "resumed", "resumed_ticket", "resumed_cache", "fetched", "redis_cmds",
               "redis_errors", "redis_us"]
FIELDS = [
    "group", "case", "variant", "target", "rep", "seq", "tool",
    "exit_code", "requests", "rps", "lat_mean_ms", "p50_ms", "p99_ms", "hs_p50_ms",
    "resumed", "negotiated", "errors", "error_detail", "ok",
    "wall_s", "server_cpu_pct", "per_cpu_s", "server_cpu_us_per_conn", "backend_cpu_pct",
    "loadgen_cpu_pct", "origin_cpu_pct", "redis_cpu_pct", "others_cpu_pct", "steal_pct",
    *(f"gh_{k}" for k in GH_COUNTERS),
    "origin_requests", "origin_errors", "origin_resumed", "origin_p50_ms", "origin_hs_p50_ms",
    *(f"a_{k}" for k in GH_COUNTERS),
    "backend_new_conns", "rss_kb", "ready_s", "name_s", "rss_idle_kb",
    "clk_tck", "server_j", "server_ns", "backend_j", "loadgen_j", "origin_j", "redis_j", "rate_window",
    "accepts_before", "accepts_after",
    "user_j", "nice_j", "system_j", "idle_j", "iowait_j", "irq_j", "softirq_j", "steal_j",
]

_UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def parse_ab_tls(out):
    r = parse_ab(out)
    m = re.search(r"^SSL/TLS Protocol:\s+(\S+?),(\S+?),", out, re.M)
    if m:
        r["negotiated"] = f"{m.group(1)} {m.group(2)}"
    return r


def parse_h2load(out):
    r = grab(out, [("rps", r"^finished in [0-9.]+s, ([0-9.]+) req/s", float)])
    m = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                  r"(\d+) errored, (\d+) timeout", out, re.M)
    errors, detail = 0, []
    if m:
        total, _, done, ok, failed, errored, timeout = (int(x) for x in m.groups())
        r["requests"] = ok
        bad = failed + errored + timeout
        if bad:
            errors += bad
            detail.append(f"failed {failed}, errored {errored}, timeout {timeout}")
    m = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out, re.M)
    if m:
        non2xx = sum(int(x) for x in m.groups()[1:])
        if non2xx:
            errors += non2xx
            detail.append(f"non-2xx {non2xx}")
    m = re.search(r"^time for request:\s+\S+\s+\S+\s+([0-9.]+)(us|ms|s)\s", out, re.M)
    if m:
        r["lat_mean_ms"] = float(m.group(1)) * _UNIT_MS[m.group(2)]
    proto = re.search(r"^TLS Protocol: (\S+)", out, re.M)
    cipher = re.search(r"^Cipher: (\S+)", out, re.M)
    alpn = re.search(r"^Application protocol: (\S+)", out, re.M)
    if proto:
        r["negotiated"] = " ".join(x.group(1) for x in (proto, cipher, alpn) if x)
    r["errors"] = errors
    r["error_detail"] = "; ".join(detail)
    return r


def parse_tls_load(out):
    r = {}
    line = next((ln for ln in reversed(out.strip().splitlines()) if ln.startswith("{")), None)
    if not line:
        return r
    j = json.loads(line)
    r["requests"] = j["ok"]
    r["rps"] = j["conn_per_s"]
    r["lat_mean_ms"] = j["mean_ms"]
    r["p50_ms"] = j["p50_ms"]
    r["p99_ms"] = j["p99_ms"]
    r["hs_p50_ms"] = j.get("handshake_p50_ms")
    r["resumed"] = j["resumed"]
    r["negotiated"] = " ".join(sorted(j["versions"]))
    r["errors"] = j["errors"] + (j["connections"] - j["ok"] - j["errors"])
    r["error_detail"] = "; ".join(f"{k} {v}" for k, v in sorted(j["error_kinds"].items()))
    o = j.get("origin")
    if o:
        # Node A's connections (cross-node mode): reported, not counted in the rate.
        r.update(origin_requests=o["ok"], origin_errors=o["errors"], origin_resumed=o["resumed"],
                 origin_p50_ms=o["p50_ms"], origin_hs_p50_ms=o["handshake_p50_ms"])
        if o["errors"]:
            r["errors"] += o["errors"]
            r["error_detail"] = "; ".join(
                x for x in (r["error_detail"], ", ".join(f"node A {k} {v}" for k, v in sorted(o["error_kinds"].items())))
                if x)
    return r


# gatehouse-loadgen prints tls_load.py's JSON.
PARSERS = {"ab": parse_ab_tls, "h2load": parse_h2load, "tls_load": parse_tls_load, "loadgen": parse_tls_load}
NEEDED = {"ab": ("requests", "rps", "p99_ms"), "h2load": ("requests", "rps", "lat_mean_ms"),
          "tls_load": ("requests", "rps", "p50_ms"), "loadgen": ("requests", "rps", "p50_ms")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--tool", required=True, choices=[*PARSERS, "startup"])
    ap.add_argument("--output")
    ap.add_argument("kv", nargs="*")
    a = ap.parse_args()
    raw = dict(kv.partition("=")[::2] for kv in a.kv)

    row = {k: "" for k in FIELDS}
    row.update({k: v for k, v in raw.items() if k in FIELDS})
    row["tool"] = a.tool

    if a.tool == "startup":
        row["ok"] = int(bool(raw.get("ready_s")) and bool(raw.get("name_s")))
        append_row(a.csv, FIELDS, row)
        print(f"  startup {row['target']:9} {row['variant']:12} ready {raw.get('ready_s')} s, "
              f"name served {raw.get('name_s')} s, RSS idle {raw.get('rss_idle_kb')} kB", file=sys.stderr)
        return

    try:
        with open(a.output, encoding="utf-8", errors="replace") as f:
            out = f.read()
    except (OSError, TypeError):
        out = ""
    try:
        parsed = PARSERS[a.tool](out)
    except (ValueError, KeyError) as e:
        parsed = {"errors": 1, "error_detail": f"unparsable output ({e})"}
    row.update(parsed)

    def i(k):
        return int(raw.get(k) or 0)

    exit_code = i("exit_code")
    complete = all(parsed.get(k) is not None for k in NEEDED[a.tool])
    detail = parsed.get("error_detail", "")
    if exit_code != 0:
        detail = (detail + "; " if detail else "") + f"exit code {exit_code}"
    if not complete:
        tail = " | ".join(ln.strip() for ln in out.strip().splitlines()[-2:])[:160]
        detail = (detail + "; " if detail else "") + "output incomplete" + (f" ({tail})" if tail else "")
    row["error_detail"] = detail
    row["ok"] = int(complete and exit_code == 0 and not parsed.get("errors"))

    tck = i("clk_tck") or 100
    wall = float(raw.get("wall_s") or 0) or float("nan")

    def pct(j):
        return 100.0 * j / tck / wall  # percent of ONE core

    server_j, backend_j, loadgen_j = i("server_j"), i("backend_j"), i("loadgen_j")
    # The server's exact CPU time from schedstat when the snapshot could read it (ticks are
    # 10 ms: too coarse for a run that takes a tenth of a second of CPU), in jiffies.
    server_j = i("server_ns") * tck / 1e9 or server_j
    origin_j, redis_j = i("origin_j"), i("redis_j")
    busy = i("user_j") + i("nice_j") + i("system_j") + i("irq_j") + i("softirq_j")
    row["server_cpu_pct"] = round(pct(server_j), 2)
    row["backend_cpu_pct"] = round(pct(backend_j), 2)
    row["loadgen_cpu_pct"] = round(pct(loadgen_j), 2)
    row["origin_cpu_pct"] = round(pct(origin_j), 2) if raw.get("origin_j") else ""
    row["redis_cpu_pct"] = round(pct(redis_j), 2) if raw.get("redis_j") else ""
    row["others_cpu_pct"] = round(pct(busy - server_j - backend_j - loadgen_j - origin_j - redis_j), 2)
    row["steal_pct"] = round(pct(i("steal_j")), 2)
    req, rps = parsed.get("requests"), parsed.get("rps")
    if server_j:
        if raw.get("rate_window") == "1":
            # h2load -D: rps is measured over its main phase, the CPU window is that phase.
            row["per_cpu_s"] = round(rps / (server_j / tck / wall), 1) if rps else ""
        else:
            row["per_cpu_s"] = round(req / (server_j / tck), 1) if req else ""
            row["server_cpu_us_per_conn"] = round(1e6 * server_j / tck / req, 1) if req else ""
    if raw.get("accepts_before") and raw.get("accepts_after"):
        # The "after" stub_status request is itself one accepted connection.
        row["backend_new_conns"] = i("accepts_after") - i("accepts_before") - 1
    append_row(a.csv, FIELDS, row)

    def fmt(v, spec):
        return format(v, spec) if isinstance(v, (int, float)) else "?"

    gh = f"  gatehouse full {raw.get('gh_full')} resumed {raw.get('gh_resumed')}" if raw.get("gh_full") else ""
    print(
        f"  rep {row['rep']} {a.tool:8} {row['target']:9} {row['case'][:44]:44} "
        f"{fmt(rps, '9.0f')}/s  server CPU {fmt(row['server_cpu_pct'], '5.1f')}%  "
        f"per CPU-s {fmt(row['per_cpu_s'], '8.0f')}"
        + (f"  resumed {parsed['resumed']}" if parsed.get("resumed") is not None else "") + gh
        + (f"  new backend conns {row['backend_new_conns']}" if row["backend_new_conns"] != "" else "")
        + ("" if row["ok"] else f"  ** FAILED: {detail}"),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
