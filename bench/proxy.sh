#!/usr/bin/env bash
# bench/proxy.sh - keep-alive reverse-proxy benchmark: Gatehouse vs nginx vs HAProxy.
#
# Question answered:
#   How many requests per proxy CPU-second does Gatehouse forward compared with
#   nginx and HAProxy as keep-alive reverse proxies, pinned to one core, same run?
#
# Set-up (all on 127.0.0.1, free ports picked at start, everything in a mktemp -d
# work dir that is removed on exit):
#   CPU 0: backend nginx (1 worker, serves test.html = 75 B, 5k.html, 10k.html,
#          stub_status on /nginx_status) + the load generator (wrk or ab).
#   CPU 1: the proxy under test, alone: Gatehouse (workers: 1), nginx
#          (worker_processes 1, upstream keepalive 256) or HAProxy (nbthread 1,
#          http-reuse always).  "direct" = load generator -> backend, no proxy.
#   Each target gets an unrecorded wrk warm-up (WARMUP s) first, so upstream
#   pools are warm.  Then for each rep, for each file, for each tool, every
#   target is run once; the target order is rotated by one position per rep
#   (rep 1: direct nginx gatehouse haproxy, rep 2: nginx gatehouse haproxy
#   direct, ...), so Gatehouse always runs between peers and no target always
#   runs first or last.
#
# Measured per run (raw numbers in a CSV, see bench/lib/record_run.py):
#   req/s, mean latency, p99 (wrk --latency / ab percentile table; ab's is in
#   whole ms), proxy CPU % (CPU time of the proxy process tree from
#   /proc/*/task/*/schedstat, or utime+stime ticks from /proc/PID/stat when one
#   of its threads ended during the run, over the run's wall time, % of one
#   core; for "direct" the
#   backend's), req/s per proxy CPU-second (= completed requests / proxy CPU
#   seconds, i.e. req/s / (CPU%/100)), new backend connections per 100k
#   requests (backend stub_status "accepts" delta), others' CPU % (/proc/stat
#   user+nice+system minus proxy, backend and load generator; irq/softirq and
#   steal are kept separately in the CSV).  Failed requests, non-2xx, socket
#   errors or a non-zero exit flag the run in the table.
#
# Output: Markdown section on stdout, also written to BENCHMARKS.md (the section
# "## Proxy: keep-alive, 75-byte file (bench/proxy.sh)" is replaced, or appended
# if absent); per-run CSV copied to bench/results/proxy-latest.csv.
#
# Run (from anywhere; needs nginx, haproxy, wrk, ab, curl, python3, taskset and
# at least 2 CPUs):
#   bench/proxy.sh                                   # builds gatehouse (release)
#   GATEHOUSE_BIN=target/release/gatehouse bench/proxy.sh     # no build
#   DURATION=2 AB_N=5000 REPS=1 TARGETS="direct nginx haproxy" bench/proxy.sh
#   QUICK=1 bench/proxy.sh                           # smoke run, ~20 s after the build
#
# Environment knobs (defaults in brackets; QUICK=1 defaults after the slash):
#   GATEHOUSE_BIN   binary to test; unset = `cargo build --release -p gatehouse`
#                   and use target/release/gatehouse (or $CARGO_TARGET_DIR)
#   QUICK [0]       1 = smoke run: one repetition, short runs, wrk only, BENCHMARKS.md untouched
#   DURATION [5/1]  seconds per wrk run
#   AB_N [50000/3000]   requests per ab run
#   REPS [3/1]      repetitions of every (file, tool, target)
#   CONNS [100]     concurrent connections (wrk -c / ab -c)
#   FILES [test.html]   any of: test.html 5k.html 10k.html
#   TARGETS [direct nginx gatehouse haproxy]   subset/order of targets
#   TOOLS [wrk ab/wrk]  load generators to use
#   WARMUP [2/1]    seconds of unrecorded wrk warm-up per (file, target); 0 = none
#   PRIME [1]       1 = before each measured run, refill the proxy's upstream pool
#                   with a short clean ab -k burst (CONNS x 10 requests), so
#                   "new backend conns" counts connections opened under steady
#                   load, not the re-connects after the previous run's aborted
#                   in-flight requests (wrk stops mid-request); 0 = off
#   SETTLE [1]      seconds of sleep between runs
#   HAPROXY_MAXCONN [4096]   HAProxy global maxconn (fd budget: ulimit -n)
#   AB_TIMEOUT [300]         hard time limit for one ab run, seconds
#   BENCHMARKS_MD [<repo>/BENCHMARKS.md/none]   file to update; "none" = don't
#   KEEP_WORKDIR [0]         1 = keep the temp dir (configs, logs, raw outputs)
#   GATEHOUSE_YAML_EXTRA []  top-level YAML appended to Gatehouse's configuration (bench/tracing.sh
#                            adds its `tracing:` section this way)

