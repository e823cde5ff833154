#!/usr/bin/env python3
"""Parse one load-generator output (wrk, ab, or ghz's JSON report), combine it with the raw
CPU and connection counters measured by bench/proxy.sh, and append one row to the
per-run CSV.  Standard library only.

Usage:
    record_run.py --csv RUNS.csv --tool wrk|ab|ghz --output LOADGEN_OUTPUT \
        key=value [key=value ...]

Raw keys passed by proxy.sh (all integers unless noted):
    rep, seq, target, file, exit_code, clk_tck,
    wall_s (float, seconds of the measured window),
    server_ns                          the proxy's CPU from schedstat (0: use proxy_j)
    proxy_j, backend_j, loadgen_j      jiffies (utime+stime) of the process
                                        trees under test during the window
    user_j, nice_j, system_j, idle_j, iowait_j, irq_j, softirq_j, steal_j
                                        /proc/stat "cpu" line deltas (all CPUs)
    cpu0_busy_j, cpu0_total_j, cpu1_busy_j, cpu1_total_j
    accepts_before, accepts_after      backend nginx stub_status "accepts"
    accepts_self                       connections the "after" reading itself added to the
                                        count: 1 (nginx's stub_status, the default) or 0
                                        (bench/grpc.sh's backend counts its gRPC listener only)

--extra KEY,KEY...  more raw keys kept as columns after those (bench/reencrypt.sh: its row
                    and the backend's TLS handshake counts; bench/grpc.sh: its row, the messages
                    per call and the calls the backend served).

With ghz (bench/grpc.sh), a request is a gRPC call and every call whose status is not OK is an
error; latencies are of the OK calls (ghz without --count-errors).

Prints a one-line human summary of the run on stderr.
"""

import argparse
import csv
import json
import os
import re
import sys

FIELDS = [
    # identity
    "rep", "seq", "tool", "target", "file",
    # load generator results
    "exit_code", "requests", "rps", "lat_mean_ms", "p99_ms",
    "errors", "error_detail", "ok",
    # derived CPU / connection figures
    "wall_s", "proxy_cpu_pct", "req_per_cpu_s", "backend_cpu_pct",
    "loadgen_cpu_pct", "others_cpu_pct", "irq_softirq_pct", "steal_pct",
    "machine_busy_pct", "cpu0_busy_pct", "cpu1_busy_pct",
    "backend_new_conns", "conns_per_100k",
    # raw counters
    "clk_tck", "proxy_j", "server_ns", "backend_j", "loadgen_j",
    "user_j", "nice_j", "system_j", "idle_j", "iowait_j", "irq_j",
    "softirq_j", "steal_j", "cpu0_busy_j", "cpu0_total_j",
    "cpu1_busy_j", "cpu1_total_j", "accepts_before", "accepts_after",
]

_UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}


