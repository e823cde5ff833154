#!/usr/bin/env bash
# bench/tracing.sh - what do traces cost per proxied request?
#
# Question answered:
#   Requests per proxy CPU-second of Gatehouse with `tracing` off, sampling 1 % and sampling
#   100 % of requests, each measured with nginx's plain keep-alive proxy in the same run of
#   bench/proxy.sh (so the machine's drift cancels out in the Gatehouse/nginx ratio).
#
# Set-up: bench/proxy.sh (see its header) with TARGETS="nginx gatehouse", wrk, 75-byte file;
# Gatehouse's configuration gets the `tracing:` section of the mode (off: none). Spans are
# exported over OTLP/HTTP to a sink on CPU 0 (an nginx answering 200 to POST /v1/traces, which
# reads and drops the body), so the exporter does its whole work: batching, protobuf encoding,
# the HTTP exchange. The modes run in a rotated order, REPS times.
#
# Output: a Markdown table on stdout (median and range of req per proxy CPU-second, the
# Gatehouse/nginx ratio, and each mode's cost against `off`), written into BENCHMARKS.md under
# "## Tracing (bench/tracing.sh)" unless BENCHMARKS_MD=none.
#
# Run: GATEHOUSE_BIN=target/release/gatehouse bench/tracing.sh     (needs what proxy.sh needs)
#   REPS [5]  DURATION [5]  BENCHMARKS_MD [<repo>/BENCHMARKS.md]
set -Eeuo pipefail
. "$(dirname "$0")/lib/common.sh"

REPS=${REPS:-5}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
DURATION=${DURATION:-5}
BENCHMARKS_MD=${BENCHMARKS_MD:-$ROOT/BENCHMARKS.md}
log() { printf '[tracing.sh] %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
need_commands nginx python3 taskset
gatehouse_binary
export GATEHOUSE_BIN

make_workdir gatehouse-tracing-bench
free_ports 1
SINK=${REPLY_PORTS[0]}
start_otlp_sink 0 "$SINK"

section() { # section RATIO
	printf 'tracing:\n  otlp: {endpoint: "http://127.0.0.1:%s"}\n  sampler: {ratio: %s, parent_based: true}\n' "$SINK" "$1"
}
declare -A EXTRA=([off]="" [1%]="$(section 0.01)" [100%]="$(section 1)")
MODES=(off 1% 100%)
RESULTS=$WORK/results.csv
echo "rep,mode,target,req_per_cpu_s,proxy_cpu_pct,rps" >"$RESULTS"
for ((rep = 1; rep <= REPS; rep++)); do
	for ((k = 0; k < ${#MODES[@]}; k++)); do
		mode=${MODES[$(((k + rep - 1) % ${#MODES[@]}))]}
		log "rep $rep/$REPS: $mode"
		GATEHOUSE_YAML_EXTRA="${EXTRA[$mode]}" TARGETS="nginx gatehouse" TOOLS=wrk REPS=1 DURATION="$DURATION" \
			WARMUP=1 BENCHMARKS_MD=none "$BENCH/proxy.sh" >"$WORK/proxy-$rep-$k.md" 2>"$WORK/proxy-$rep-$k.log" ||
			{ tail -20 "$WORK/proxy-$rep-$k.log" >&2; exit 1; }
		python3 - "$BENCH/results/proxy-latest.csv" "$rep" "$mode" >>"$RESULTS" <<'PY'
import csv, sys
path, rep, mode = sys.argv[1:]
for r in csv.DictReader(open(path)):
    if r["ok"] == "1":
        print(f'{rep},{mode},{r["target"]},{r["req_per_cpu_s"]},{r["proxy_cpu_pct"]},{r["rps"]}')
PY
	done
done

python3 - "$RESULTS" "$REPS" "$DURATION" >"$WORK/section.md" <<'PY'
import csv, statistics, sys
path, reps, duration = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
modes = ["off", "1%", "100%"]
def per(mode, target):
    return [float(r["req_per_cpu_s"]) for r in rows if r["mode"] == mode and r["target"] == target]
def ratios(mode):
    out = []
    for rep in sorted({r["rep"] for r in rows}):
        g = [float(r["req_per_cpu_s"]) for r in rows if r["rep"] == rep and r["mode"] == mode and r["target"] == "gatehouse"]
        n = [float(r["req_per_cpu_s"]) for r in rows if r["rep"] == rep and r["mode"] == mode and r["target"] == "nginx"]
        if g and n:
            out.append(g[0] / n[0])
    return out
off = statistics.median(ratios("off"))
print("## Tracing (bench/tracing.sh)\n")
print(f"bench/tracing.sh: {reps} repetitions of bench/proxy.sh (wrk, 100 connections, {duration} s, 75-byte file, "
      "one proxy worker pinned to CPU 1) per mode, modes rotated; nginx's plain keep-alive proxy measured in each run. "
      "Spans exported over OTLP/HTTP to a sink on CPU 0. Cost = how many fewer requests per proxy CPU-second than "
      "`off`, from the medians of Gatehouse/nginx in the same runs.\n")
print("| tracing | Gatehouse req per proxy CPU-s, median (range) | nginx, same runs | Gatehouse / nginx, median (range) | cost vs off |")
print("|---|---|---|---|---|")
for m in modes:
    g, n, q = per(m, "gatehouse"), per(m, "nginx"), ratios(m)
    if not g:
        continue
    cost = 1 - statistics.median(q) / off
    print(f"| {m} | {statistics.median(g):,.0f} ({min(g):,.0f}–{max(g):,.0f}) | {statistics.median(n):,.0f} | "
          f"{statistics.median(q):.2f} ({min(q):.2f}–{max(q):.2f}) | {'—' if m == 'off' else f'{cost * 100:.1f} %'} |")
PY
cat "$WORK/section.md"
if [[ $BENCHMARKS_MD != none ]]; then
	python3 "$BENCH/lib/update_section.py" "$BENCHMARKS_MD" <"$WORK/section.md"
fi
