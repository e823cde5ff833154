#!/usr/bin/env bash
# bench/tracing.sh - what do traces cost per proxied request?
#
# Question answered:
#   Requests per proxy CPU-second of Gatehouse with `tracing` off, sampling 1 % and sampling
#   100 % of requests, the modes measured seconds apart, many times over, with nginx's plain
#   keep-alive proxy beside them.
#
# Set-up: as bench/proxy.sh (wrk -t1 -c100 and the backend nginx on CPU 0, the proxies on CPU 1
# with one worker, keep-alive to the backend, a 75-byte file), but every proxy started once and
# left running: nginx's plain keep-alive proxy and three Gatehouse processes of the same binary
# and configuration, one per mode (off, sampling 1 %, sampling 100 %). Each round loads each of
# the four in turn, the order rotated by one per round, so the modes of one round run seconds
# apart and a round's costs are read against its own `off` (this machine's speed drifts by 10 %
# and more between runs a minute apart). Spans go over OTLP/HTTP to a sink on CPU 0 (an nginx
# answering 200 to POST /v1/traces, which reads and drops the body), so the exporter does its
# whole work: batching, protobuf encoding, the HTTP exchange.
#
# Output: a Markdown table on stdout: per mode, the median and range of Gatehouse's requests per
# proxy CPU-second (the process's utime+stime, every thread: the exporter's too), nginx's in the
# same rounds, Gatehouse/nginx, and the cost against `off` (1 - mode/off per round: median and
# quartiles over the rounds); written into BENCHMARKS.md under "## Tracing (bench/tracing.sh)"
# unless BENCHMARKS_MD=none.
#
# Run: GATEHOUSE_BIN=target/release/gatehouse bench/tracing.sh     (needs nginx, wrk, taskset)
#   REPS [30] rounds  DURATION [2] seconds per run  BENCHMARKS_MD [<repo>/BENCHMARKS.md]
set -Eeuo pipefail
. "$(dirname "$0")/lib/common.sh"