def _wrk_time_ms(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", text)
    if not m:
        raise ValueError(f"unparsable wrk time {text!r}")
    return float(m.group(1)) * _UNIT_MS[m.group(2)]


def grab(out, fields):
    """{key: conv(group 1)} for each (key, pattern, conv) whose pattern matches a line of out."""
    r = {}
    for key, pattern, conv in fields:
        m = re.search(pattern, out, re.M)
        if m:
            r[key] = conv(m.group(1))
    return r


# (field, pattern of an output line, conversion of its group 1) for grab(), per tool.
WRK_LINES = [("requests", r"^\s*(\d+) requests in [0-9.]+\w+", int), ("rps", r"^Requests/sec:\s+([0-9.]+)", float),
             ("lat_mean_ms", r"^\s*Latency\s+(\S+)\s", _wrk_time_ms), ("p99_ms", r"^\s*99%\s+(\S+)\s*$", _wrk_time_ms)]
AB_LINES = [("requests", r"^Complete requests:\s+(\d+)", int), ("rps", r"^Requests per second:\s+([0-9.]+)", float),
            # The first "Time per request" line is the mean per request (concurrency
            # taken into account), i.e. the mean latency a client saw.
            ("lat_mean_ms", r"^Time per request:\s+([0-9.]+) \[ms\] \(mean\)$", float),
            ("p99_ms", r"^\s*99%\s+(\d+)", float)]


def parse_wrk(out):
    r = grab(out, WRK_LINES)
    errors, detail = 0, []
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        n = sum(int(x) for x in m.groups())
        if n:
            errors += n
            detail.append("socket errors " + "/".join(m.groups()) + " (connect/read/write/timeout)")
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if m and int(m.group(1)):
        errors += int(m.group(1))
        detail.append(f"non-2xx/3xx {m.group(1)}")
    r["errors"] = errors
    r["error_detail"] = "; ".join(detail)
    return r


def parse_ab(out):
    r = grab(out, AB_LINES)
    errors, detail = 0, []
    m = re.search(r"^Failed requests:\s+(\d+)(?:\s*\n\s*\((.*)\))?", out, re.M)
    if m and int(m.group(1)):
        errors += int(m.group(1))
        detail.append(f"failed {m.group(1)}" + (f" ({m.group(2).strip()})" if m.group(2) else ""))
    m = re.search(r"^Non-2xx responses:\s+(\d+)", out, re.M)
    if m and int(m.group(1)):
        errors += int(m.group(1))
        detail.append(f"non-2xx {m.group(1)}")
    m = re.search(r"^Write errors:\s+(\d+)", out, re.M)
    if m and int(m.group(1)):
        errors += int(m.group(1))
        detail.append(f"write errors {m.group(1)}")
    m = re.search(r"^Keep-Alive requests:\s+(\d+)", out, re.M)
    if m and "requests" in r and int(m.group(1)) < r["requests"]:
        # Not an error, but worth knowing: the server/proxy closed client
        # connections, so ab reconnected.
        detail.append(f"keep-alive only {m.group(1)}/{r['requests']}")
    r["errors"] = errors
    r["error_detail"] = "; ".join(detail)
    return r


def parse_ghz(out):
    """The figures of ghz's `-O json` report: calls, calls/s, mean and p99 latency; errors are the
    calls whose status was not OK, with ghz's error messages as the detail."""
    try:
        rep = json.loads(out)
    except ValueError:
        return {}
    r, detail = {}, []
    if isinstance(rep.get("count"), int):
        r["requests"] = rep["count"]
    if isinstance(rep.get("rps"), (int, float)):
        r["rps"] = float(rep["rps"])
    if isinstance(rep.get("average"), (int, float)):
        r["lat_mean_ms"] = rep["average"] / 1e6
    p99 = [x["latency"] for x in rep.get("latencyDistribution") or [] if x.get("percentage") == 99]
    if p99:
        r["p99_ms"] = p99[0] / 1e6
    statuses = rep.get("statusCodeDistribution") or {}
    errors = sum(n for status, n in statuses.items() if status != "OK")
    if errors:
        detail.append("status " + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items()) if s != "OK"))
    for msg, n in sorted((rep.get("errorDistribution") or {}).items(), key=lambda kv: -kv[1])[:3]:
        detail.append(f"{n} x {msg[:120]}")
    if rep.get("count") and not statuses:
        errors = rep["count"]  # no status at all: nothing is known to have succeeded
        detail.append("no status codes in the report")
    r["errors"] = errors
    r["error_detail"] = "; ".join(detail)
    return r


PARSERS = {"wrk": parse_wrk, "ab": parse_ab, "ghz": parse_ghz}


def append_row(path, fields, row):
    """Appends row to the CSV at path, with the header line first when the file is new."""
    new_file = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new_file:
            w.writeheader()
        w.writerow(row)


def add_backend_conns(row, raw, req):
    """New backend connections in a run, from nginx's stub_status "accepts" before and after."""
    if raw.get("accepts_before") and raw.get("accepts_after"):
        # The "after" stub_status request is itself one accepted connection (nginx's).
        new = int(raw["accepts_after"]) - int(raw["accepts_before"]) - int(raw.get("accepts_self") or 1)
        row["backend_new_conns"] = new
        row["conns_per_100k"] = round(new * 100000.0 / req, 3) if req else ""