set -Eeuo pipefail

# ORIG_PWD = where it was started; then in the repository: ROOT, BENCH = ROOT/bench.
# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

DURATION=${DURATION:-$(pick 5 1)}
AB_N=${AB_N:-$(pick 50000 3000)}
REPS=${REPS:-$(pick 3 1)}
CONNS=${CONNS:-100}
FILES=${FILES:-test.html}
TARGETS=${TARGETS:-direct nginx gatehouse haproxy}
TOOLS=${TOOLS:-$(pick 'wrk ab' wrk)}
WARMUP=${WARMUP:-$(pick 2 1)}
PRIME=${PRIME:-1}
SETTLE=${SETTLE:-1}
HAPROXY_MAXCONN=${HAPROXY_MAXCONN:-4096}
AB_TIMEOUT=${AB_TIMEOUT:-300}
# A smoke run's numbers are not for the record.
BENCHMARKS_MD=${BENCHMARKS_MD:-$(pick "$ROOT/BENCHMARKS.md" none)}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HEADING='## Proxy: keep-alive, 75-byte file (bench/proxy.sh)'

log() { printf '[proxy.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- validation
check_integers DURATION AB_N REPS CONNS WARMUP PRIME SETTLE HAPROXY_MAXCONN AB_TIMEOUT
((DURATION >= 1 && AB_N >= 1 && REPS >= 1 && CONNS >= 1)) ||
	die "DURATION, AB_N, REPS and CONNS must be at least 1"
((AB_N >= CONNS)) || die "AB_N ($AB_N) must be at least CONNS ($CONNS)"

read -r -a FILE_LIST <<<"$FILES"
read -r -a TARGET_LIST <<<"$TARGETS"
read -r -a TOOL_LIST <<<"$TOOLS"
((${#FILE_LIST[@]} && ${#TARGET_LIST[@]} && ${#TOOL_LIST[@]})) || die "FILES, TARGETS and TOOLS must not be empty"
for f in "${FILE_LIST[@]}"; do [[ -n ${SIZE[$f]:-} ]] || die "unknown file '$f' in FILES (use: ${!SIZE[*]})"; done
for t in "${TARGET_LIST[@]}"; do
	case $t in direct | nginx | gatehouse | haproxy) ;; *) die "unknown target '$t' in TARGETS (direct nginx gatehouse haproxy)" ;; esac
done
for t in "${TOOL_LIST[@]}"; do
	case $t in wrk | ab) ;; *) die "unknown tool '$t' in TOOLS (wrk ab)" ;; esac
done
need=(nginx curl python3 taskset getconf)
want haproxy && need+=(haproxy)
need+=("${TOOL_LIST[@]}")
((PRIME)) && need+=(ab)
((WARMUP)) && need+=(wrk)
need_commands "${need[@]}"
(($(nproc) >= 2)) || die "needs at least 2 CPUs (CPU 0: backend + load generator, CPU 1: proxy)"
taskset -c 1 true 2>/dev/null || die "cannot pin to CPU 1 (taskset -c 1 failed)"

CLK_TCK=$(getconf CLK_TCK)

# ------------------------------------------------------------ gatehouse binary
GATEHOUSE_VERSION=
want gatehouse && gatehouse_binary

# --------------------------------------------------- work dir, process cleanup
make_workdir gatehouse-proxy-bench

raise_nofile

# ------------------------------------------------- content, backend, configs
mkdir -p "$WORK"/{www,nginx,haproxy,gatehouse,runs}
write_www "$WORK/www"
start_backend 0
free_ports 3
read -r P_NGINX P_GATEHOUSE P_HAPROXY <<<"${REPLY_PORTS[*]}"
declare -A PORT=([direct]=$P_BACKEND [nginx]=$P_NGINX [gatehouse]=$P_GATEHOUSE [haproxy]=$P_HAPROXY)

nginx_proxy_conf "$WORK/nginx" "$P_NGINX" "$P_BACKEND" >"$WORK/nginx/nginx.conf"

haproxy_cfg 1 "    bind 127.0.0.1:$P_HAPROXY"$'\n' >"$WORK/haproxy/haproxy.cfg"

cat >"$WORK/gatehouse/gatehouse.yaml" <<EOF
workers: 1
reuse_port: true
cpu_affinity: off
access_log: { path: "off" }
listeners:
  main: { bind: "127.0.0.1:$P_GATEHOUSE", max_connections: 20000 }
$(gatehouse_upstream 256)
${GATEHOUSE_YAML_EXTRA:-}
EOF