REPS=${REPS:-30}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
DURATION=${DURATION:-2}
BENCHMARKS_MD=${BENCHMARKS_MD:-$ROOT/BENCHMARKS.md}
HAPROXY_MAXCONN=4096 # no HAProxy here; raise_nofile reads it
CLK_TCK=$(getconf CLK_TCK)
log() { printf '[tracing.sh] %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
need_commands nginx wrk python3 taskset getconf
check_integers REPS DURATION
gatehouse_binary
export GATEHOUSE_BIN

make_workdir gatehouse-tracing-bench
raise_nofile
mkdir -p "$WORK/www" "$WORK/nginx"
write_www "$WORK/www"
start_backend 0
free_ports 5
read -r SINK P_NGINX P_OFF P_ONE P_ALL <<<"${REPLY_PORTS[*]}"
start_otlp_sink 0 "$SINK"

nginx_proxy_conf "$WORK/nginx" "$P_NGINX" "$P_BACKEND" >"$WORK/nginx/nginx.conf"
start_proc nginx 1 nginx -p "$WORK/nginx" -e "$WORK/nginx/error.log" -c "$WORK/nginx/nginx.conf"
wait_http nginx "http://127.0.0.1:$P_NGINX/test.html" 75 "$WORK/nginx/error.log"

declare -A PORT=([nginx]=$P_NGINX [off]=$P_OFF [1%]=$P_ONE [100%]=$P_ALL)
declare -A RATIO=([1%]=0.01 [100%]=1)
MODES=(off 1% 100%)
for mode in "${MODES[@]}"; do
	name=gatehouse-${mode%\%}
	tracing=
	if [[ $mode != off ]]; then
		tracing="tracing:
  otlp: {endpoint: \"http://127.0.0.1:$SINK\"}
  sampler: {ratio: ${RATIO[$mode]}, parent_based: true}"
	fi
	cat >"$WORK/$name.yaml" <<EOF
workers: 1
reuse_port: true
cpu_affinity: off
access_log: { path: "off" }
listeners:
  main: { bind: "127.0.0.1:${PORT[$mode]}", max_connections: 20000 }
$(gatehouse_upstream 256)
$tracing
EOF
	gatehouse_check "$WORK/$name.yaml"
	start_proc "$name" 1 "$GATEHOUSE_BIN" run --config "$WORK/$name.yaml"
	wait_http "$name" "http://127.0.0.1:${PORT[$mode]}/test.html" 75
	PID[$mode]=${PID[$name]}
done

TARGETS=(nginx "${MODES[@]}")
for t in "${TARGETS[@]}"; do # warm-up: pools filled, caches and allocators at their working size
	taskset -c 0 timeout -k 5 30 wrk -t1 -c100 -d1s "http://127.0.0.1:${PORT[$t]}/test.html" >/dev/null
done
RESULTS=$WORK/results.csv
echo "rep,mode,requests,cpu_ticks,req_per_cpu_s" >"$RESULTS"
for ((rep = 0; rep < REPS; rep++)); do
	for ((k = 0; k < ${#TARGETS[@]}; k++)); do
		t=${TARGETS[$(((k + rep) % ${#TARGETS[@]}))]}
		tree_jiffies "${PID[$t]}"
		c0=$REPLY
		out=$(taskset -c 0 timeout -k 5 $((DURATION + 30)) wrk -t1 -c100 -d"${DURATION}s" "http://127.0.0.1:${PORT[$t]}/test.html")
		tree_jiffies "${PID[$t]}"
		c1=$REPLY
		n=$(awk '/requests in/ {print $1}' <<<"$out")
		if grep -q "Non-2xx" <<<"$out"; then die "$t: answers other than 2xx: $out"; fi
		((c1 > c0)) || die "$t: no CPU time counted"
		echo "$rep,$t,$n,$((c1 - c0)),$(((n * CLK_TCK) / (c1 - c0)))" >>"$RESULTS"
	done
	log "round $((rep + 1))/$REPS"
done

python3 - "$RESULTS" "$REPS" "$DURATION" "$(git_source crates bench)" >"$WORK/section.md" <<'PY'
import csv, statistics, sys
path, reps, duration, source = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
fig = {}
for r in rows:
    fig.setdefault(r["mode"], {})[r["rep"]] = float(r["req_per_cpu_s"])
def q(values, p):
    v = sorted(values)
    return v[round(p * (len(v) - 1))]
print("## Tracing (bench/tracing.sh)\n")
print(f"bench/tracing.sh: {reps} rounds; in each, wrk -t1 -c100 for {duration} s against nginx's plain keep-alive proxy "
      "and three Gatehouse processes (tracing off, sampling 1 %, sampling 100 %), all started once, each alone on CPU 1 "
      "with one worker, in an order rotated per round; 75-byte file; spans exported over OTLP/HTTP to a sink on CPU 0. "
      "Cost = 1 - (requests per proxy CPU-second at the mode) / (the same with tracing off), per round; median and "
      f"quartiles over the rounds. Source: {source}.\n")
print("| tracing | Gatehouse req per proxy CPU-s, median (range) | nginx, same rounds | Gatehouse / nginx, median | cost vs off, median (quartiles) |")
print("|---|---|---|---|---|")
for m in ["off", "1%", "100%"]:
    g = fig.get(m, {})
    if not g:
        continue
    n = fig.get("nginx", {})
    over = [g[k] / n[k] for k in g if k in n]
    costs = [1 - g[k] / fig["off"][k] for k in g if k in fig["off"]]
    cost = "—" if m == "off" else f"{statistics.median(costs) * 100:.1f} % ({q(costs, .25) * 100:.1f} to {q(costs, .75) * 100:.1f} %)"
    print(f"| {m} | {statistics.median(g.values()):,.0f} ({min(g.values()):,.0f}–{max(g.values()):,.0f}) | "
          f"{statistics.median(n.values()):,.0f} | {statistics.median(over):.2f} | {cost} |")
PY
cat "$WORK/section.md"
if [[ $BENCHMARKS_MD != none ]]; then
	python3 "$BENCH/lib/update_section.py" "$BENCHMARKS_MD" <"$WORK/section.md"
fi
