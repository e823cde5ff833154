#!/usr/bin/env python3
"""Parse one `ab` output of bench/gateway.sh, combine it with the CPU, backend-connection and
gateway counters the script measured around the run, and append one row to the per-run CSV.
Standard library only; the ab parsing is record_run.py's (shared with bench/proxy.sh).

Usage:
    gateway_record.py --csv RUNS.csv --output AB_OUTPUT key=value [key=value ...]

Raw keys passed by gateway.sh (integers unless noted):
    rep, seq, target, conc, exit_code, clk_tck,
    wall_s (float, seconds of the measured window),
    server_ns                          the server's CPU from schedstat (0: use server_j)
    server_j, backend_j, loadgen_j     jiffies (utime+stime) of the process trees during the
                                        window; server = the process under test (for direct:
                                        the backend nginx itself)
    user_j, nice_j, system_j, idle_j, iowait_j, irq_j, softirq_j, steal_j, cpu0_busy_j,
    cpu0_total_j, cpu1_busy_j, cpu1_total_j      /proc/stat deltas
    accepts_before, accepts_after      backend nginx stub_status "accepts"
    admitted (optional)                gatehouse_gateway_admitted_total delta: every request of
                                        a gateway row must have been admitted by the service

Prints a one-line summary of the run on stderr.
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record_run import add_backend_conns, append_row, fmt, grab, parse_ab  # noqa: E402

FIELDS = [
    "rep", "seq", "target", "conc",
    "exit_code", "requests", "rps", "lat_mean_ms", "tpr_all_ms", "p50_ms", "p99_ms",
    "failed", "non2xx", "keepalive_requests", "admitted", "errors", "error_detail", "ok",
    "wall_s", "server_cpu_pct", "cpu_s_per_10k", "backend_cpu_pct", "loadgen_cpu_pct",
    "others_cpu_pct", "steal_pct", "backend_new_conns", "conns_per_100k",
    "clk_tck", "server_j", "server_ns", "backend_j", "loadgen_j",
    "user_j", "nice_j", "system_j", "idle_j", "iowait_j", "irq_j", "softirq_j", "steal_j",
    "cpu0_busy_j", "cpu0_total_j", "cpu1_busy_j", "cpu1_total_j",
    "accepts_before", "accepts_after",
]

# lat_mean_ms (record_run.py) is ab's first "Time per request": the mean time a client waited.
# tpr_all_ms is the second, "across all concurrent requests": wall time / requests = 1 / req/s.
AB_EXTRA = [("p50_ms", r"^\s*50%\s+(\d+)", float),
            ("tpr_all_ms", r"^Time per request:\s+([0-9.]+) \[ms\] \(mean, across all concurrent requests\)$", float),
            ("failed", r"^Failed requests:\s+(\d+)", int),
            ("non2xx", r"^Non-2xx responses:\s+(\d+)", int),
            ("keepalive_requests", r"^Keep-Alive requests:\s+(\d+)", int)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("kv", nargs="*")
    a = ap.parse_args()
    raw = dict(kv.partition("=")[::2] for kv in a.kv)

    try:
        with open(a.output, encoding="utf-8", errors="replace") as f:
            out = f.read()
    except OSError:
        out = ""
    parsed = parse_ab(out)
    parsed.update({"failed": 0, "non2xx": 0})  # ab leaves out the lines it has nothing for
    parsed.update(grab(out, AB_EXTRA))

    def i(k):
        return int(raw.get(k) or 0)

    row = {k: raw.get(k, "") for k in FIELDS}
    row.update(parsed)
    req = parsed.get("requests")
    detail = [parsed["error_detail"]] if parsed.get("error_detail") else []
    errors = parsed.get("errors", 0)
    if i("exit_code"):
        detail.append(f"exit code {i('exit_code')}")
    complete = all(k in parsed for k in ("requests", "rps", "lat_mean_ms", "p50_ms", "p99_ms"))
    if not complete:
        tail = " | ".join(ln.strip() for ln in out.strip().splitlines()[-2:])[:160]
        detail.append("output incomplete" + (f" ({tail})" if tail else ""))
    if raw.get("admitted") and req and i("admitted") < req:
        # The sanity checks passed, so this means the service stopped admitting mid-run (a
        # reload, a limit) or the route went elsewhere: either way not a gateway measurement.
        errors += req - i("admitted")
        detail.append(f"service admitted only {i('admitted')} of {req}")
    row["errors"] = errors
    row["error_detail"] = "; ".join(detail)
    row["ok"] = int(complete and not i("exit_code") and errors == 0)

    tck = i("clk_tck") or 100
    wall = float(raw.get("wall_s") or 0) or float("nan")

    def pct(j):
        return round(100.0 * j / tck / wall, 2)  # percent of ONE core

    server_j, backend_j, loadgen_j = i("server_j"), i("backend_j"), i("loadgen_j")
    # The server's exact CPU time from schedstat when the snapshot could read it (ticks are
    # 10 ms: too coarse for a run that takes a tenth of a second of CPU), in jiffies.
    server_j = i("server_ns") * tck / 1e9 or server_j
    # For direct the backend is the server: count it once.
    tested_j = server_j + loadgen_j + (0 if raw.get("target") == "direct" else backend_j)
    busy_j = i("user_j") + i("nice_j") + i("system_j") + i("irq_j") + i("softirq_j")
    row["server_cpu_pct"] = pct(server_j)
    row["backend_cpu_pct"] = pct(backend_j)
    row["loadgen_cpu_pct"] = pct(loadgen_j)
    # Busy time of the whole machine that is not the server, backend or ab: a compiler or
    # test run of someone else's shows up here.
    row["others_cpu_pct"] = pct(busy_j - tested_j)
    row["steal_pct"] = pct(i("steal_j"))
    row["cpu_s_per_10k"] = round(server_j / tck / req * 10000, 4) if req else ""
    add_backend_conns(row, raw, req)
    append_row(a.csv, FIELDS, row)

    print(
        f"  rep {row['rep']} c{row['conc']:<3} {row['target']:18} req/s {fmt(parsed.get('rps'), '8.0f')}  "
        f"mean {fmt(parsed.get('lat_mean_ms'), '6.3f')} ms  p50 {fmt(parsed.get('p50_ms'), '3.0f')} ms  "
        f"p99 {fmt(parsed.get('p99_ms'), '3.0f')} ms  server CPU {fmt(row['server_cpu_pct'], '5.1f')}%  "
        f"CPU-s/10k {fmt(row['cpu_s_per_10k'], '6.3f')}  others {fmt(row['others_cpu_pct'], '5.1f')}%"
        + ("" if row["ok"] else f"  ** FAILED: {row['error_detail']}"),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