# -------------------------------------------------------------- start servers
wait_line() { # wait_line NAME FILE PATTERN; at most ~10 s; 1 if not seen
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "${PID[$1]}" 2>/dev/null || return 1
		grep -Eq -- "$3" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

FIRST_FILE=${FILE_LIST[0]}
log "work dir $WORK; ports: backend $P_BACKEND nginx $P_NGINX gatehouse $P_GATEHOUSE haproxy $P_HAPROXY"

if want nginx; then
	start_proc nginx 1 nginx -p "$WORK/nginx" -e "$WORK/nginx/error.log" -c "$WORK/nginx/nginx.conf"
	wait_http nginx "http://127.0.0.1:$P_NGINX/$FIRST_FILE" "${SIZE[$FIRST_FILE]}" "$WORK/nginx/error.log"
fi

if want haproxy; then
	haproxy -c -q -f "$WORK/haproxy/haproxy.cfg" >&2 || die "haproxy rejected $WORK/haproxy/haproxy.cfg"
	start_proc haproxy 1 haproxy -db -f "$WORK/haproxy/haproxy.cfg"
	wait_http haproxy "http://127.0.0.1:$P_HAPROXY/$FIRST_FILE" "${SIZE[$FIRST_FILE]}"
fi

if want gatehouse; then
	if "$GATEHOUSE_BIN" --help 2>&1 | grep -Eq '^ +check '; then
		"$GATEHOUSE_BIN" check "$WORK/gatehouse/gatehouse.yaml" >"$WORK/gatehouse-check.txt" 2>&1 || {
			cat "$WORK/gatehouse-check.txt" >&2
			die "gatehouse check rejected $WORK/gatehouse/gatehouse.yaml (errors above)"
		}
	fi
	gh_args=(run --config "$WORK/gatehouse/gatehouse.yaml")
	status_json=0
	if "$GATEHOUSE_BIN" run --help 2>&1 | grep -q -- '--status-json'; then
		gh_args+=(--status-json)
		status_json=1
	fi
	start_proc gatehouse 1 "$GATEHOUSE_BIN" "${gh_args[@]}"
	if ((status_json)) && ! wait_line gatehouse "$WORK/gatehouse.out" '"event" *: *"ready"'; then
		kill -0 "${PID[gatehouse]}" 2>/dev/null || { show_logs gatehouse; die "gatehouse exited during start-up (config refused?)"; }
		log "warning: no {\"event\":\"ready\"} line from gatehouse after 10 s; falling back to polling"
	fi
	wait_http gatehouse "http://127.0.0.1:$P_GATEHOUSE/$FIRST_FILE" "${SIZE[$FIRST_FILE]}"
fi

# Every target must serve every file with the exact size before we measure.
for t in "${TARGET_LIST[@]}"; do
	for f in "${FILE_LIST[@]}"; do
		got=$(http_probe "http://127.0.0.1:${PORT[$t]}/$f")
		[[ $got == "200 ${SIZE[$f]}" ]] || die "sanity check: $t GET /$f -> '$got', want '200 ${SIZE[$f]}'"
	done
done

# ------------------------------------------------------------- measurement
CSV=$WORK/proxy-runs.csv
SEQ=0

run_load() { # run_load REP TOOL TARGET FILE [warmup]
	local rep=$1 tool=$2 target=$3 file=$4 warm=${5:-}
	local url="http://127.0.0.1:${PORT[$target]}/$file" name pid rc=0 out a0 a1
	name=$([[ $target == direct ]] && echo backend || echo "$target")
	pid=${PID[$name]}
	if [[ -n $warm ]]; then
		taskset -c 0 timeout -k 5 $((WARMUP + 30)) wrk -t1 -c"$CONNS" -d"${WARMUP}s" "$url" \
			>"$WORK/runs/warmup-$target-$file.txt" 2>&1 || log "warning: warm-up of $target /$file exited non-zero"
		return 0
	fi
	SEQ=$((SEQ + 1))
	out=$WORK/runs/$(printf '%03d' "$SEQ")-$tool-$target-$file.txt
	if ((PRIME)); then
		taskset -c 0 timeout -k 5 60 ab -k -n $((CONNS * 10)) -c "$CONNS" "$url" >"$out.prime" 2>&1 ||
			log "warning: pool priming of $target /$file exited non-zero (see KEEP_WORKDIR=1 $out.prime)"
		sleep 0.2 # let the primer's client connections finish closing
	fi
	a0=$(backend_accepts) || die "cannot read backend stub_status"
	declare -A S0=() S1=()
	snap S0 "$pid"
	if [[ $tool == wrk ]]; then
		taskset -c 0 timeout -k 5 $((DURATION + 30)) \
			wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$url" >"$out" 2>&1 &
	else
		taskset -c 0 timeout -k 5 "$AB_TIMEOUT" \
			ab -k -n "$AB_N" -c "$CONNS" "$url" >"$out" 2>&1 &
	fi
	LOADGEN_PID=$!
	wait "$LOADGEN_PID" || rc=$?
	LOADGEN_PID=
	snap S1 "$pid"
	a1=$(backend_accepts) || die "cannot read backend stub_status"
	kill -0 "$pid" 2>/dev/null || { show_logs "$name"; die "$name died during the $tool run against $target"; }
	local -a kv=(
		"rep=$rep" "seq=$SEQ" "target=$target" "file=$file" "exit_code=$rc" "clk_tck=$CLK_TCK"
		"proxy_j=$((S1[server] - S0[server]))" "loadgen_j=$((S1[self_children] - S0[self_children]))"
		"accepts_before=$a0" "accepts_after=$a1"
	)
	snap_deltas S0 S1
	kv+=("${REPLY_KV[@]}")
	python3 "$BENCH/lib/record_run.py" --csv "$CSV" --tool "$tool" --output "$out" "${kv[@]}"
}

START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
if ((WARMUP > 0)); then
	for f in "${FILE_LIST[@]}"; do
		for t in "${TARGET_LIST[@]}"; do
			log "warm-up: $t /$f (${WARMUP}s wrk)"
			run_load 0 wrk "$t" "$f" warmup
		done
	done
fi

for ((rep = 1; rep <= REPS; rep++)); do
	rotated $((rep - 1)) "${TARGET_LIST[@]}"
	log "rep $rep/$REPS: order ${REPLY_TARGETS[*]}"
	for f in "${FILE_LIST[@]}"; do
		for tool in "${TOOL_LIST[@]}"; do
			for t in "${REPLY_TARGETS[@]}"; do
				sleep "$SETTLE"
				run_load "$rep" "$tool" "$t" "$f"
			done
		done
	done
done

# ---------------------------------------------------------------- reporting
results_csv "$CSV" proxy-latest.csv
versions=("$(nginx -v 2>&1 | sed 's/^nginx version: //')")
want haproxy && versions+=("$(haproxy -v 2>/dev/null | head -n 1 | sed 's/ - https.*//; s/ *$//')")
for t in "${TOOL_LIST[@]}"; do
	case $t in
	wrk) versions+=("$( (wrk --version 2>&1 || true) | head -n 1 | awk '{ print "wrk " $2 }')") ;;
	ab) versions+=("$(ab -V 2>&1 | head -n 1 | sed 's/^This is //; s/, Version/ Version/; s/ <.*//')") ;;
	esac