def fmt(v, spec):
    """A number formatted with `spec`, or "?" when the run did not produce it."""
    return format(v, spec) if isinstance(v, (int, float)) else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--tool", required=True, choices=sorted(PARSERS))
    ap.add_argument("--output", required=True)
    ap.add_argument("--extra", default="", help="comma-separated raw keys kept as extra columns")
    ap.add_argument("kv", nargs="*")
    a = ap.parse_args()

    raw = {}
    for kv in a.kv:
        k, _, v = kv.partition("=")
        raw[k] = v

    try:
        with open(a.output, encoding="utf-8", errors="replace") as f:
            out = f.read()
    except OSError:
        out = ""
    parsed = PARSERS[a.tool](out)

    def i(k):
        return int(raw.get(k) or 0)

    fields = FIELDS + [k for k in a.extra.split(",") if k and k not in FIELDS]
    row = {k: "" for k in fields}
    row.update({k: raw.get(k, "") for k in fields if k in raw})
    row["tool"] = a.tool
    row.update(parsed)

    exit_code = i("exit_code")
    complete = all(k in parsed for k in ("requests", "rps", "lat_mean_ms", "p99_ms"))
    detail = parsed.get("error_detail", "")
    if exit_code != 0:
        detail = (detail + "; " if detail else "") + f"exit code {exit_code}"
    if not complete:
        detail = (detail + "; " if detail else "") + "output incomplete"
        tail = [ln.strip() for ln in out.strip().splitlines()[-2:]]
        if tail:
            detail += " (" + " | ".join(tail)[:160] + ")"
    row["error_detail"] = detail
    row["ok"] = int(complete and exit_code == 0 and parsed.get("errors", 0) == 0)

    tck = i("clk_tck") or 100
    wall = float(raw.get("wall_s") or 0) or float("nan")

    def pct(j):
        return 100.0 * j / tck / wall  # percent of ONE core

    proxy_j, backend_j, loadgen_j = i("proxy_j"), i("backend_j"), i("loadgen_j")
    # The server's exact CPU time from schedstat when the snapshot could read it (ticks are
    # 10 ms: too coarse for a run that takes a tenth of a second of CPU), in jiffies.
    proxy_j = i("server_ns") * tck / 1e9 or proxy_j
    tested_j = proxy_j + loadgen_j + (0 if raw.get("target") == "direct" else backend_j)
    task_busy_j = i("user_j") + i("nice_j") + i("system_j")
    irq_j = i("irq_j") + i("softirq_j")
    total_j = task_busy_j + irq_j + i("idle_j") + i("iowait_j") + i("steal_j")

    row["proxy_cpu_pct"] = round(pct(proxy_j), 2)
    row["backend_cpu_pct"] = round(pct(backend_j), 2)
    row["loadgen_cpu_pct"] = round(pct(loadgen_j), 2)
    # Busy jiffies (user+nice+system+irq+softirq, all CPUs) not attributable to
    # the proxy, backend or load generator.  irq/softirq are included because
    # per-task utime+stime already contain the softirq work done in task
    # context (loopback TCP), so excluding them would go negative.
    row["others_cpu_pct"] = round(pct(task_busy_j + irq_j - tested_j), 2)
    row["irq_softirq_pct"] = round(pct(irq_j), 2)
    row["steal_pct"] = round(pct(i("steal_j")), 2)
    row["machine_busy_pct"] = round(100.0 * (task_busy_j + irq_j) / total_j, 2) if total_j else ""
    for c in ("cpu0", "cpu1"):
        t = i(f"{c}_total_j")
        row[f"{c}_busy_pct"] = round(100.0 * i(f"{c}_busy_j") / t, 2) if t else ""

    req = parsed.get("requests")
    # Requests per proxy CPU-second: completed requests / proxy CPU seconds in
    # the same window.  Equal to req/s / (CPU%/100) when the load generator's
    # own timing window and the CPU window coincide; immune to the small
    # start-up gap between them.
    row["req_per_cpu_s"] = round(req / (proxy_j / tck), 1) if req and proxy_j else ""

    add_backend_conns(row, raw, req)
    append_row(a.csv, fields, row)

    print(
        f"  rep {row['rep']} {a.tool:3} {row['target']:9} {row['file']:9} "
        f"req/s {fmt(parsed.get('rps'), '10.0f')}  mean {fmt(parsed.get('lat_mean_ms'), '6.2f')} ms  "
        f"p99 {fmt(parsed.get('p99_ms'), '6.2f')} ms  proxy CPU {fmt(row['proxy_cpu_pct'], '5.1f')}%  "
        f"req/CPU-s {fmt(row['req_per_cpu_s'], '8.0f')}  new backend conns {row['backend_new_conns']}"
        + ("" if row["ok"] else f"  ** FAILED: {detail}"),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