done
[[ -n $GATEHOUSE_VERSION ]] && versions+=("gatehouse: ${GATEHOUSE_VERSION% }")
{
	echo "- Date: $START_DATE (finished $(date -u '+%H:%M:%S UTC'))"
	echo "- Machine: $(nproc) CPUs, $(cpu_model), Linux $(uname -r); clock tick $CLK_TCK Hz"
	printf -v vline '%s; ' "${versions[@]}"
	echo "- Versions: ${vline%; }"
	echo "- Source: git $(git_source)"
	echo "- Settings: TARGETS=\"${TARGET_LIST[*]}\" TOOLS=\"${TOOL_LIST[*]}\" FILES=\"${FILE_LIST[*]}\" REPS=$REPS DURATION=${DURATION}s (wrk -t1 -c$CONNS --latency) AB_N=$AB_N (ab -k -c$CONNS) WARMUP=${WARMUP}s PRIME=$PRIME"
	echo "- Layout: backend nginx (1 worker) and load generator on CPU 0; proxy under test alone on CPU 1 with one worker/thread. Target order rotated by one each rep; runs interleaved."
	rig_constant SAME_HEADERS_NOTE
	echo "- Columns: proxy CPU % = CPU time of the proxy's process tree (the scheduler's per-thread clock, /proc/*/task/*/schedstat; utime+stime ticks for a run in which one of its threads ended) / wall time (100 % = one core; for direct: the backend's). req/s per proxy CPU-s = completed requests / proxy CPU-seconds. New backend conns = backend stub_status accepts delta during the run (pools warmed$( ((PRIME)) && echo " and refilled before each run"); for direct: the client's own connections). Others' CPU % = /proc/stat busy time (incl. irq/softirq) not used by proxy, backend or load generator (one core = 100 %). ab's p99 has 1 ms resolution. Raw per-run numbers: bench/results/proxy-latest.csv."
} >"$WORK/meta.md"

update_args
echo
python3 "$BENCH/lib/summarize.py" "$CSV" --heading "$HEADING" --meta "$WORK/meta.md" "${REPLY_UPDATE[@]}"
echo
log "per-run CSV: $BENCH/results/proxy-latest.csv${REPLY_UPDATE:+; updated $BENCHMARKS_MD}"
